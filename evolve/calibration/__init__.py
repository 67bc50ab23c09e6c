"""Calibration: evolve per-criterion judge guidance against physician ratings (SPEC §4).

For each criterion, :func:`calibrate` seeds an isolated MAP-Elites archive with the initial
guidance candidates, scores them on training cases (fitness = MAE against every individual
physician rating), asks the mutation LLM for new guidance from sampled elites and the
training items they got most wrong, and repeats within the budget. The winner (lowest
training MAE; ties by repeat SD, length, id) is re-scored with fresh seeds on training and
validation cases next to the no-guidance and initial-prompt candidates; the report adds the
training-median baseline and the physician-vs-physician ceiling. Validation ratings never
feed mutation or parent selection.
"""

from evolve.calibration._endpoint import default_cache_path, open_client
from evolve.calibration._engine import (
    CANDIDATE_COLUMNS,
    SCORE_COLUMNS,
    CalibrationResult,
    ProgressHook,
    calibrate,
    load_run_config,
)
from evolve.calibration._metrics import (
    Agreement,
    agreement,
    constant_agreement,
    item_errors,
    judge_pairs,
    median_baseline,
    numeric_ratings,
    rater_ceiling,
)

__all__ = [
    "CANDIDATE_COLUMNS",
    "SCORE_COLUMNS",
    "Agreement",
    "CalibrationResult",
    "ProgressHook",
    "agreement",
    "calibrate",
    "constant_agreement",
    "default_cache_path",
    "item_errors",
    "judge_pairs",
    "load_run_config",
    "median_baseline",
    "numeric_ratings",
    "open_client",
    "rater_ceiling",
]
