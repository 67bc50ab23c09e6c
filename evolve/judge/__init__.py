"""The judge: prompt assembly and typed outcomes of one judge call.

The judge scores one target on one criterion of a rubric (:mod:`evolve.rubric`). A judge
prompt is: fixed protocol + case + target (+ reference for criteria that may see it) +
criterion definition and anchors + optional *guidance* (<= 800 characters) - the part that
calibration evolves. Its verdict is a strict JSON schema (:func:`evolve.llm.response_format`);
every outcome is a score, ``not_evaluable`` or ``model_failure``, never a silent default.
"""

from evolve.judge._judge import (
    NOT_EVALUABLE,
    Judge,
    JudgeOutcome,
    JudgeSettings,
    prompt_hash,
    verdict_model,
)

__all__ = [
    "NOT_EVALUABLE",
    "Judge",
    "JudgeOutcome",
    "JudgeSettings",
    "prompt_hash",
    "verdict_model",
]
