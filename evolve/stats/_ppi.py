"""Physician-anchored means: prediction-powered inference with PPI++ power tuning, clustered by case.

Notation (per system): ``n`` rated items with physician score ``Y`` and judge score ``f``, ``N``
unrated items with judge score ``f~``. The estimate of the physicians' mean on the judged
outputs is

    theta(lam) = lam * mean(f~) + mean(Y - lam * f)

- the judge's mean on the unrated items, corrected by the judge's mean error on the rated ones
(Angelopoulos et al., Science 2023, "Prediction-powered inference", the mean estimator with
``lam = 1``). ``lam = 0`` is the classical mean of the rated sample. PPI++ (Angelopoulos, Duchi &
Zrnic 2023, the power-tuned mean estimator) picks the ``lam`` that minimises the estimate's
variance, ``Cov(Y, f) / ((1 + n / N) Var(f))``, clipped to [0, 1], so the estimate is never
much worse than the rated mean alone and gains when the judge tracks the physicians.

The standard error treats cases as the sampled unit on both sides: each case contributes the
sum over its items of their centred terms (``(Y - lam f - mean) / n`` rated, ``lam (f~ - mean) /
N`` unrated), and ``se**2`` is the sum of the squared case contributions (a cluster-robust
sandwich). The interval is ``theta +- q * se``.

- ``small_sample=False``: ``q`` is the normal quantile and nothing else is added. With one item
  per case and distinct cases on the two sides this is exactly ppi-python 0.2.3's
  ``ppi_mean_ci`` (population standard deviations over ``sqrt(n)`` and ``sqrt(N)``), and so is
  ``lam`` (covariance with ``ddof = 0``, pooled judge variance with ``ddof = 1``).
- ``small_sample=True`` (the default): each side's case contributions are scaled by
  ``sqrt(G / (G - 1))`` for its ``G`` cases (the usual CR1 correction) and ``q`` is Student's t
  with (rated cases - 1) degrees of freedom. The asymptotic interval is too narrow with tens of
  rated cases: on ``bench/ppi_coverage.py`` (30 rated cases of 1-4 outputs) it covered 92% at
  nominal 95%, the corrected one 93.5-94%; the rest of the shortfall comes from estimating
  ``lam`` on the same ratings, which the asymptotics ignore (Mani et al. 2025, "No free lunch:
  non-asymptotic analysis of prediction-powered inference", study this finite-sample cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Final

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict
from scipy import stats as sps

__all__ = ["MIN_RATED_CASES", "PPIEstimate", "ppi_mean", "ppi_mean_difference"]

MIN_RATED_CASES: Final = 10
"""Fewer rated cases than this and no physician-anchored estimate is given (``refused``): the
rated sample is what fixes the judge's bias, and a normal interval from fewer clusters is too
narrow."""

ASSUMPTION: Final = ("Assumes the physician-rated sample is drawn like the judged outputs (same kind of outputs, "
                     "cases and judge), so the judge's errors on it are its errors on them.")
ASSUMPTION_SHARED: Final = ("Assumes the judge's mean error is the same on both systems' outputs (one rated sample "
                            "anchors both, so its correction cancels in the difference and the interval is that of "
                            "the judge's raw difference).")
ASSUMPTION_DIFFERENCE: Final = ("Assumes each system's physician-rated sample is drawn like that system's judged "
                                "outputs, so the judge's errors on it are its errors on them.")


class PPIEstimate(BaseModel):
    """A physician-anchored mean (or difference of two) with its interval, beside the naive one.

    Attributes:
        estimate: Prediction-powered estimate of the physicians' mean on the judged outputs,
            score points (``None`` when refused).
        low: Lower end of the interval at ``confidence`` (see the module notes).
        high: Upper end.
        confidence: Interval level, e.g. 0.95.
        judge_mean: Naive estimate: the judge's raw mean on the unrated items.
        judge_low: Lower end of its case-clustered interval (covers the judge's mean, not the
            physicians').
        judge_high: Upper end.
        rated_mean: The physicians' mean on the rated sample (the classical estimate; for a
            difference with one shared rated sample it is ``None``: it would be 0 by construction).
        lam: Weight of the judge (0 = rated mean alone, 1 = plain PPI).
        n_rated: Rated items (for a difference: both samples, a shared one counted once).
        n_rated_cases: Distinct cases among them.
        n_unrated: Unrated (judged) items.
        n_unrated_cases: Distinct cases among them.
        effective_n: How many physician ratings the estimate is worth: ``n_rated`` times the
            variance of the classical estimate over that of this one (``None`` when refused or
            undefined, e.g. a shared rated sample).
        refused: Why there is no estimate (``None`` when there is one); the value fields are
            ``None`` then, counts are kept.
        assumption: The assumption the estimate rests on, one sentence to print beside it.
    """

    model_config = ConfigDict(frozen=True)

    estimate: float | None
    low: float | None
    high: float | None
    confidence: float
    judge_mean: float | None
    judge_low: float | None
    judge_high: float | None
    rated_mean: float | None
    lam: float | None
    n_rated: int
    n_rated_cases: int
    n_unrated: int
    n_unrated_cases: int
    effective_n: float | None
    refused: str | None
    assumption: str


@dataclass(frozen=True)
class _Side:
    """One system's samples as arrays: rated cases, physician and judge scores; unrated cases and judge scores."""

    r_case: np.ndarray
    y: np.ndarray
    f: np.ndarray
    u_case: np.ndarray
    fu: np.ndarray

    @property
    def n(self) -> int:
        return len(self.y)

    @property
    def big_n(self) -> int:
        return len(self.fu)


