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
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel

from evolve.stats._pairs import numeric_scores


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
    values = numeric_scores(ratings)
    keep = ~np.isnan(values)
    out = ratings[keep].copy()
    out["score"] = values[keep]
    return out


_RatingIndex = dict[tuple[object, object], list[tuple[object, float]]]
"""(criterion, target id) -> [(rater id, numeric score), ...] in the ratings' order."""


def _rating_index(ratings: pd.DataFrame) -> _RatingIndex:
    """The numeric ratings of each (criterion, target), for :func:`_pairs` to join on."""
    rated: _RatingIndex = {}
    for crit, tid, rater, value in zip(ratings["criterion"].tolist(), ratings["target_id"].tolist(),
                                       ratings["rater_id"].tolist(), numeric_scores(ratings).tolist(), strict=True):
        if not math.isnan(value):
            rated.setdefault((crit, tid), []).append((rater, value))
    return rated


class IndexedRatings:
    """A ratings table with its numeric ratings looked up by (criterion, target id), for
    joining many sets of judge calls with the same ratings.

    :func:`agreement`, :func:`judge_pairs`, :func:`judge_agreement_table`,
    :func:`judge_as_rater`, :func:`item_errors` and
    :func:`~evolve.stats.paired_mae_difference` take one wherever they take ``ratings``: the
    engine scores every candidate against the same training ratings, and a report joins a dozen
    candidates with the same validation ratings, so the index is built once instead of once
    per join. The numbers are read when it is made: build it from a frame you do not change
    afterwards.

    Args:
        ratings: One row per rating with ``criterion, target_id, rater_id, score``
            (:meth:`evolve.data.RatingPack.ratings_frame`); ratings without a numeric score (not
            evaluable) are left out of the index.

    Attributes:
        frame: The ratings it was built from.
    """

    def __init__(self, ratings: pd.DataFrame) -> None:
        self.frame = ratings
        self._rated = _rating_index(ratings)
        self._rater_dtype = ratings["rater_id"].dtype

    @classmethod
    def of(cls, ratings: pd.DataFrame | IndexedRatings) -> IndexedRatings:
        """``ratings`` itself when it is already indexed, else its index."""
        return ratings if isinstance(ratings, IndexedRatings) else cls(ratings)


def _pairs(scores: pd.DataFrame, ratings: pd.DataFrame | IndexedRatings,
           rated: _RatingIndex | None = None) -> tuple[dict[str, list], dict[str, Any]]:
    """The inner join of numeric judge scores with numeric ratings on (criterion, target id).

    The same rows, order (scores' rows, then ratings' order within a target) and column dtypes
    as a pandas merge, joined through a dict: the engine asks for pairs after every batch of
    judge calls on a few hundred rows, where a merge and a groupby cost tens of milliseconds.

    ``rated``: a subset of the ratings' index to join with instead of the whole of it.

    Returns:
        ``(columns, dtypes)``: the values of ``criterion, target_id, repeat, judge, [case_id],
        rater_id, rater`` as lists by name, and the dtype each would have in the merged frame.
    """
    index = IndexedRatings.of(ratings)
    if rated is None:
        rated = index._rated
    names = ["criterion", "target_id", "repeat"] + (["case_id"] if "case_id" in scores.columns else [])
    keys = {name: scores[name].tolist() for name in names}  # whole columns: filtering first costs a copy each
    out: dict[str, list] = {name: [] for name in [*names, "judge", "rater_id", "rater"]}
    for i, (outcome, score) in enumerate(zip(scores["outcome"].tolist(), scores["score"].tolist(), strict=True)):
        if outcome != "score":
            continue
        for rater, rating in rated.get((keys["criterion"][i], keys["target_id"][i]), ()):
            for name in names:
                out[name].append(keys[name][i])
            out["judge"].append(float(score))
            out["rater_id"].append(rater)
            out["rater"].append(rating)
    dtypes = {**{name: scores[name].dtype for name in names}, "rater_id": index._rater_dtype, "judge": np.float64,
              "rater": np.float64}
    return out, dtypes


