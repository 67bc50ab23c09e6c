"""Paired comparison of two candidates on the same judged pairs: a difference with its interval."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from evolve.stats._agreement import judge_pairs
from evolve.stats._bootstrap import ClusterMeans

__all__ = ["PairedDifference", "Verdict", "paired_mae_difference"]

Verdict = Literal["better", "no distinguishable difference", "worse"]


class PairedDifference(BaseModel):
    """MAE of candidate A minus MAE of candidate B on the pairs both have (negative: A is closer
    to the physicians), with a case-clustered percentile bootstrap interval.

    Attributes:
        estimate: Mean of ``|A - rater| - |B - rater|`` over shared (target, repeat, rater)
            pairs, score points; ``nan`` when no pair is shared.
        low: Lower bound of the interval (``nan`` when undefined).
        high: Upper bound.
        confidence: Interval level, e.g. 0.95.
        n_pairs: Shared pairs.
        n_cases: Cases resampled.
        verdict: ``better`` when the whole interval is below 0, ``worse`` when above 0, else
            ``no distinguishable difference`` (also when undefined).
    """

    model_config = ConfigDict(frozen=True)

    estimate: float
    low: float
    high: float
    confidence: float
    n_pairs: int
    n_cases: int
    verdict: Verdict


def paired_mae_difference(
    a: pd.DataFrame, b: pd.DataFrame, ratings: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0,
    confidence: float = 0.95,
) -> PairedDifference:
    """Compare two candidates judged on the same targets with the same seeds (paired by target,
    repeat and rater; a call that is not numeric on either side drops its pairs).

    Args:
        a, b: Judge calls of each candidate (``scores.csv`` rows: ``criterion``, ``target_id``,
            ``case_id``, ``repeat``, ``outcome``, ``score``).
        ratings: The physicians' ratings of those targets.
        n_boot: Bootstrap replicates (cases drawn with replacement).
        seed: Seed of the draws.
        confidence: Interval level in (0, 1).

    Returns:
        The difference A - B in MAE, its interval and the verdict.
    """
    key = ["criterion", "target_id", "repeat", "rater_id"]
    pa, pb = judge_pairs(a, ratings), judge_pairs(b, ratings)
    joined = pa.merge(pb[key + ["error"]], on=key, suffixes=("_a", "_b"))
    diff = joined["error_a"].abs() - joined["error_b"].abs()
    cases = joined["case_id"].astype(str).to_numpy() if len(joined) else np.array([], dtype=object)
    means = ClusterMeans(cases, n_boot=n_boot, seed=seed, confidence=confidence)
    estimate, reps, n = means.mean(cases, diff.to_numpy(dtype=np.float64))
    iv = means.interval(estimate, reps, n)
    verdict: Verdict = "no distinguishable difference"
    if math.isfinite(iv.high) and iv.high < 0:
        verdict = "better"
    elif math.isfinite(iv.low) and iv.low > 0:
        verdict = "worse"
    return PairedDifference(estimate=estimate, low=iv.low, high=iv.high, confidence=confidence, n_pairs=n,
                            n_cases=len(means.cases), verdict=verdict)
