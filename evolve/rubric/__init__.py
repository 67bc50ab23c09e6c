"""Rubrics: the criteria a judge scores and physicians rate, and where they are loaded from.

A *rubric* (``judge_prompts/<id>/rubric.json``) lists criteria, each on an integer ordinal
scale with one anchor per score, the components of a target it applies to, and an
applicability rule. Next to it live the fixed judge *protocol* (``protocol.md``) and the
initial *guidance* candidates of each criterion (``guidance/<criterion>/*.md``, at most
:data:`MAX_GUIDANCE_CHARS` characters each) that calibration starts from.

The rubric sits below everything that reads it: rating packs (``evolve.data``) check their
ratings against it, the judge (``evolve.judge``) turns it into prompts, archives bound guidance
length by it. It imports nothing of ``evolve`` but the error tree.
"""

from evolve.rubric._bundle import RUBRIC_ID_PATTERN, RubricBundle
from evolve.rubric._loading import (
    MAX_GUIDANCE_CHARS,
    PROMPTS_ROOT_ENV,
    default_prompts_root,
    load_initial_guidance,
    load_protocol,
    load_rubric,
    resolve_prompts_root,
    rubric_source,
    shipped_prompts_root,
)
from evolve.rubric._models import Criterion, Rubric

__all__ = [
    "MAX_GUIDANCE_CHARS",
    "PROMPTS_ROOT_ENV",
    "RUBRIC_ID_PATTERN",
    "Criterion",
    "Rubric",
    "RubricBundle",
    "default_prompts_root",
    "load_initial_guidance",
    "load_protocol",
    "load_rubric",
    "resolve_prompts_root",
    "rubric_source",
    "shipped_prompts_root",
]
