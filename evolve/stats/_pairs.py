"""Input checks shared by the statistics, and the physician-vs-physician pairs builder."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from evolve.errors import DataError

PAIR_COLUMNS = ("judge", "rater")
"""Score columns every pairs frame must have (one row = one judge score vs one rating)."""

_MISSING_HINT = (
    "drop not-evaluable ratings and judge calls that gave no score (not_evaluable, model_failure) "
    "before building pairs; they are excluded from agreement, never counted as 0"
)


def as_scores(values: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    """One side of the pairs as a 1-D float array.

    Args:
        values: Array-like of numeric scores, shape ``(n,)``.
        name: Which side (``"judge"`` or ``"rater"``), for the messages.

    Returns:
        Float64 array of shape ``(n,)``.

    Raises:
        ValueError: ``values`` is not one-dimensional.
        DataError: A value is missing or not numeric.
    """
    if np.ndim(values) != 1:
        raise ValueError(f"{name} scores must be one-dimensional, got shape {np.shape(values)}")
    arr = np.asarray(values)
    if arr.dtype.kind in "iuf":  # fast path: already numeric, only NaN/inf can be wrong
        arr = arr.astype(np.float64, copy=False)
        if np.isfinite(arr).all():
            return arr
    series = pd.Series(arr.astype(object))
    numeric = pd.to_numeric(series, errors="coerce")
    bad = numeric.isna() | ~np.isfinite(numeric.to_numpy(dtype=float, na_value=np.nan))
    if bad.any():
        first = series[bad].iloc[0]
        raise DataError(
            f"{name} scores: {int(bad.sum())} of {len(series)} values are missing or not numeric "
            f"(first: {first!r} at position {int(np.flatnonzero(bad.to_numpy())[0])}); fix: {_MISSING_HINT}"
        )
    return numeric.to_numpy(dtype=np.float64)


def check_pair(judge: npt.ArrayLike, rater: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Both sides as float arrays of equal length (see :func:`as_scores` for the errors)."""
    j = as_scores(judge, "judge")
    r = as_scores(rater, "rater")
    if j.shape != r.shape:
        raise ValueError(f"judge and rater must have the same length, got {j.shape[0]} and {r.shape[0]}")
    return j, r


