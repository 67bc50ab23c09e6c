"""Case-clustered percentile bootstrap intervals for agreement statistics."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import BaseModel, ConfigDict

from evolve.errors import DataError
from evolve.stats._agreement import IndexedRatings, _pairs
from evolve.stats._pairs import (
    category_codes,
    check_cluster_ids,
    check_labels,
    check_pair,
    check_pairs_frame,
)
from evolve.stats._statistics import (
    class_balanced_mae,
    krippendorff_alpha_ordinal,
    mae,
    qwk,
    signed_error,
    spearman,
)
from evolve.stats._tables import STATISTICS, cluster_tables, table_statistics

Statistic = Callable[[np.ndarray, np.ndarray], float]
"""A statistic of paired scores: ``statistic(judge, rater) -> float`` (``nan`` if undefined)."""

_BLOCK_CELLS = 4_000_000  # replicates x clusters held in memory at once by agreement_table


class Interval(BaseModel):
    """A point estimate with its case-clustered percentile bootstrap interval.

    Attributes:
        estimate: The statistic on the observed pairs (``nan`` if undefined there).
        low: Lower percentile bound, the ``(1 - confidence) / 2`` quantile of the defined
            replicates; ``nan`` when no replicate is defined.
        high: Upper bound, the ``(1 + confidence) / 2`` quantile; ``nan`` likewise.
        n_boot: Replicates drawn.
        n_valid: Replicates where the statistic was defined (not ``nan``); the interval rests
            on these only. ``n_boot - n_valid`` (:attr:`n_nan`) resamples were degenerate,
            e.g. every drawn pair in one category for kappa or alpha.
        confidence: Nominal coverage in ``(0, 1)``, e.g. 0.95.
        n_clusters: Distinct clusters (cases) resampled.
        n_pairs: Pairs in the observed data.
    """

    model_config = ConfigDict(frozen=True)

    estimate: float
    low: float
    high: float
    n_boot: int
    n_valid: int
    confidence: float
    n_clusters: int
    n_pairs: int

    @property
    def n_nan(self) -> int:
        """Replicates where the statistic was undefined."""
        return self.n_boot - self.n_valid


def _check_settings(n_boot: int, confidence: float) -> None:
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    if not (isinstance(confidence, (int, float)) and 0.0 < float(confidence) < 1.0):
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")


class _Clusters:
    """Pairs sorted by cluster, with where each cluster's rows start and how many there are."""

    def __init__(self, ids: pd.Series | np.ndarray) -> None:
        try:  # sorted ids: the draws do not depend on the row order of the frame
            codes, uniques = pd.factorize(ids, sort=True)
        except TypeError:  # ids of mixed, unorderable types: first-appearance order
            codes, uniques = pd.factorize(ids, sort=False)
        self.n_clusters = len(uniques)
        self.n_pairs = len(ids)
        self.order = np.argsort(codes, kind="stable")
        self.codes = codes.astype(np.intp)
        self.lengths = np.bincount(codes, minlength=self.n_clusters)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]) if self.n_clusters else np.zeros(0, int)

    def draws(self, rng: np.random.Generator, n_boot: int) -> Iterator[npt.NDArray[np.int64]]:
        """For each replicate, the ``G`` clusters drawn with replacement (same stream for all users)."""
        for _ in range(n_boot):
            yield rng.integers(0, self.n_clusters, size=self.n_clusters)

    def rows(self, drawn: np.ndarray) -> npt.NDArray[np.intp]:
        """Positions, in cluster-sorted order, of every pair of every drawn cluster (repeats kept)."""
        lengths = self.lengths[drawn]
        total = int(lengths.sum())
        offsets = np.repeat(self.starts[drawn] - (np.cumsum(lengths) - lengths), lengths)
        return offsets + np.arange(total)


