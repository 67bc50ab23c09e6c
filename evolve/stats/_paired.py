"""Paired comparison of two candidates on the same judged pairs: a difference, an exact sign-flip
test over case clusters, the interval that inverts it, and Holm's correction for several comparisons."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import BaseModel, ConfigDict

from evolve.stats._agreement import IndexedRatings, _pairs

__all__ = ["MIN_CASES", "PairedDifference", "Verdict", "holm", "paired_difference", "paired_mae_difference", "shift_interval",
           "sign_flip_test"]

Verdict = Literal["better", "worse", "no distinguishable difference", "too few cases to tell"]

MIN_CASES: Final = 8
"""Fewer case clusters than this give the verdict ``too few cases to tell`` whatever the numbers.
With 8 cases the smallest two-sided sign-flip p-value is 2/256 (about 0.008); with 5 or fewer it
cannot go below 0.05 at all."""

N_FLIPS: Final = 20000
"""Random sign patterns drawn when exact enumeration (2**n patterns) would need more."""

_BISECTIONS = 60


class PairedDifference(BaseModel):
    """MAE of candidate A minus MAE of candidate B on the pairs both have (negative: A is closer
    to the physicians), with a sign-flip test over case clusters and the interval that inverts it.

    Attributes:
        estimate: Mean of ``|A - rater| - |B - rater|`` over shared (target, repeat, rater)
            pairs, score points; ``nan`` when no pair is shared.
        low: Lower bound of the interval: the smallest shift the sign-flip test does not reject
            (``nan`` when no pair is shared, or when too few cases leave every shift unrejected).
        high: Upper bound, likewise.
        confidence: Interval level, e.g. 0.95; the test's level is ``1 - confidence``.
        n_pairs: Shared pairs.
        n_cases: Case clusters holding them.
        verdict: ``too few cases to tell`` below ``min_cases`` cases (or with no shared pair);
            otherwise ``better`` when ``high < 0``, ``worse`` when ``low > 0`` (equivalently
            ``p_value < 1 - confidence``, sign by the estimate), else ``no distinguishable
            difference``.
        p_value: Two-sided sign-flip p-value of "no difference" (``None`` without shared pairs).
        method: How the p-value was computed, e.g. ``exact sign-flip test over 9 cases``.
    """

    model_config = ConfigDict(frozen=True)

    estimate: float
    low: float
    high: float
    confidence: float
    n_pairs: int
    n_cases: int
    verdict: Verdict
    p_value: float | None = None
    method: str = ""


@functools.lru_cache(maxsize=16)
def sign_patterns(n: int) -> npt.NDArray[np.float64]:
    """Every pattern of signs of ``n`` values: a read-only ``(2**n, n)`` array of ``+1.0`` and
    ``-1.0`` (the first row all ``+1``), the null distribution of an exact sign-flip or
    signed-rank test is the statistic over its rows. Built once per ``n``.

    Args:
        n: Values, >= 0 (``2**n`` rows: keep it small, as exact tests do).
    """
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)), dtype=np.float64).reshape(-1, n)
    signs.setflags(write=False)
    return signs


class _Flips:
    """The sign patterns of one test: all ``2**n`` when that is at most ``n_flips``, else the
    identity plus ``n_flips`` random ones drawn with ``seed`` (the same for every shift tested,
    so the p-value is a deterministic function of the shift)."""

    def __init__(self, n: int, n_flips: int, seed: int) -> None:
        if n_flips < 1:
            raise ValueError(f"n_flips must be a positive integer, got {n_flips!r}")
        self.exact = n <= 62 and 2**n <= n_flips
        if self.exact:
            self.signs = sign_patterns(n)
        else:
            rng = np.random.default_rng(seed)
            self.signs = 2.0 * rng.integers(0, 2, size=(n_flips, n)).astype(np.float64) - 1.0

    def p_value(self, sums: np.ndarray) -> float:
        """Two-sided p-value of the observed total of ``sums`` under random signs."""
        return self._p(self.signs @ sums, float(sums.sum()), float(np.abs(sums).sum()))

    def shifted(self, sums: np.ndarray, counts: np.ndarray) -> Callable[[float], float]:
        """``delta -> p_value(sums - delta * counts)``, with the two projections computed once."""
        ps, pc = self.signs @ sums, self.signs @ counts
        total, n = float(sums.sum()), float(counts.sum())
        return lambda delta: self._p(ps - delta * pc, total - delta * n, float(np.abs(sums - delta * counts).sum()))

    def _p(self, flipped: np.ndarray, observed: float, scale: float) -> float:
        tol = 1e-9 * max(1.0, scale)  # totals equal up to rounding count as ties
        hits = int(np.count_nonzero(np.abs(flipped) >= abs(observed) - tol))
        if self.exact:
            return hits / len(self.signs)
        return (1 + hits) / (1 + len(self.signs))

    def describe(self, n: int) -> str:
        if self.exact:
            return f"exact sign-flip test over {n} cases"
        return f"sign-flip test over {n} cases, {len(self.signs):,} random flips"


def sign_flip_test(case_sums: np.ndarray | Sequence[float], *, n_flips: int = N_FLIPS, seed: int = 0) -> float:
    """Two-sided sign-flip permutation test that the case-level differences are centred on 0.

    Under the null hypothesis each case's sum of paired differences is as likely to carry
    either sign (swapping the labels A and B within a case changes nothing), so the observed
    total ``|sum(case_sums)|`` is compared with the totals over sign patterns (Fisher 1935;
    a permutation test valid for any number of cases, which a bootstrap is not). Exact over all
    ``2**n`` patterns when ``2**n <= n_flips``; otherwise a Monte Carlo estimate from
    ``n_flips`` random patterns with the fixed ``seed``, ``(1 + hits) / (1 + n_flips)`` so it is
    never 0.

    Args:
        case_sums: One sum of paired differences per case cluster, shape ``(n,)``.
        n_flips: Largest number of patterns enumerated exactly / random patterns drawn.
        seed: Seed of the random patterns (unused when exact).

    Returns:
        The p-value in ``(0, 1]``; 1.0 when there is no case.

    Raises:
        ValueError: ``n_flips`` is not positive or a sum is not finite.

    Example: eight cases all favouring A give ``2 / 256`` (only the observed pattern and its
    mirror image are as extreme).
    """
    sums = np.asarray(case_sums, dtype=np.float64).ravel()
    if not np.isfinite(sums).all():
        raise ValueError("every case sum must be finite")
    if not sums.size:
        return 1.0
    return _Flips(sums.size, n_flips, seed).p_value(sums)


def shift_interval(case_sums: np.ndarray, case_counts: np.ndarray, *, confidence: float = 0.95,
                   n_flips: int = N_FLIPS, seed: int = 0) -> tuple[float, float]:
    """Confidence interval for the mean paired difference, by inverting the sign-flip test.

    A shift ``delta`` is kept when the test of the shifted case sums ``S_g - delta * m_g`` does
    not reject at level ``1 - confidence``; each end is found by bisection between the estimate
    (never rejected) and the edge (0 when 0 is rejected on that side, else beyond the most
    extreme case mean), stopping halfway between the last kept and the first rejected shift.
    So the interval excludes 0 exactly when the test of 0 rejects: the verdict and the interval
    cannot disagree. The same sign patterns serve every shift.

    Args:
        case_sums: Sum of the paired differences of each case, shape ``(n,)``.
        case_counts: Pairs in each case, shape ``(n,)``, all positive.
        confidence: Interval level in (0, 1).
        n_flips: As in :func:`sign_flip_test`.
        seed: As in :func:`sign_flip_test`.

    Returns:
        ``(low, high)``; both ``nan`` when there is no case or when even the most extreme shift
        cannot be rejected (too few cases: with exact enumeration, ``2 / 2**n >= 1 - confidence``).
    """
    sums, counts = np.asarray(case_sums, dtype=np.float64), np.asarray(case_counts, dtype=np.float64)
    if not sums.size:
        return math.nan, math.nan
    flips = _Flips(sums.size, n_flips, seed)
    alpha = 1.0 - confidence
    estimate = float(sums.sum() / counts.sum())
    means = sums / counts
    spread = float(means.max() - means.min()) + 1e-9 * max(1.0, float(np.abs(means).max()))

    p_at = flips.shifted(sums, counts)

    def rejected(delta: float) -> bool:
        return p_at(delta) < alpha

    if not rejected(float(means.max()) + spread) or not rejected(float(means.min()) - spread):
        return math.nan, math.nan
    if means.max() == means.min():  # every case the same mean: any other shift is rejected, exactly
        return estimate, estimate
    ends = []
    for far in (float(means.min()) - spread, float(means.max()) + spread):
        kept = estimate
        if (far - estimate) * (0.0 - estimate) > 0:  # 0 lies on this side of the estimate
            if rejected(0.0):
                far = 0.0
            else:
                kept = 0.0
        ends.append(_bisect(rejected, kept, far))
    return ends[0], ends[1]


def _bisect(rejected: Callable[[float], bool], kept: float, far: float) -> float:
    """Midpoint of the last kept and the first rejected shift between ``kept`` and ``far``
    (to a millionth of a percent of the starting gap)."""
    tol = 1e-8 * abs(far - kept)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (kept + far)
        if mid in (kept, far) or abs(far - kept) <= tol:
            break
        if rejected(mid):
            far = mid
        else:
            kept = mid
    return 0.5 * (kept + far)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of several p-values (Holm 1979), controlling the chance of any
    false "better"/"worse" among them.

    The ``k``-th smallest of the ``m`` defined p-values is multiplied by ``m - k + 1``, made no
    smaller than the adjusted value before it, and capped at 1. A verdict survives the correction
    when its adjusted p-value is below the test level.

    Args:
        p_values: One p-value per comparison, in any order; ``None`` for an undefined one.

    Returns:
        Adjusted p-values in the input order; ``None`` stays ``None`` and does not count in ``m``.

    Example: ``holm([0.01, 0.04, 0.03, None])`` gives ``[0.03, 0.06, 0.06, None]``.
    """
    defined = [(p, i) for i, p in enumerate(p_values) if p is not None]
    m = len(defined)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for k, (p, i) in enumerate(sorted(defined)):
        running = max(running, min(1.0, (m - k) * float(p)))
        out[i] = running
    return out