def _side(rated: pd.DataFrame, unrated: pd.DataFrame) -> _Side:
    for name, frame, columns in (("rated", rated, ["case_id", "judge", "physician"]),
                                 ("unrated", unrated, ["case_id", "judge"])):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"the {name} frame lacks the column(s) {', '.join(missing)}; it needs {', '.join(columns)}")
        for c in columns[1:]:
            values = pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=np.float64)
            if not np.isfinite(values).all():
                raise ValueError(f"the {name} frame's column {c!r} has missing or non-numeric values; "
                                 "leave those items out (and count them) before estimating")
    return _Side(rated["case_id"].astype(str).to_numpy(), rated["physician"].to_numpy(dtype=np.float64),
                 rated["judge"].to_numpy(dtype=np.float64), unrated["case_id"].astype(str).to_numpy(),
                 unrated["judge"].to_numpy(dtype=np.float64))


def _case_sums(codes: np.ndarray, values: np.ndarray, n_cases: int) -> np.ndarray:
    return np.bincount(codes, weights=values, minlength=n_cases)


def _tuned_lambda(s: _Side) -> float:
    """PPI++'s variance-minimising weight with case-clustered moments, clipped to [0, 1]."""
    cases = pd.Index(sorted(set(s.r_case) | set(s.u_case)))
    g = len(cases)
    rc, uc = cases.get_indexer(pd.Index(s.r_case)), cases.get_indexer(pd.Index(s.u_case))
    sy = _case_sums(rc, s.y - s.y.mean(), g)
    sf = _case_sums(rc, s.f - s.f.mean(), g)
    cov = float(sy @ sf) / s.n
    pooled = np.concatenate([s.f, s.fu])
    sp = _case_sums(np.concatenate([rc, uc]), pooled - pooled.mean(), g)
    var = float(sp @ sp) / (len(pooled) - 1) if len(pooled) > 1 else 0.0
    if var <= 0:
        return 0.0
    return float(np.clip(cov / ((1 + s.n / s.big_n) * var), 0.0, 1.0))


def _inflation(case_ids: np.ndarray, small_sample: bool) -> float:
    """``sqrt(G / (G - 1))`` for ``G`` cases on one side (1 without the small-sample correction)."""
    g = len(set(case_ids))
    return math.sqrt(g / (g - 1)) if small_sample and g > 1 else 1.0


def _influence(s: _Side, lam: float, cases: pd.Index, small_sample: bool) -> tuple[float, np.ndarray]:
    """The estimate ``theta(lam)`` and each case's contribution to its error (over ``cases``)."""
    g = len(cases)
    rect = s.y - lam * s.f
    scale = _inflation(s.r_case, small_sample) / s.n
    out = _case_sums(cases.get_indexer(pd.Index(s.r_case)), (rect - rect.mean()) * scale, g)
    if lam:
        scale = lam * _inflation(s.u_case, small_sample) / s.big_n
        out = out + _case_sums(cases.get_indexer(pd.Index(s.u_case)), (s.fu - s.fu.mean()) * scale, g)
    return float(lam * s.fu.mean() + rect.mean()), out


def _naive(s: _Side, cases: pd.Index, small_sample: bool) -> tuple[float, np.ndarray]:
    """The judge's raw mean on the unrated items and each case's contribution to its error."""
    scale = _inflation(s.u_case, small_sample) / s.big_n
    return float(s.fu.mean()), _case_sums(cases.get_indexer(pd.Index(s.u_case)), (s.fu - s.fu.mean()) * scale, len(cases))