def percentile_interval(
    estimate: float, replicates: np.ndarray, *, confidence: float, n_clusters: int, n_pairs: int
) -> Interval:
    """The percentile interval of the defined (finite) bootstrap ``replicates``.

    Args:
        estimate: The statistic on the full sample.
        replicates: One value per bootstrap replicate (``nan`` where undefined).
        confidence: Interval level in (0, 1).
        n_clusters: Clusters (cases) resampled; with fewer than two there is no interval (every
            replicate redraws the one case, so its width of zero would say nothing).
        n_pairs: Observations behind the estimate.
    """
    valid = replicates[np.isfinite(replicates)]
    if valid.size and n_clusters >= 2:
        tail = (1.0 - confidence) / 2.0
        low, high = (float(q) for q in np.quantile(valid, [tail, 1.0 - tail]))
    else:
        low = high = math.nan
    return Interval(
        estimate=float(estimate), low=low, high=high, n_boot=int(replicates.size), n_valid=int(valid.size),
        confidence=float(confidence), n_clusters=int(n_clusters), n_pairs=int(n_pairs),
    )


def _interval(estimate: float, replicates: np.ndarray, confidence: float, clusters: _Clusters) -> Interval:
    return percentile_interval(estimate, replicates, confidence=confidence, n_clusters=clusters.n_clusters,
                               n_pairs=clusters.n_pairs)


class ClusterMeans:
    """Case-clustered bootstrap of means: one set of case draws shared by every mean of a table row.

    ``weights[b, g]`` is how often case ``g`` (cases sorted by id) was drawn in replicate ``b``;
    a mean over observations is then ``weights @ sums / weights @ counts`` per replicate - every
    statistic of the row reuses the same draws, so their intervals are comparable.

    Args:
        case_ids: The row's cases (duplicates ignored).
        n_boot: Bootstrap replicates.
        seed: Seed of the draws.
        confidence: Interval level in (0, 1).
    """

    def __init__(self, case_ids: Iterable[str], n_boot: int, seed: int, confidence: float = 0.95) -> None:
        self.cases = sorted(set(case_ids))
        self._code = {case: code for code, case in enumerate(self.cases)}
        self.n_boot = n_boot
        self.confidence = confidence
        g = len(self.cases)
        if g:
            draws = np.random.default_rng(seed).integers(0, g, size=(n_boot, g))
            flat = (draws + (np.arange(n_boot) * g)[:, None]).ravel()
            self.weights = np.bincount(flat, minlength=n_boot * g).reshape(n_boot, g).astype(np.float64)
        else:
            self.weights = np.zeros((n_boot, 0))

    def mean(self, case_ids: Sequence[str] | np.ndarray, values: Sequence[float] | np.ndarray) -> tuple[float, np.ndarray, int]:
        """Estimate, replicates and observation count of the mean of the finite ``values``.

        Raises:
            ValueError: An observation's case is not among the resampled cases.
        """
        v = np.asarray(values, dtype=np.float64)
        ids = np.asarray(case_ids, dtype=object)
        keep = np.isfinite(v)
        v, ids = v[keep], ids[keep]
        if not v.size:
            return math.nan, np.full(self.n_boot, math.nan), 0
        codes = np.fromiter((self._code.get(case, -1) for case in ids), dtype=np.intp, count=len(ids))
        if (codes < 0).any():
            raise ValueError("an observation's case is not among the resampled cases")
        sums = np.bincount(codes, weights=v, minlength=len(self.cases))
        counts = np.bincount(codes, minlength=len(self.cases)).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = (self.weights @ sums) / (self.weights @ counts)
        return float(v.mean()), reps, int(v.size)

    def interval(self, estimate: float, reps: np.ndarray, n_obs: int) -> Interval:
        """Percentile interval of the defined replicates (no bounds around an undefined estimate)."""
        iv = percentile_interval(estimate, reps, confidence=self.confidence, n_clusters=len(self.cases), n_pairs=n_obs)
        return iv if math.isfinite(estimate) else iv.model_copy(update={"low": math.nan, "high": math.nan})


