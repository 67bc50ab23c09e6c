"""The judge: prompt assembly and typed outcomes of one judge call.

The judge scores one target on one criterion of a rubric (:mod:`evolve.rubric`). A judge
prompt is: fixed protocol + criterion definition and anchors + reply format + case + target
(+ reference for criteria that may see it) + optional *guidance* (<= 800 characters) - the
part that calibration evolves, last, so that calls differing only in it share the rest as a
prefix a server can serve from its cache (``JudgeSettings.layout``; judges made before that
order keep theirs: :func:`with_legacy_layout`). Its verdict is a strict JSON schema (:func:`evolve.llm.response_format`);
every outcome is a score, ``not_evaluable`` or ``model_failure``, never a silent default.
The seed of each call is hashed from (run seed, phase, criterion, repeat) (:func:`derive_seed`),
so whoever judges again with a run's policy sends the very requests the run sent.
"""

from evolve.judge._judge import (
    NOT_EVALUABLE,
    Judge,
    JudgeOutcome,
    JudgeSettings,
    prompt_hash,
    verdict_model,
    with_legacy_layout,
)
from evolve.judge._seeds import derive_seed

__all__ = [
    "NOT_EVALUABLE",
    "Judge",
    "JudgeOutcome",
    "JudgeSettings",
    "derive_seed",
    "prompt_hash",
    "verdict_model",
    "with_legacy_layout",
]
