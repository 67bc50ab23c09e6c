"""Rubrics: the criteria a judge scores and physicians rate, and where they are loaded from.

A *rubric* (``judge_prompts/<id>/rubric.json``) lists criteria, each on an integer ordinal
scale with one anchor per score, the components of a target it applies to, and an
applicability rule. Next to it live the fixed judge *protocol* (``protocol.md``) and the
initial *guidance* candidates of each criterion (``guidance/<criterion>/*.md``, at most
:data:`MAX_GUIDANCE_CHARS` characters each) that calibration starts from.

The rubric sits below everything that reads it: rating packs (``evolve.data``) check their
ratings against it, the judge (``evolve.judge``) turns it into prompts, archives bound guidance
length by it. It imports nothing of ``evolve`` but the error tree (and, to write a rubric folder
atomically, :func:`evolve.runs.atomic_write`).

A rubric of one's own starts from :func:`scaffold_rubric` (``evolve rubric new``), is checked by
:func:`check_rubric_folder` (``evolve rubric check``) and travels in memory as a
:class:`RubricBundle`; :func:`rubric_field_reference` documents every ``rubric.json`` field.
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
from evolve.rubric._reference import rubric_field_reference
from evolve.rubric._scaffold import (
    PLACEHOLDER,
    CriterionSpec,
    check_rubric_folder,
    criterion_specs,
    parse_scale,
    rubric_summary,
    scaffold_rubric,
    unedited_placeholders,
)
from evolve.rubric._snapshot import (
    SNAPSHOT_SOURCES,
    PromptsSnapshot,
    RubricCopy,
    read_prompts_snapshot,
    run_prompts_root,
    snapshot_changes,
    write_prompts_snapshot,
)

__all__ = [
    "MAX_GUIDANCE_CHARS",
    "PLACEHOLDER",
    "PROMPTS_ROOT_ENV",
    "RUBRIC_ID_PATTERN",
    "SNAPSHOT_SOURCES",
    "Criterion",
    "CriterionSpec",
    "PromptsSnapshot",
    "Rubric",
    "RubricBundle",
    "RubricCopy",
    "check_rubric_folder",
    "criterion_specs",
    "default_prompts_root",
    "load_initial_guidance",
    "load_protocol",
    "load_rubric",
    "parse_scale",
    "read_prompts_snapshot",
    "resolve_prompts_root",
    "rubric_field_reference",
    "rubric_source",
    "rubric_summary",
    "run_prompts_root",
    "scaffold_rubric",
    "shipped_prompts_root",
    "snapshot_changes",
    "unedited_placeholders",
    "write_prompts_snapshot",
]
