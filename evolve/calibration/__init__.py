"""Calibration: evolve per-criterion judge guidance against physician ratings (consilium paper, calibration).

This is the engine; :func:`evolve.workflows.run_calibration` runs it, then the drift audit and
the report. For each criterion, :func:`calibrate` seeds an isolated MAP-Elites archive with the initial
guidance candidates, scores them on training cases (fitness = MAE against every individual
physician rating), asks the mutation LLM for new guidance from sampled elites and the
training items they got most wrong, and repeats within the budget. New mutants *race*: they
are judged on growing batches of training targets and stopped once a paired signed-rank
test finds them worse than the criterion's best by more than the judge's measured seed-to-seed
noise (``racing``); survivors are judged on every training target. The winner is chosen by
``selection.rule``: ``robust`` re-judges the initial prompts and the best mutants with fresh
seeds (a mutant shown worse on the first half of the targets stops there) and picks on the
pooled evidence; ``paper`` takes the lowest training MAE (ties by repeat SD, length, id). The winner
is re-scored with fresh seeds on training and validation cases next to the no-guidance and
initial-prompt candidates; the report adds the training-median baseline, the
physician-vs-physician ceiling and paired verdicts. Seeds are hashed from (run seed, phase,
criterion, repeat) (:func:`derive_seed`). Validation ratings never feed mutation or parent
selection.

Criteria run concurrently (threads over one shared client, cache and concurrency bound),
each in its own archive; (criterion, component) pairs the rubric does not apply are never
judged and are listed in ``exclusions.csv``. :func:`prepare_workbook_inputs` turns physician
workbooks and a case file into a run's pack and split (the paper's 80/30 frame split).
:func:`calibration_calls` counts a run's judge and mutation calls by phase before any is made
(``evolve calibrate --plan``).
"""

from evolve.calibrated import CandidateRecord, read_candidates  # readers of finished runs live below the engine
from evolve.calibration._cost import CriterionCalls, PhaseCalls, calibration_calls, calls_left, race_rungs
from evolve.calibration._engine import (
    CANDIDATE_COLUMNS,
    EXCLUSION_COLUMNS,
    SCORE_COLUMNS,
    CalibrationPlan,
    CalibrationResult,
    budget_warnings,
    calibrate,
    plan_calibration,
    structural_exclusions,
)
from evolve.calibration._workbooks import (
    PAPER_FRAME,
    WorkbookInputs,
    prepare_workbook_inputs,
)
from evolve.config import load_run_config
from evolve.judge import derive_seed

__all__ = [
    "CANDIDATE_COLUMNS",
    "EXCLUSION_COLUMNS",
    "PAPER_FRAME",
    "SCORE_COLUMNS",
    "CalibrationPlan",
    "CalibrationResult",
    "CandidateRecord",
    "CriterionCalls",
    "PhaseCalls",
    "WorkbookInputs",
    "budget_warnings",
    "calibrate",
    "calibration_calls",
    "calls_left",
    "derive_seed",
    "load_run_config",
    "plan_calibration",
    "prepare_workbook_inputs",
    "race_rungs",
    "read_candidates",
    "structural_exclusions",
]
