"""The judge: prompt assembly and typed outcomes of one judge call.

The judge scores one target on one criterion of a rubric (:mod:`evolve.rubric`, re-exported
here for convenience). A judge prompt is: fixed protocol + case + target (+ reference for criteria that may see it)
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
from evolve.rubric import (
    MAX_GUIDANCE_CHARS,
    Criterion,
    Rubric,
    default_prompts_root,
    load_initial_guidance,
    load_protocol,
    load_rubric,
)

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