def judge_pairs(scores: pd.DataFrame, ratings: pd.DataFrame | IndexedRatings) -> pd.DataFrame:
    """Join numeric judge scores with every individual numeric rating of the same target.

    Returns:
        One row per (judge call, rating) with columns ``criterion, target_id, repeat, judge,
        rater_id, rater, error`` (``error = judge - rater``), plus ``case_id`` after ``judge``
        when ``scores`` has it (the unit of the case-clustered bootstrap). Rows follow the order
        of ``scores``, then of ``ratings`` within a target.
    """
    cols, dtypes = _pairs(scores, ratings)
    order = ["criterion", "target_id", "repeat", "judge", *(["case_id"] if "case_id" in cols else []), "rater_id", "rater"]
    frame = pd.DataFrame({name: pd.Series(cols[name], dtype=dtypes[name]) for name in order})
    frame["error"] = frame["judge"] - frame["rater"]
    return frame


def agreement(scores: pd.DataFrame, ratings: pd.DataFrame | IndexedRatings) -> Agreement:
    """MAE of judge scores against every individual rating (consilium paper, calibration fitness), with coverage.

    Args:
        scores: Judge calls of ONE candidate on one set of targets (any number of repeats).
        ratings: Ratings of (at least) those targets, or their :class:`IndexedRatings`.
    """
    n_calls = int(len(scores))
    outcomes = Counter(scores["outcome"].tolist())  # three pandas comparisons cost more on a few dozen calls
    cols, _ = _pairs(scores, ratings)
    errors = np.asarray(cols["judge"], dtype=np.float64) - np.asarray(cols["rater"], dtype=np.float64)
    by_repeat: dict[int, list[float]] = {}
    for rep, error in zip(cols["repeat"], np.abs(errors).tolist(), strict=True):
        by_repeat.setdefault(int(rep), []).append(error)
    per_repeat = {rep: float(np.mean(by_repeat[rep])) for rep in sorted(by_repeat)}
    return Agreement(
        mae=float(np.abs(errors).mean()) if len(errors) else None,
        signed_error=float(errors.mean()) if len(errors) else None,
        repeat_sd=float(np.std(list(per_repeat.values()), ddof=1)) if len(per_repeat) > 1 else None,
        coverage=outcomes["score"] / n_calls if n_calls else 0.0,
        n_not_evaluable=outcomes["not_evaluable"],
        n_model_failures=outcomes["model_failure"],
        n_calls=n_calls,
        n_pairs=len(errors),
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


def rater_ceiling(ratings: pd.DataFrame | IndexedRatings) -> tuple[float | None, int]:
    """Physician-vs-physician MAE: mean |r_a - r_b| over every pair of raters on each target.

    Args:
        ratings: Long ratings (``criterion, target_id, rater_id, score``) or their
            :class:`IndexedRatings`; not-evaluable ratings are left out.

    Returns:
        ``(mae, n_pairs)``; ``(None, 0)`` when no target has two numeric ratings.
    """
    diffs: list[float] = []
    for rated in IndexedRatings.of(ratings)._rated.values():
        for i, (_, value) in enumerate(rated):
            diffs.extend(abs(value - other) for _, other in rated[i + 1:])
    if not diffs:
        return None, 0
    return float(np.mean(diffs)), len(diffs)


def judge_as_rater(scores: pd.DataFrame, ratings: pd.DataFrame | IndexedRatings) -> pd.DataFrame:
    """The judge as one more rater (HealthBench-style meta-evaluation), leave one rater out.

    For every physician: how far the judge is from them, next to how far the *other*
    physicians are from them, on the targets that physician rated - so a reader sees whether
    the judge agrees with each physician as well as the physicians agree with each other. Only
    targets with at least two physicians' numeric ratings count, on both sides, so the two
    columns rest on the same targets (the ceiling's targets).

    Args:
        scores: Judge calls of one candidate (any repeats).
        ratings: The physicians' ratings of those targets, or their :class:`IndexedRatings`.

    Returns:
        One row per rater: ``rater_id``, ``n_targets``, ``judge_mae`` (mean |judge - rater|
        over that rater's shared targets and the judge's repeats), ``judge_pairs``,
        ``peers_mae`` (mean |other physician - rater|), ``peer_pairs``; sorted by rater id.
        Empty when no target has two numeric ratings.
    """
    index = IndexedRatings.of(ratings)
    shared = {key: rated for key, rated in index._rated.items() if len({rater for rater, _ in rated}) >= 2}
    cols, _ = _pairs(scores, index, shared)
    judged: dict[object, list[float]] = {}  # rater -> [sum |judge - rater|, pairs]
    for rater, judge, rating in zip(cols["rater_id"], cols["judge"], cols["rater"], strict=True):
        _add(judged, rater, abs(judge - rating))
    peers: dict[object, list[float]] = {}  # rater -> [sum |other physician - rater|, pairs]
    targets: dict[Any, set] = {}  # rater -> targets; sorted by rater id as the groupby it replaced
    for (_, tid), rated in shared.items():
        for rater, value in rated:
            targets.setdefault(rater, set()).add(tid)
            peers.setdefault(rater, [0.0, 0])
            for other, other_value in rated:
                if other != rater:
                    _add(peers, rater, abs(other_value - value))
    rows = [{"rater_id": str(rater), "n_targets": len(targets[rater]),
             "judge_mae": _mean(judged.get(rater)), "judge_pairs": int(judged[rater][1]) if rater in judged else 0,
             "peers_mae": _mean(peers[rater]), "peer_pairs": int(peers[rater][1])} for rater in sorted(targets)]
    return pd.DataFrame(rows, columns=["rater_id", "n_targets", "judge_mae", "judge_pairs", "peers_mae", "peer_pairs"])


def _add(sums: dict[object, list[float]], key: object, value: float) -> None:
    """Add ``value`` to the running ``[sum, count]`` of ``key``."""
    acc = sums.setdefault(key, [0.0, 0])
    acc[0] += value
    acc[1] += 1


def _mean(acc: list[float] | None) -> float | None:
    """The mean of a running ``[sum, count]``; None when it counted nothing."""
    return acc[0] / acc[1] if acc and acc[1] else None


def item_errors(scores: pd.DataFrame, ratings: pd.DataFrame | IndexedRatings) -> pd.DataFrame:
    """Per-target error of one candidate, worst first (for the mutation prompt).

    Returns:
        Columns ``target_id, judge_mean, rater_mean, abs_error, failures, declined, calls``:
        ``failures`` counts failed calls (endpoint error, cut or invalid answer), ``declined``
        the judge's "not evaluable" answers; targets without a numeric score get
        ``abs_error = inf`` so they surface first.
    """
    calls: dict[object, list[int]] = {}  # target -> [failures, declined, calls]
    for tid, outcome in zip(scores["target_id"].tolist(), scores["outcome"].tolist(), strict=True):
        tally = calls.setdefault(tid, [0, 0, 0])
        tally[0] += outcome == "model_failure"
        tally[1] += outcome == "not_evaluable"
        tally[2] += 1
    sums: dict[object, list[float]] = {}  # target -> [judge sum, rater sum, |error| sum, pairs]
    cols, _ = _pairs(scores, ratings)
    for tid, judge, rater in zip(cols["target_id"], cols["judge"], cols["rater"], strict=True):
        acc = sums.setdefault(tid, [0.0, 0.0, 0.0, 0])
        acc[0] += judge
        acc[1] += rater
        acc[2] += abs(judge - rater)
        acc[3] += 1
    rows = []
    for tid, (failures, declined, n) in calls.items():
        total = sums.get(tid)
        means = (total[0] / total[3], total[1] / total[3], total[2] / total[3]) if total else (math.nan, math.nan, math.inf)
        rows.append((tid, failures, declined, n, *means))
    rows.sort(key=lambda row: (-row[6], row[0]))
    return pd.DataFrame(rows, columns=["target_id", "failures", "declined", "calls", "judge_mean", "rater_mean", "abs_error"])
