"""Scoring: a calibrated judge on new outputs (``evolve judge``).

A calibration ends in a judge file (:mod:`evolve.calibrated`): per criterion the guidance that
won, validated on held-out cases against physicians, with the rubric, the judge settings and
the seed policy it was validated under. Scoring applies exactly that judge to other targets -
a rating pack or any table read through the table importer's column mapping, rated or not:

* every call is the validation re-scoring's call (same rubric copy, protocol, guidance, judge
  settings, seeds ``derive_seed(run_seed, "reeval", criterion, r)``), so a target the
  calibration validated gets the same prompt hash and its answer comes from the cache;
* every (criterion, target) ends in one status - ``scored``, ``failed``, ``not_evaluable`` or
  ``excluded`` (the criterion does not apply to the target's component) - and they add up;
* rated targets are also scored without guidance, for the comparison in the report.

The engine writes the run folder's tables (:class:`~evolve.runs.ScoringFolder`); the report
(means with intervals, agreement, physician-anchored means) is :mod:`evolve.report`'s, and
:func:`evolve.workflows.run_judge` chains the two.
"""

from evolve.scoring._engine import (
    CALL_COLUMNS,
    ITEM_COLUMNS,
    RATING_COLUMNS,
    STATUSES,
    ScoringCounts,
    ScoringResult,
    check_scoring_resume,
    check_statements,
    chosen_criteria,
    score_targets,
    scoring_requests,
)
from evolve.scoring._targets import ScoringTargets, read_targets, select_cases

__all__ = [
    "CALL_COLUMNS",
    "ITEM_COLUMNS",
    "RATING_COLUMNS",
    "STATUSES",
    "ScoringCounts",
    "ScoringResult",
    "ScoringTargets",
    "check_scoring_resume",
    "check_statements",
    "chosen_criteria",
    "read_targets",
    "score_targets",
    "scoring_requests",
    "select_cases",
]
