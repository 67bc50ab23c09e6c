"""Agreement between judge scores and individual physician ratings.

All functions take long tables (pandas DataFrames) so the same code serves the live engine
and the report, which recomputes every number from ``scores.csv`` and the pack's ratings.

- ``scores``: one row per judge call with at least ``criterion, target_id, repeat, outcome,
  score`` (``outcome`` in ``score | not_evaluable | model_failure``).
- ``ratings``: one row per rating with ``criterion, target_id, rater_id, score``
  (not-evaluable ratings have an empty score and are ignored).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pydantic import BaseModel


class Agreement(BaseModel):
    """Judge-vs-physician agreement of one candidate on one set of targets.

    Attributes:
        mae: Mean absolute error over every (judge call, individual rating) pair with numeric
            values on both sides, pooled over repeats; None if there is no such pair.
        signed_error: Mean of (judge - rater) over the same pairs (> 0: judge scores higher).
        repeat_sd: Sample SD (ddof=1) of the per-repeat MAEs; None with fewer than two repeats
            (one repeat measures no spread, so it is not reported as 0).
        coverage: Share of judge calls that returned a numeric score, in [0, 1].
        n_not_evaluable: Calls where the judge declared the target not evaluable (a valid
            answer, not a failure).
        n_model_failures: Calls that failed (endpoint error, cut or invalid answer).
        n_calls: Judge calls.
        n_pairs: (call, rating) pairs behind ``mae``.
        n_targets: Distinct targets.
        per_repeat_mae: MAE of each repeat, by repeat index.
    """

    mae: float | None
    signed_error: float | None
    repeat_sd: float | None
    coverage: float
    n_not_evaluable: int = 0
    n_model_failures: int = 0
    n_calls: int
    n_pairs: int
    n_targets: int
    per_repeat_mae: dict[int, float]


def numeric_ratings(ratings: pd.DataFrame) -> pd.DataFrame:
    """Ratings with a numeric score (not-evaluable ratings dropped), score as float."""
    out = ratings[pd.to_numeric(ratings["score"], errors="coerce").notna()].copy()
    out["score"] = pd.to_numeric(out["score"]).astype(float)
    return out


def judge_pairs(scores: pd.DataFrame, ratings: pd.DataFrame) -> pd.DataFrame:
    """Join numeric judge scores with every individual numeric rating of the same target.

    Returns:
        One row per (judge call, rating) with columns ``target_id, repeat, judge, rater_id,
        rater, error`` (``error = judge - rater``), plus ``case_id`` when ``scores`` has it
        (the unit of the case-clustered bootstrap).
    """
    keep = ["criterion", "target_id", "repeat", "score"] + (["case_id"] if "case_id" in scores.columns else [])
    s = scores[scores["outcome"] == "score"][keep].copy()
    s = s.rename(columns={"score": "judge"})
    s["judge"] = s["judge"].astype(float)
    r = numeric_ratings(ratings)[["criterion", "target_id", "rater_id", "score"]].rename(columns={"score": "rater"})
    pairs = s.merge(r, on=["criterion", "target_id"], how="inner")
    pairs["error"] = pairs["judge"] - pairs["rater"]
    return pairs


def agreement(scores: pd.DataFrame, ratings: pd.DataFrame) -> Agreement:
    """MAE of judge scores against every individual rating (consilium paper, calibration fitness), with coverage.

    Args:
        scores: Judge calls of ONE candidate on one set of targets (any number of repeats).
        ratings: Ratings of (at least) those targets.
    """
    n_calls = int(len(scores))
    coverage = float((scores["outcome"] == "score").mean()) if n_calls else 0.0
    pairs = judge_pairs(scores, ratings)
    per_repeat = {
        int(rep): float(g["error"].abs().mean()) for rep, g in pairs.groupby("repeat", sort=True)  # type: ignore[arg-type]
    }
    sd = float(np.std(list(per_repeat.values()), ddof=1)) if len(per_repeat) > 1 else None
    return Agreement(
        mae=float(pairs["error"].abs().mean()) if len(pairs) else None,
        signed_error=float(pairs["error"].mean()) if len(pairs) else None,
        repeat_sd=sd,
        coverage=coverage,
        n_not_evaluable=int((scores["outcome"] == "not_evaluable").sum()) if n_calls else 0,
        n_model_failures=int((scores["outcome"] == "model_failure").sum()) if n_calls else 0,
        n_calls=n_calls,
        n_pairs=int(len(pairs)),
        n_targets=int(scores["target_id"].nunique()) if n_calls else 0,
        per_repeat_mae=per_repeat,
    )


def median_baseline(train_ratings: pd.DataFrame) -> float:
    """The training-median constant predictor: median of all individual numeric training ratings."""
    values = numeric_ratings(train_ratings)["score"]
    if values.empty:
        raise ValueError("no numeric training ratings to take a median of")
    return float(values.median())


def constant_agreement(value: float, ratings: pd.DataFrame) -> Agreement:
    """Agreement of a constant predictor (e.g. the training median) with every rating."""
    r = numeric_ratings(ratings)
    err = value - r["score"]
    mae = float(err.abs().mean()) if len(r) else None
    return Agreement(
        mae=mae,
        signed_error=float(err.mean()) if len(r) else None,
        repeat_sd=None,
        coverage=1.0,
        n_calls=0,
        n_pairs=int(len(r)),
        n_targets=int(r["target_id"].nunique()),
        per_repeat_mae={0: mae} if mae is not None else {},
    )


def rater_ceiling(ratings: pd.DataFrame) -> tuple[float | None, int]:
    """Physician-vs-physician MAE: mean |r_a - r_b| over every pair of raters on each target.

    Returns:
        ``(mae, n_pairs)``; ``(None, 0)`` when no target has two numeric ratings.
    """
    r = numeric_ratings(ratings)
    diffs: list[float] = []
    for _, g in r.groupby(["criterion", "target_id"]):
        values = g["score"].to_numpy()
        for i in range(len(values)):
            for j in range(i + 1, len(values)):
                diffs.append(abs(values[i] - values[j]))
    if not diffs:
        return None, 0
    return float(np.mean(diffs)), len(diffs)


def judge_as_rater(scores: pd.DataFrame, ratings: pd.DataFrame) -> pd.DataFrame:
    """The judge as one more rater (HealthBench-style meta-evaluation), leave one rater out.

    For every physician: how far the judge is from them, next to how far the *other*
    physicians are from them, on the targets that physician rated - so a reader sees whether
    the judge agrees with each physician as well as the physicians agree with each other. Only
    targets with at least two physicians' numeric ratings count, on both sides, so the two
    columns rest on the same targets (the ceiling's targets).

    Args:
        scores: Judge calls of one candidate (any repeats).
        ratings: The physicians' ratings of those targets.

    Returns:
        One row per rater: ``rater_id``, ``n_targets``, ``judge_mae`` (mean |judge - rater|
        over that rater's shared targets and the judge's repeats), ``judge_pairs``,
        ``peers_mae`` (mean |other physician - rater|), ``peer_pairs``; sorted by rater id.
        Empty when no target has two numeric ratings.
    """
    r = numeric_ratings(ratings)
    shared = r.groupby(["criterion", "target_id"])["rater_id"].transform("nunique") >= 2
    r = r[shared]
    pairs = judge_pairs(scores, r)
    rows = []
    for rater, mine in r.groupby("rater_id", sort=True):
        peers = r[r["target_id"].isin(mine["target_id"]) & (r["rater_id"] != rater)]
        joined = peers.merge(mine[["criterion", "target_id", "score"]], on=["criterion", "target_id"], suffixes=("", "_rater"))
        judged = pairs[pairs["rater_id"] == rater]
        rows.append({
            "rater_id": str(rater), "n_targets": int(mine["target_id"].nunique()),
            "judge_mae": float(judged["error"].abs().mean()) if len(judged) else None, "judge_pairs": int(len(judged)),
            "peers_mae": float((joined["score"] - joined["score_rater"]).abs().mean()) if len(joined) else None,
            "peer_pairs": int(len(joined)),
        })
    return pd.DataFrame(rows, columns=["rater_id", "n_targets", "judge_mae", "judge_pairs", "peers_mae", "peer_pairs"])


def item_errors(scores: pd.DataFrame, ratings: pd.DataFrame) -> pd.DataFrame:
    """Per-target error of one candidate, worst first (for the mutation prompt).

    Returns:
        Columns ``target_id, judge_mean, rater_mean, abs_error, failures, declined, calls``:
        ``failures`` counts failed calls (endpoint error, cut or invalid answer), ``declined``
        the judge's "not evaluable" answers; targets without a numeric score get
        ``abs_error = inf`` so they surface first.
    """
    outcome = scores["outcome"]  # compared once, not once per target (a lambda per group is slow on string columns)
    flags = pd.DataFrame({"target_id": scores["target_id"], "failures": (outcome == "model_failure").astype(int),
                          "declined": (outcome == "not_evaluable").astype(int)})
    calls = flags.groupby("target_id").agg(failures=("failures", "sum"), declined=("declined", "sum"),
                                           calls=("failures", "size"))
    pairs = judge_pairs(scores, ratings)
    pairs["abs_error"] = pairs["error"].abs()
    per = pairs.groupby("target_id").agg(judge_mean=("judge", "mean"), rater_mean=("rater", "mean"),
                                         abs_error=("abs_error", "mean"))
    out = calls.join(per, how="left").reset_index()
    out["abs_error"] = out["abs_error"].fillna(math.inf)
    return out.sort_values(["abs_error", "target_id"], ascending=[False, True]).reset_index(drop=True)