def check_labels(labels: Sequence[float] | npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The ordinal scale as a strictly increasing float array.

    Args:
        labels: Every category of the scale, lowest first, e.g. ``[0, 1, 2, 3]``; shape ``(K,)``,
            ``K >= 1``.

    Raises:
        ValueError: Empty, not numeric, not finite, or not strictly increasing.
    """
    try:
        arr = np.asarray(labels, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"labels must be numeric scale values, got {labels!r}") from exc
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"labels must be a non-empty list of finite scale values, got {labels!r}")
    if np.any(np.diff(arr) <= 0):
        raise ValueError(f"labels must be strictly increasing (lowest category first), got {labels!r}")
    return arr


def category_codes(values: np.ndarray, labels: np.ndarray, name: str) -> npt.NDArray[np.intp]:
    """Position of each score in ``labels`` (0 .. K-1).

    Raises:
        DataError: A score is not one of ``labels``.
    """
    codes = np.searchsorted(labels, values)
    inside = (codes < labels.size) & (labels[np.minimum(codes, labels.size - 1)] == values)
    if not inside.all():
        outside = sorted({float(v) for v in values[~inside]})
        raise DataError(
            f"{name} scores contain values outside the scale {labels.tolist()}: {outside[:10]}; "
            "fix: pass the criterion's full scale as labels, or drop/repair the out-of-scale scores"
        )
    return codes.astype(np.intp)


def check_pairs_frame(pairs: pd.DataFrame, cluster: str) -> None:
    """Raise :class:`DataError` unless ``pairs`` has the cluster and score columns, with no missing ids.

    Raises:
        TypeError: ``pairs`` is not a DataFrame.
        DataError: A required column is absent or the cluster column has missing values.
    """
    if not isinstance(pairs, pd.DataFrame):
        raise TypeError(f"pairs must be a pandas DataFrame, got {type(pairs).__name__}")
    missing = [c for c in (cluster, *PAIR_COLUMNS) if c not in pairs.columns]
    if missing:
        raise DataError(
            f"pairs frame lacks column(s) {missing} (has {list(pairs.columns)}); fix: build it with one row "
            f"per (judge score, individual rating) and columns {cluster!r}, 'judge', 'rater' "
            "(e.g. evolve.calibration.judge_pairs plus the case id, or evolve.stats.rater_pairs)"
        )
    check_cluster_ids(pairs[cluster], f"pairs column {cluster!r}")


def check_cluster_ids(ids: pd.Series, what: str) -> None:
    """Raise :class:`DataError` naming ``what`` when an id of the resampling unit is missing.

    Raises:
        DataError: ``ids`` holds a missing value (None, NaN).
    """
    if ids.isna().any():
        raise DataError(
            f"{what} has {int(ids.isna().sum())} missing values; "
            "fix: every pair needs the id of the case it belongs to (the resampling unit)"
        )


def rater_pairs(ratings: pd.DataFrame) -> pd.DataFrame:
    """Physician-vs-physician pairs for the agreement ceiling, in the pairs schema.

    Every *unordered* pair of two different raters who both gave a numeric score to the same
    target (and criterion, when a ``criterion`` column is present) becomes one row. A target
    rated by ``m`` physicians contributes ``m * (m - 1) / 2`` rows. Within a pair, the rater
    whose ``rater_id`` sorts first (as text) is put in the ``judge`` column and the other in
    ``rater``, so the frame can be passed unchanged to :func:`agreement_table`.

    Orientation matters only for the two asymmetric statistics: ``signed_error`` then reads
    "first rater minus second rater by id order" (not a judge bias) and
    ``class_balanced_mae`` averages over the second rater's categories. MAE, quadratic
    weighted kappa, Krippendorff's alpha and Spearman are symmetric in the two columns.

    Note that ``krippendorff_alpha`` on these pairs treats each rater pair as one unit with two
    coders; with three raters per target this weights a target by its three pairs rather than
    by Krippendorff's 1/(m_u - 1) within-unit weighting, so it can differ slightly from the
    multi-coder alpha computed on a raters x targets matrix.

    Args:
        ratings: Long frame, one row per individual rating, with columns ``case_id,
            target_id, rater_id, score`` (optionally ``criterion``). Scores that are empty or
            not numeric (not-evaluable) are dropped, as everywhere else in ``evolve``.

    Returns:
        DataFrame with columns ``case_id, target_id[, criterion], first_rater_id, rater_id,
        judge, rater`` (scores as int64 when every score is a whole number, float otherwise),
        sorted by case, target, criterion and rater ids. Empty (same columns) when no target
        has two numeric ratings from different raters.

    Raises:
        TypeError: ``ratings`` is not a DataFrame.
        DataError: A required column is absent.
    """
    if not isinstance(ratings, pd.DataFrame):
        raise TypeError(f"ratings must be a pandas DataFrame, got {type(ratings).__name__}")
    required = ["case_id", "target_id", "rater_id", "score"]
    missing = [c for c in required if c not in ratings.columns]
    if missing:
        raise DataError(
            f"ratings frame lacks column(s) {missing} (has {list(ratings.columns)}); fix: pass the long "
            "ratings table of a pack (ratings.csv: one row per case, target, rater, criterion, score)"
        )
    keys = ["case_id", "target_id"] + (["criterion"] if "criterion" in ratings.columns else [])
    columns = [*keys, "first_rater_id", "rater_id", "judge", "rater"]
    scores = numeric_scores(ratings)
    first, second = _rater_pair_rows(ratings, scores, keys)
    if not first:
        return pd.DataFrame({c: pd.Series(dtype=object if c not in ("judge", "rater") else np.int64)
                             for c in columns})
    a, b = np.asarray(first, dtype=np.intp), np.asarray(second, dtype=np.intp)
    raters = ratings["rater_id"].to_numpy()
    out = pd.DataFrame({
        **{k: ratings[k].to_numpy()[a] for k in keys},
        "first_rater_id": raters[a], "rater_id": raters[b], "judge": scores[a], "rater": scores[b],
    })
    for col in ("judge", "rater"):
        if np.all(out[col] == np.round(out[col])):
            out[col] = out[col].astype(np.int64)
    return out


def numeric_scores(ratings: pd.DataFrame) -> np.ndarray:
    """Each rating's score as a float, NaN where it is not numeric (a not-evaluable rating)."""
    return np.asarray(pd.to_numeric(ratings["score"], errors="coerce"), dtype=np.float64)


def _rater_pair_rows(ratings: pd.DataFrame, scores: np.ndarray, keys: list[str]) -> tuple[list[int], list[int]]:
    """Row positions ``(first, second)`` of every pair of numeric ``scores`` (:func:`numeric_scores`
    of ``ratings``) of one target by two raters, ``first`` the rater whose id sorts first as text;
    sorted by the keys, then the two rater ids, as text (a self-join through a dict: a pandas
    merge costs tens of milliseconds)."""
    values = scores.tolist()
    rids = [str(r) for r in ratings["rater_id"].tolist()]
    key_of = list(zip(*(ratings[k].tolist() for k in keys), strict=True)) if keys else []
    numeric = [i for i, v in enumerate(values) if not math.isnan(v)]
    by_key: dict[tuple, list[int]] = {}
    for i in numeric:
        by_key.setdefault(key_of[i], []).append(i)
    found = [(i, j) for i in numeric for j in by_key[key_of[i]] if rids[i] < rids[j]]
    found.sort(key=lambda ij: (*(str(v) for v in key_of[ij[0]]), rids[ij[0]], rids[ij[1]]))
    return [i for i, _ in found], [j for _, j in found]
