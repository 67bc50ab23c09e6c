"""Point statistics of agreement between judge scores and individual physician ratings.

Each function takes the two sides of a set of pairs (``judge[i]`` vs ``rater[i]``) and returns
a float; an undefined value (no pairs, a single category, a constant side) is ``nan``, never
an exception, so a bootstrap replicate that happens to be degenerate is simply counted as
such.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import krippendorff
import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from evolve.errors import DataError
from evolve.stats._pairs import category_codes, check_labels, check_pair


def mae(judge: npt.ArrayLike, rater: npt.ArrayLike) -> float:
    """Mean absolute error between paired judge scores and individual ratings.

    The calibration objective of the consilium paper: every (judge call, individual rating) pair counts
    once, so a target rated by three physicians and judged twice gives six pairs.

    Args:
        judge: Judge scores, shape ``(n,)``.
        rater: Physician ratings paired with ``judge``, shape ``(n,)``.

    Returns:
        ``mean(|judge - rater|)`` in ``[0, max - min of the scale]``; ``nan`` when ``n == 0``.

    Raises:
        ValueError: The two sides differ in length or are not one-dimensional.
        DataError: A score is missing or not numeric.
    """
    j, r = check_pair(judge, rater)
    if j.size == 0:
        return math.nan
    return float(np.mean(np.abs(j - r)))  # = sklearn's mean_absolute_error, without its per-call overhead


def signed_error(judge: npt.ArrayLike, rater: npt.ArrayLike) -> float:
    """Mean signed error ``mean(judge - rater)``: > 0 means the judge scores higher.

    Args:
        judge: Judge scores, shape ``(n,)``.
        rater: Physician ratings paired with ``judge``, shape ``(n,)``.

    Returns:
        A value in ``[-(max - min), max - min]``; ``nan`` when ``n == 0``.

    Raises:
        ValueError: The two sides differ in length or are not one-dimensional.
        DataError: A score is missing or not numeric.
    """
    j, r = check_pair(judge, rater)
    if j.size == 0:
        return math.nan
    return float(np.mean(j - r))


def class_balanced_mae(judge: npt.ArrayLike, rater: npt.ArrayLike, labels: Sequence[float]) -> float:
    """Macro-averaged MAE over the physicians' categories (Baccianella et al. 2009).

    Plain MAE is dominated by the most frequent rating; a judge that always answers the
    majority score can look good on imbalanced data. This variant first takes the MAE within
    each true (rater) category, then averages those per-category MAEs with equal weight,
    over the categories that occur among the ratings (an absent category has no MAE).

    Reference: S. Baccianella, A. Esuli, F. Sebastiani (2009), "Evaluation measures for
    ordinal regression", ISDA 2009, pp. 283-287 (the macroaveraged MAE, MAE^M).

    Args:
        judge: Predictions, shape ``(n,)``: judge scores, or any value within the scale's
            range (a constant such as a training median of 1.5, a mean over repeats).
        rater: Physician ratings paired with ``judge``, shape ``(n,)``, each one of ``labels``
            (the categories averaged over).
        labels: The full ordinal scale, strictly increasing, e.g. ``[0, 1, 2, 3]``.

    Returns:
        A value in ``[0, max - min of the scale]``; ``nan`` when ``n == 0``.

    Raises:
        ValueError: Bad ``labels`` or mismatched lengths.
        DataError: A score is missing or not numeric, a prediction lies outside the scale's
            range, or a rating is not one of ``labels``.
    """
    j, r = check_pair(judge, rater)
    scale = check_labels(labels)
    outside = j[(j < scale[0]) | (j > scale[-1])]
    if outside.size:
        raise DataError(
            f"judge values {sorted(set(outside.tolist()))[:5]} lie outside the scale {scale[0]:g}..{scale[-1]:g}; "
            "fix: pass the criterion's full scale as labels, or repair the predictions"
        )
    category_codes(r, scale, "rater")
    if j.size == 0:
        return math.nan
    per_class = [float(np.mean(np.abs(j[r == c] - c))) for c in np.unique(r)]
    return float(np.mean(per_class))


def qwk(judge: npt.ArrayLike, rater: npt.ArrayLike, labels: Sequence[float]) -> float:
    """Quadratic weighted kappa (Cohen 1968), scikit-learn's ``cohen_kappa_score`` computed directly.

    Chance-corrected agreement where a disagreement of ``d`` categories costs ``d**2``.
    Following scikit-learn, the weights use the *positions* of the categories in ``labels``
    (equally spaced ordinal categories), not their numeric values. The arithmetic is
    scikit-learn's, step for step, so the value is the same to the bit (the tests compare the
    two); calling scikit-learn costs about 2 ms of input checks per call, and a report computes
    a dozen kappas per criterion.

    Reference: J. Cohen (1968), "Weighted kappa: nominal scale agreement with provision for
    scaled disagreement or partial credit", Psychological Bulletin 70(4), 213-220.

    Args:
        judge: Judge scores, shape ``(n,)``, each one of ``labels``.
        rater: Physician ratings paired with ``judge``, shape ``(n,)``, each one of ``labels``.
        labels: The full ordinal scale, strictly increasing, e.g. ``[0, 1, 2, 3]``.

    Returns:
        Kappa in ``[-1, 1]`` (1 = perfect, 0 = chance level); ``nan`` (undefined) when
        ``n == 0`` or when either side uses a single category: against constant ratings (or a
        constant judge) the formula gives 0 whatever the other side does, which would read as
        "chance-level agreement" where there is nothing to measure.

    Raises:
        ValueError: Bad ``labels`` or mismatched lengths.
        DataError: A score is missing, not numeric or outside ``labels``.
    """
    j, r = check_pair(judge, rater)
    scale = check_labels(labels)
    jc = category_codes(j, scale, "judge")
    rc = category_codes(r, scale, "rater")
    if j.size == 0 or scale.size < 2 or np.unique(jc).size < 2 or np.unique(rc).size < 2:
        return math.nan
    return _quadratic_kappa(jc, rc, scale.size)


def _quadratic_kappa(judge_codes: np.ndarray, rater_codes: np.ndarray, k: int) -> float:
    """``cohen_kappa_score(judge_codes, rater_codes, labels=range(k), weights="quadratic")``, in
    scikit-learn's order of operations (confusion rows = judge, expected = outer(column sums, row
    sums) / n, weights = squared position differences); ``nan`` where it is undefined."""
    confusion = np.bincount(judge_codes * k + rater_codes, minlength=k * k).reshape(k, k).astype(np.float64)
    sum0, sum1 = np.sum(confusion, axis=0), np.sum(confusion, axis=1)
    expected = np.outer(sum0, sum1) / np.sum(sum0)
    weights = np.zeros((k, k), dtype=np.float64)
    weights += np.arange(k)
    weights = (weights - weights.T) ** 2
    denominator = np.sum(weights * expected)
    if denominator == 0:
        return math.nan
    value = float(1 - np.sum(weights * confusion) / denominator)
    return value if math.isfinite(value) else math.nan


def krippendorff_alpha_ordinal(judge: npt.ArrayLike, rater: npt.ArrayLike, labels: Sequence[float]) -> float:
    """Krippendorff's alpha with the ordinal metric, via the ``krippendorff`` package.

    The reliability data are two coders (judge, physician) by ``n`` units, one unit per
    pair: ``alpha = 1 - observed / expected`` disagreement, where the ordinal distance
    between two categories grows with how many pairable values lie between them (so it
    respects order without assuming equal spacing).

    Reference: K. Krippendorff (2011, rev. 2019), "Computing Krippendorff's alpha-reliability",
    Annenberg School for Communication, University of Pennsylvania.

    Args:
        judge: Judge scores, shape ``(n,)``, each one of ``labels``.
        rater: Physician ratings paired with ``judge``, shape ``(n,)``, each one of ``labels``.
        labels: The full ordinal scale (``value_domain``), strictly increasing.

    Returns:
        Alpha in ``[-1, 1]`` for practical data (1 = perfect, 0 = chance level); ``nan`` when
        ``n == 0``, the scale has one category, or every value falls in one category.

    Raises:
        ValueError: Bad ``labels`` or mismatched lengths.
        DataError: A score is missing, not numeric or outside ``labels``.
    """
    j, r = check_pair(judge, rater)
    scale = check_labels(labels)
    category_codes(j, scale, "judge")
    category_codes(r, scale, "rater")
    if j.size == 0 or scale.size < 2:
        return math.nan
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        value = krippendorff.alpha(
            reliability_data=np.vstack([j, r]), value_domain=scale, level_of_measurement="ordinal"
        )
    value = float(value)
    return value if math.isfinite(value) else math.nan


def spearman(judge: npt.ArrayLike, rater: npt.ArrayLike) -> float:
    """Spearman rank correlation (ties get average ranks), via ``scipy.stats.spearmanr``.

    Reference: C. Spearman (1904), "The proof and measurement of association between two
    things", American Journal of Psychology 15(1), 72-101.

    Args:
        judge: Judge scores, shape ``(n,)``.
        rater: Physician ratings paired with ``judge``, shape ``(n,)``.

    Returns:
        Rho in ``[-1, 1]``; ``nan`` when ``n < 2`` or either side is constant.

    Raises:
        ValueError: The two sides differ in length or are not one-dimensional.
        DataError: A score is missing or not numeric.
    """
    j, r = check_pair(judge, rater)
    if j.size < 2 or np.all(j == j[0]) or np.all(r == r[0]):
        return math.nan
    value = float(sps.spearmanr(j, r).statistic)
    return value if math.isfinite(value) else math.nan


def macro_mean(values: Mapping[str, float | None]) -> tuple[float, int]:
    """Unweighted mean over criteria (or any keys), skipping ``None`` and ``nan``.

    The paper's headline numbers are macro means of per-criterion MAEs; a criterion without
    a defined value must be left out, not counted as 0, and the caller should say how many
    criteria the mean rests on.

    Args:
        values: Mapping such as ``{"criterion_1": 0.63, "criterion_6": None}``.

    Returns:
        ``(mean, n_used)``; ``(nan, 0)`` when no value is defined.
    """
    used = [float(v) for v in values.values() if v is not None and math.isfinite(float(v))]
    if not used:
        return math.nan, 0
    return float(np.mean(used)), len(used)