def cluster_bootstrap(
    pairs: pd.DataFrame,
    statistic: Statistic,
    *,
    cluster: str = "case_id",
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """Percentile interval of any paired statistic, resampling whole clusters (cases).

    Pairs of one case share the case, its physicians and the judge's reading of it, so they
    are not independent; resampling single pairs would understate the uncertainty. Each
    replicate draws ``G`` clusters out of the ``G`` observed ones, uniformly with
    replacement, and keeps *all* pairs of each drawn cluster (a cluster drawn twice
    contributes its pairs twice); the statistic is recomputed on the resampled pairs, and
    the interval is the percentile interval of the defined (non-``nan``) replicates.

    References: B. Efron, R. J. Tibshirani (1993), *An Introduction to the Bootstrap*,
    Chapman & Hall (percentile interval, ch. 13); C. A. Field, A. H. Welsh (2007),
    "Bootstrapping clustered data", JRSS B 69(3), 369-390 (resampling at the cluster level).

    Args:
        pairs: One row per (judge score, individual rating) with columns ``cluster``,
            ``judge`` and ``rater`` (numeric); other columns are ignored.
        statistic: ``statistic(judge, rater) -> float`` on 1-D float arrays of equal
            length, e.g. :func:`mae` or ``functools.partial(qwk, labels=[0, 1, 2, 3])``;
            ``nan`` for an undefined value. Rows reach it in cluster order.
        cluster: Column holding the resampling unit (default ``"case_id"``).
        n_boot: Replicates, >= 1.
        seed: Seed of the ``numpy.random.default_rng`` stream; the same seed and the same
            data give the same interval, and the same resampled cases as
            :func:`agreement_table` with that seed.
        confidence: Nominal coverage, strictly between 0 and 1.

    Returns:
        An :class:`Interval`. With no pairs, the estimate is ``statistic`` on empty arrays
        and the bounds are ``nan`` with ``n_valid = 0``.

    Raises:
        ValueError: ``n_boot`` or ``confidence`` out of range.
        TypeError: ``pairs`` is not a DataFrame.
        DataError: A column is missing, a cluster id is missing, or a score is not numeric.
    """
    _check_settings(n_boot, confidence)
    check_pairs_frame(pairs, cluster)
    judge, rater = check_pair(pairs["judge"].to_numpy(), pairs["rater"].to_numpy())
    clusters = _Clusters(pairs[cluster])
    estimate = statistic(judge, rater)
    replicates = np.full(n_boot, np.nan)
    if clusters.n_clusters:
        j_sorted, r_sorted = judge[clusters.order], rater[clusters.order]
        rng = np.random.default_rng(seed)
        for b, drawn in enumerate(clusters.draws(rng, n_boot)):
            rows = clusters.rows(drawn)
            replicates[b] = statistic(j_sorted[rows], r_sorted[rows])
    return _interval(estimate, replicates, confidence, clusters)


def agreement_table(
    pairs: pd.DataFrame,
    labels: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    cluster: str = "case_id",
) -> dict[str, Interval]:
    """Every agreement statistic with its case-clustered bootstrap interval, in one pass.

    Computes ``mae``, ``signed_error``, ``class_balanced_mae``, ``qwk`` (quadratic weighted
    kappa), ``krippendorff_alpha`` (ordinal) and ``spearman``. Estimates come from the
    point functions of :mod:`evolve.stats`; all statistics share the same
    resampled cases in each replicate, which are the ones :func:`cluster_bootstrap` draws
    with the same ``seed``. Replicates are computed from per-case judge x rater count tables
    (one matrix product for a block of replicates), so thousands of replicates on ~10k pairs
    take well under a second; see ``bench/stats_bootstrap.py``.

    Works unchanged on physician-vs-physician pairs from :func:`rater_pairs` (the ceiling).

    Args:
        pairs: One row per (judge score, individual rating) with columns ``cluster``,
            ``judge`` and ``rater``, every score one of ``labels``.
        labels: The criterion's full ordinal scale, strictly increasing, e.g. ``[0, 1, 2, 3]``.
        n_boot: Replicates, >= 1 (the papers' tables use 2,000).
        seed: Seed of the ``numpy.random.default_rng`` stream.
        confidence: Nominal coverage, strictly between 0 and 1.
        cluster: Column holding the resampling unit (default ``"case_id"``).

    Returns:
        ``{name: Interval}`` with keys in the order listed above.

    Raises:
        ValueError: Bad ``labels``, ``n_boot`` or ``confidence``.
        TypeError: ``pairs`` is not a DataFrame.
        DataError: A column or cluster id is missing, or a score is missing, not numeric or
            outside ``labels``.
    """
    scale, judge, rater = _checked(pairs, labels, n_boot, confidence, cluster)
    return _table(scale, judge, rater, _Clusters(pairs[cluster]), n_boot, seed, confidence)


def _table(scale: npt.NDArray[np.float64], judge: np.ndarray, rater: np.ndarray, clusters: _Clusters, n_boot: int,
           seed: int, confidence: float) -> dict[str, Interval]:
    """:func:`agreement_table` of checked pairs (its arguments as arrays, the clusters of their ids)."""
    judge_codes = category_codes(judge, scale, "judge")
    rater_codes = category_codes(rater, scale, "rater")
    estimates = {
        "mae": mae(judge, rater),
        "signed_error": signed_error(judge, rater),
        "class_balanced_mae": class_balanced_mae(judge, rater, list(scale)),
        "qwk": qwk(judge, rater, list(scale)),
        "krippendorff_alpha": krippendorff_alpha_ordinal(judge, rater, list(scale)),
        "spearman": spearman(judge, rater),
    }
    replicates = {name: np.full(n_boot, np.nan) for name in STATISTICS}
    k = scale.size
    if clusters.n_clusters:
        tables = cluster_tables(judge_codes, rater_codes, clusters.codes, clusters.n_clusters, k)
        for start, boot in _replicate_blocks(clusters, tables, n_boot, seed):
            for name, values in table_statistics(boot.reshape(-1, k, k), scale).items():
                replicates[name][start : start + len(values)] = values
    return {name: _interval(estimates[name], replicates[name], confidence, clusters) for name in STATISTICS}


def judge_agreement_table(
    scores: pd.DataFrame,
    ratings: pd.DataFrame | IndexedRatings,
    labels: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Interval]:
    """:func:`agreement_table` of one candidate's judge calls against the ratings, clustered by
    case: the same intervals as ``agreement_table(judge_pairs(scores, ratings), labels)``
    without building the pairs frame (a report asks for a dozen of these per criterion).

    Args:
        scores: Judge calls (``scores.csv`` rows) with ``criterion, target_id, case_id,
            repeat, outcome, score``; calls without a numeric score are left out.
        ratings: The physicians' ratings of those targets, or their
            :class:`~evolve.stats.IndexedRatings`.
        labels: The criterion's full ordinal scale, strictly increasing.
        n_boot: Replicates, >= 1.
        seed: Seed of the ``numpy.random.default_rng`` stream.
        confidence: Nominal coverage, strictly between 0 and 1.

    Returns:
        ``{name: Interval}`` with the keys of :func:`agreement_table`; ``n_pairs`` 0 and ``nan``
        everywhere when no call pairs with a numeric rating.

    Raises:
        ValueError: Bad ``labels``, ``n_boot`` or ``confidence``.
        DataError: ``scores`` has no ``case_id`` column or a missing case id, or a score is
            outside ``labels``.
    """
    _check_settings(n_boot, confidence)
    scale = check_labels(labels)
    if "case_id" not in scores.columns:
        raise DataError(f"judge calls lack a 'case_id' column (have {list(scores.columns)}); fix: pass the run's "
                        "scores.csv rows, which name the case of every call (the resampling unit)")
    cols, _ = _pairs(scores, IndexedRatings.of(ratings))
    ids = pd.Series(cols["case_id"], dtype=scores["case_id"].dtype)
    check_cluster_ids(ids, "the 'case_id' of the judge calls")
    judge, rater = check_pair(np.asarray(cols["judge"], dtype=np.float64), np.asarray(cols["rater"], dtype=np.float64))
    return _table(scale, judge, rater, _Clusters(ids), n_boot, seed, confidence)


def _checked(pairs: pd.DataFrame, labels: Sequence[float], n_boot: int, confidence: float,
             cluster: str) -> tuple[npt.NDArray[np.float64], np.ndarray, np.ndarray]:
    """``(scale, judge, rater)`` of a table bootstrap's arguments, checked (the errors
    :func:`agreement_table` documents)."""
    _check_settings(n_boot, confidence)
    scale = check_labels(labels)
    check_pairs_frame(pairs, cluster)
    judge, rater = check_pair(pairs["judge"].to_numpy(), pairs["rater"].to_numpy())
    return scale, judge, rater


def _replicate_blocks(clusters: _Clusters, per_cluster: np.ndarray, n_boot: int,
                      seed: int) -> Iterator[tuple[int, npt.NDArray[np.float64]]]:
    """``(first replicate, sums)`` per block of replicates: ``sums[b]`` is the sum of the rows of
    ``per_cluster`` (shape ``(G, m)``) over the clusters replicate ``b`` drew, with the draws of
    :func:`cluster_bootstrap` for ``seed`` (a cluster drawn twice counts twice)."""
    n_clusters = clusters.n_clusters
    draws = clusters.draws(np.random.default_rng(seed), n_boot)
    block = max(1, min(n_boot, _BLOCK_CELLS // n_clusters))
    for start in range(0, n_boot, block):
        size = min(block, n_boot - start)
        drawn = np.stack([next(draws) for _ in range(size)])  # (size, G)
        flat = (drawn + (np.arange(size) * n_clusters)[:, None]).ravel()
        counts = np.bincount(flat, minlength=size * n_clusters).reshape(size, n_clusters)
        yield start, counts.astype(np.float64) @ per_cluster


CONSTANT_STATISTICS = ("mae", "signed_error", "class_balanced_mae")
"""Names, in report order, of the statistics :func:`constant_agreement_table` returns."""


def constant_agreement_table(
    value: float,
    pairs: pd.DataFrame,
    labels: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    cluster: str = "case_id",
) -> dict[str, Interval]:
    """The error statistics of a constant predictor (a training median, possibly a half point)
    with case-clustered bootstrap intervals, in one pass.

    The same numbers as :func:`cluster_bootstrap` of :func:`mae`, :func:`signed_error` and
    :func:`class_balanced_mae` with the same ``seed``, computed from per-case counts of the
    rating categories (one matrix product per block of replicates instead of a statistic
    call per replicate). Chance-corrected and rank statistics are undefined for a constant.

    Args:
        value: The constant, within the scale's range.
        pairs: One row per individual rating with columns ``cluster``, ``judge`` (any values:
            the constant is ``value``) and ``rater`` (one of ``labels``).
        labels: The criterion's full ordinal scale, strictly increasing.
        n_boot: Replicates, >= 1.
        seed: Seed of the ``numpy.random.default_rng`` stream.
        confidence: Nominal coverage, strictly between 0 and 1.
        cluster: Column holding the resampling unit (default ``"case_id"``).

    Returns:
        ``{name: Interval}`` with keys :data:`CONSTANT_STATISTICS`.

    Raises:
        ValueError: Bad ``labels``, ``n_boot`` or ``confidence``.
        TypeError: ``pairs`` is not a DataFrame.
        DataError: A column or cluster id is missing, a rating is not one of ``labels``, or
            ``value`` lies outside the scale.
    """
    scale, _, rater = _checked(pairs, labels, n_boot, confidence, cluster)
    judge = np.full(rater.shape, float(value))
    rater_codes = category_codes(rater, scale, "rater")
    clusters = _Clusters(pairs[cluster])
    estimates = {"mae": mae(judge, rater), "signed_error": signed_error(judge, rater),
                 "class_balanced_mae": class_balanced_mae(judge, rater, list(scale))}
    replicates = {name: np.full(n_boot, np.nan) for name in CONSTANT_STATISTICS}
    if clusters.n_clusters:
        k, error = scale.size, float(value) - scale
        per_cluster = np.bincount(clusters.codes * k + rater_codes, minlength=clusters.n_clusters * k)
        for start, counts in _replicate_blocks(clusters, per_cluster.reshape(-1, k).astype(np.float64), n_boot, seed):
            n, present = counts.sum(axis=1), counts > 0
            stop = start + len(counts)
            replicates["mae"][start:stop] = counts @ np.abs(error) / n
            replicates["signed_error"][start:stop] = counts @ error / n
            replicates["class_balanced_mae"][start:stop] = (present * np.abs(error)).sum(axis=1) / present.sum(axis=1)
    return {name: _interval(estimates[name], replicates[name], confidence, clusters) for name in CONSTANT_STATISTICS}
