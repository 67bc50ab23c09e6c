"""The judge: rubric loading, prompt assembly and typed outcomes of one judge call.

A *rubric* (``judge_prompts/<id>/rubric.json``) lists criteria, each on an integer ordinal
scale with one anchor per score, the components it applies to and its applicability rule.
A judge prompt is: fixed protocol + case + target (+ reference for criteria that may see it)
+ criterion definition and anchors + optional *guidance* (<= 800 characters) - the part that
calibration evolves.
"""

from evolve.judge._judge import (
    NOT_EVALUABLE,
    Judge,
    JudgeOutcome,
    JudgeSettings,
    parse_json_object,
    prompt_hash,
    response_format,
    verdict_model,
)
from evolve.judge._rubric import (
    MAX_GUIDANCE_CHARS,
    default_prompts_root,
    load_initial_guidance,
    load_protocol,
    load_rubric,
)
from evolve.judge._rubric_models import Criterion, Rubric

__all__ = [
    "NOT_EVALUABLE",
    "Judge",
    "JudgeOutcome",
    "JudgeSettings",
    "parse_json_object",
    "prompt_hash",
    "response_format",
    "verdict_model",
    "MAX_GUIDANCE_CHARS",
    "Criterion",
    "Rubric",
    "default_prompts_root",
    "load_initial_guidance",
    "load_protocol",
    "load_rubric",
]