def paired_mae_difference(
    a: pd.DataFrame, b: pd.DataFrame, ratings: pd.DataFrame | IndexedRatings, *, n_boot: int = 2000, seed: int = 0,
    confidence: float = 0.95, min_cases: int = MIN_CASES,
) -> PairedDifference:
    """Compare two candidates judged on the same targets with the same seeds (paired by target,
    repeat and rater; a call that is not numeric on either side drops its pairs).

    The pairs' differences ``|A - rater| - |B - rater|`` are summed per case (the unit that
    moves together), the sign-flip test of :func:`sign_flip_test` gives the p-value of "no
    difference", and :func:`shift_interval` inverts the same test for the interval - valid with
    few case clusters, where a percentile bootstrap is far too narrow, and never in
    disagreement with the verdict. The interval assumes the case-level differences are
    symmetric about the true shift (Lehmann & Romano 2005, ch. 15).

    Args:
        a, b: Judge calls of each candidate (``scores.csv`` rows: ``criterion``, ``target_id``,
            ``case_id``, ``repeat``, ``outcome``, ``score``).
        ratings: The physicians' ratings of those targets, or their
            :class:`~evolve.stats.IndexedRatings`.
        n_boot: Accepted for compatibility and unused: the interval no longer comes from a
            bootstrap.
        seed: Seed of the random sign patterns (used only above 14 cases, where exact
            enumeration of ``2**n`` patterns would exceed 20,000).
        confidence: Interval level in (0, 1); the test's level is ``1 - confidence``.
        min_cases: Fewer shared case clusters give ``too few cases to tell``.

    Returns:
        The difference A - B in MAE, its interval, p-value and verdict.

    Raises:
        ValueError: ``confidence`` is not strictly between 0 and 1.
    """
    del n_boot
    index = IndexedRatings.of(ratings)
    (pa, _), (pb, _) = _pairs(a, index), _pairs(b, index)
    key = ("criterion", "target_id", "repeat", "rater_id")
    errors_b: dict[tuple[object, ...], list[float]] = {}  # a dict join: the engine races with it after every batch
    for k, judge, rater in zip(zip(*(pb[name] for name in key)), pb["judge"], pb["rater"], strict=True):
        errors_b.setdefault(k, []).append(abs(judge - rater))
    diff: list[float] = []
    cases: list[str] = []
    for k, judge, rater, case in zip(zip(*(pa[name] for name in key)), pa["judge"], pa["rater"], pa["case_id"], strict=True):
        for error_b in errors_b.get(k, ()):
            diff.append(abs(judge - rater) - error_b)
            cases.append(str(case))
    return paired_difference(np.asarray(diff, dtype=np.float64), np.asarray(cases, dtype=object), seed=seed,
                             confidence=confidence, min_cases=min_cases)