def _check_confidence(confidence: float) -> None:
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")


def _quantile(confidence: float, df: int | None) -> float:
    """Two-sided normal quantile, or Student's t with ``df`` degrees of freedom."""
    if df is None:
        return NormalDist().inv_cdf(0.5 + confidence / 2)
    return float(sps.t.ppf(0.5 + confidence / 2, max(df, 1)))


def _refusal(sides: list[_Side], min_rated_cases: int) -> str | None:
    for s in sides:
        k = len(set(s.r_case))
        if k < min_rated_cases:
            return (f"only {k} rated case{'s' if k != 1 else ''}; at least {min_rated_cases} are needed for a "
                    "physician-anchored estimate")
        if not s.big_n:
            return "no judged (unrated) item to estimate from"
    return None


def _result(estimate: float, infl: np.ndarray, naive: tuple[float, np.ndarray], classical: np.ndarray | None,
            n_rated: int, df: tuple[int, int] | None, **fields: Any) -> PPIEstimate:
    """Assemble the estimate; ``df`` = (degrees of freedom of the estimate, of the naive mean) or None (normal)."""
    z = _quantile(fields["confidence"], df[0] if df else None)
    zj = _quantile(fields["confidence"], df[1] if df else None)
    se, judge_se = math.sqrt(float(infl @ infl)), math.sqrt(float(naive[1] @ naive[1]))
    eff = None
    if classical is not None and se > 0:
        eff = n_rated * float(classical @ classical) / se**2
    return PPIEstimate(estimate=estimate, low=estimate - z * se, high=estimate + z * se, judge_mean=naive[0],
                       judge_low=naive[0] - zj * judge_se, judge_high=naive[0] + zj * judge_se, effective_n=eff,
                       n_rated=n_rated, refused=None, **fields)


def _refused(reason: str, **fields: Any) -> PPIEstimate:
    return PPIEstimate(estimate=None, low=None, high=None, judge_mean=None, judge_low=None, judge_high=None,
                       rated_mean=None, lam=None, effective_n=None, refused=reason, **fields)


def ppi_mean(rated: pd.DataFrame, unrated: pd.DataFrame, *, confidence: float = 0.95, tune: bool = True,
             min_rated_cases: int = MIN_RATED_CASES, lam: float | None = None,
             small_sample: bool = True) -> PPIEstimate:
    """The physicians' mean on judged outputs, from the judge's scores anchored by a rated sample.

    Prediction-powered inference (Angelopoulos et al., Science 2023) with PPI++ power tuning
    (Angelopoulos, Duchi & Zrnic 2023), case-clustered (see the module notes).

    Args:
        rated: One row per rated item: ``case_id``, ``judge`` (the judge's mean score over its
            repeats), ``physician`` (the physicians' mean rating). Items whose judge failed are
            left out (and counted) by the caller.
        unrated: One row per judged item: ``case_id``, ``judge``.
        confidence: Interval level in (0, 1).
        tune: Power-tune ``lam`` (PPI++); ``False`` gives plain PPI (``lam = 1``).
        min_rated_cases: Fewer distinct rated cases and the estimate is refused.
        lam: A fixed weight in [0, 1] instead (``0``: the classical rated mean); overrides ``tune``.
        small_sample: Widen for few cases (see the module notes): each side's case variance
            times ``G / (G - 1)`` and Student's t with (rated cases - 1) degrees of freedom
            (judged cases - 1 for the naive interval). ``False`` gives the asymptotic normal
            interval of ppi-python.

    Returns:
        The estimate, its interval, the naive judge mean beside it, ``lam``, ``effective_n`` and
        the assumption; or a refusal naming the rated sample's size.

    Raises:
        ValueError: A column is missing or holds a missing value, ``confidence`` or ``lam`` is
            out of range.
    """
    s = _side(rated, unrated)
    fields: dict[str, Any] = {"confidence": confidence, "n_rated_cases": len(set(s.r_case)), "n_unrated": s.big_n,
              "n_unrated_cases": len(set(s.u_case)), "assumption": ASSUMPTION}
    _check_confidence(confidence)
    reason = _refusal([s], min_rated_cases)
    if reason:
        return _refused(reason, n_rated=s.n, **fields)
    weight = _weight(s, tune, lam)
    cases = pd.Index(sorted(set(s.r_case) | set(s.u_case)))
    estimate, infl = _influence(s, weight, cases, small_sample)
    _, classical = _influence(s, 0.0, cases, small_sample)
    df = (fields["n_rated_cases"] - 1, fields["n_unrated_cases"] - 1) if small_sample else None
    return _result(estimate, infl, _naive(s, cases, small_sample), classical, s.n, df,
                   rated_mean=float(s.y.mean()), lam=weight, **fields)


def _weight(s: _Side, tune: bool, lam: float | None) -> float:
    if lam is not None:
        if not 0.0 <= float(lam) <= 1.0:
            raise ValueError(f"lam must be within [0, 1], got {lam!r}")
        return float(lam)
    return _tuned_lambda(s) if tune else 1.0


def _shared(rated_a: pd.DataFrame, rated_b: pd.DataFrame) -> bool:
    if rated_a is rated_b:
        return True
    cols = ["case_id", "judge", "physician"]
    try:
        return rated_a[cols].reset_index(drop=True).equals(rated_b[cols].reset_index(drop=True))
    except KeyError:
        return False


def ppi_mean_difference(rated_a: pd.DataFrame, unrated_a: pd.DataFrame, rated_b: pd.DataFrame,
                        unrated_b: pd.DataFrame, *, confidence: float = 0.95, tune: bool = True,
                        min_rated_cases: int = MIN_RATED_CASES, small_sample: bool = True) -> PPIEstimate:
    """Physicians' mean on system A's judged outputs minus that on system B's.

    Each system's estimate is as in :func:`ppi_mean`; the standard error sums, per case, A's
    contribution minus B's over the union of cases, so cases both systems answered (paired
    outputs) and cases in both rated samples bring their covariance in.

    With one rated sample for both (``rated_b`` the same rows as ``rated_a``), ``lam`` is 1
    for both whatever ``tune``: the correction then cancels and the estimate is the judge's raw
    difference, valid if the judge's mean error is the same on both systems' outputs. A tuned
    ``lam < 1`` would instead shrink the difference toward 0 and, with a weak judge, report a
    confidently null difference from a sample that says nothing about it.

    Args:
        rated_a, unrated_a: System A's samples (columns as in :func:`ppi_mean`).
        rated_b, unrated_b: System B's; ``rated_b`` may be ``rated_a``.
        confidence: Interval level in (0, 1).
        tune: Power-tune each system's ``lam`` (separate rated samples only).
        min_rated_cases: Fewer rated cases on either side and the difference is refused.
        small_sample: As in :func:`ppi_mean`; the degrees of freedom are the smaller rated
            sample's cases - 1 (the judged cases - 1 with one shared rated sample, whose
            correction cancels).

    Returns:
        The difference with its interval; ``lam`` is A's weight (B's when they differ is not
        reported); ``judge_mean`` the raw judge difference; ``rated_mean`` the difference of the
        rated means (``None`` when shared); ``effective_n`` ``None`` when shared.

    Raises:
        ValueError: As :func:`ppi_mean`.
    """
    a, b = _side(rated_a, unrated_a), _side(rated_b, unrated_b)
    shared = _shared(rated_a, rated_b)
    rated_items = a.n if shared else a.n + b.n
    fields: dict[str, Any] = {"confidence": confidence,
              "n_rated_cases": len(set(a.r_case) | set(b.r_case)) if shared else len(set(a.r_case)) + len(set(b.r_case)),
              "n_unrated": a.big_n + b.big_n, "n_unrated_cases": len(set(a.u_case) | set(b.u_case)),
              "assumption": ASSUMPTION_SHARED if shared else ASSUMPTION_DIFFERENCE}
    _check_confidence(confidence)
    reason = _refusal([a, b], min_rated_cases)
    if reason:
        return _refused(reason, n_rated=rated_items, **fields)
    lam_a, lam_b = (1.0, 1.0) if shared else (_weight(a, tune, None), _weight(b, tune, None))
    cases = pd.Index(sorted(set(a.r_case) | set(a.u_case) | set(b.r_case) | set(b.u_case)))
    (ea, ia), (eb, ib) = _influence(a, lam_a, cases, small_sample), _influence(b, lam_b, cases, small_sample)
    (na, nia), (nb, nib) = _naive(a, cases, small_sample), _naive(b, cases, small_sample)
    classical = None
    if not shared:
        classical = _influence(a, 0.0, cases, small_sample)[1] - _influence(b, 0.0, cases, small_sample)[1]
    rated_mean = None if shared else float(a.y.mean() - b.y.mean())
    judged_df = fields["n_unrated_cases"] - 1
    df = (judged_df if shared else min(len(set(a.r_case)), len(set(b.r_case))) - 1, judged_df)
    return _result(ea - eb, ia - ib, (na - nb, nia - nib), classical, rated_items, df if small_sample else None,
                   rated_mean=rated_mean, lam=lam_a, **fields)