def paired_difference(
    differences: np.ndarray | Sequence[float], case_ids: np.ndarray | Sequence[str], *, seed: int = 0,
    confidence: float = 0.95, min_cases: int = MIN_CASES,
) -> PairedDifference:
    """The verdict on any per-pair differences (A minus B, negative: A better), clustered by case.

    :func:`paired_mae_difference` calls it with ``|A - rater| - |B - rater|``; a comparison
    with a constant predictor (e.g. the training median) can pass its own differences.
    Non-finite differences are left out.

    Args:
        differences: One difference per pair, shape ``(n_pairs,)``.
        case_ids: The case of each pair, same shape.
        seed: Seed of the random sign patterns (only above 14 cases).
        confidence: Interval level in (0, 1).
        min_cases: Fewer case clusters give ``too few cases to tell``.

    Returns:
        Mean difference, sign-flip interval, p-value and verdict (see :class:`PairedDifference`).

    Raises:
        ValueError: ``confidence`` is not strictly between 0 and 1, or the shapes differ.
    """
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    diff, cases = np.asarray(differences, dtype=np.float64), np.asarray(case_ids, dtype=object)
    if diff.shape != cases.shape:
        raise ValueError(f"differences and case_ids differ in shape: {diff.shape} vs {cases.shape}")
    keep = np.isfinite(diff)
    if not keep.any():
        return PairedDifference(estimate=math.nan, low=math.nan, high=math.nan, confidence=confidence, n_pairs=0,
                                n_cases=0, verdict="too few cases to tell", p_value=None,
                                method="no shared pair: nothing to test")
    grouped = pd.Series(diff[keep]).groupby(cases[keep].astype(str))
    sums, counts = grouped.sum().to_numpy(), grouped.size().to_numpy().astype(np.float64)
    n = len(sums)
    estimate = float(sums.sum() / counts.sum())
    flips = _Flips(n, N_FLIPS, seed)
    p = flips.p_value(sums)
    low, high = shift_interval(sums, counts, confidence=confidence, seed=seed)
    verdict: Verdict = "no distinguishable difference"
    if n < min_cases:
        verdict = "too few cases to tell"
    elif p < 1.0 - confidence:
        verdict = "better" if estimate < 0 else "worse"
    return PairedDifference(estimate=estimate, low=low, high=high, confidence=confidence, n_pairs=int(counts.sum()),
                            n_cases=n, verdict=verdict, p_value=p, method=flips.describe(n))
