"""Each statistic against a hand computation on fixed data and against its reference library."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import krippendorff
import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score, mean_absolute_error

from evolve.errors import DataError
from evolve.stats import (
    class_balanced_mae,
    krippendorff_alpha_ordinal,
    macro_mean,
    mae,
    qwk,
    signed_error,
    spearman,
)

LABELS = [0, 1, 2, 3]
# Eight pairs; judge x rater table (rows judge 0..3, columns rater 0..3):
#   [[1,1,0,0], [0,1,1,0], [0,0,1,1], [0,1,0,1]]
JUDGE = [0, 1, 2, 3, 2, 1, 0, 3]
RATER = [0, 2, 2, 1, 3, 1, 1, 3]


def test_mae_and_signed_error_by_hand():
    # |j - r| = 0,1,0,2,1,0,1,0 -> 5/8; j - r sums to -1 -> -1/8.
    assert mae(JUDGE, RATER) == pytest.approx(0.625, abs=1e-15)
    assert signed_error(JUDGE, RATER) == pytest.approx(-0.125, abs=1e-15)
    assert signed_error(RATER, JUDGE) == pytest.approx(0.125, abs=1e-15)


def test_class_balanced_mae_by_hand():
    # Rater class 0: errors [0]; class 1: [2, 0, 1]; class 2: [1, 0]; class 3: [1, 0].
    # Per-class MAE 0, 1, 1/2, 1/2 -> mean 1/2 (plain MAE is 5/8).
    assert class_balanced_mae(JUDGE, RATER, LABELS) == pytest.approx(0.5, abs=1e-15)


def test_class_balanced_mae_differs_from_mae_when_imbalanced():
    rater = [3] * 18 + [0, 1]
    judge = [3] * 20  # always answers the majority category
    assert mae(judge, rater) == pytest.approx(5 / 20)
    # Classes 3, 0, 1 have MAE 0, 3, 2 -> 5/3: the majority-only judge is exposed.
    assert class_balanced_mae(judge, rater, LABELS) == pytest.approx(5 / 3)


def test_class_balanced_mae_averages_only_present_rater_classes():
    # No rating of 0 or 3: the mean is over classes 1 and 2 only.
    assert class_balanced_mae([1, 3, 2], [1, 1, 2], LABELS) == pytest.approx((1.0 + 0.0) / 2)


def _qwk_formula(judge, rater, k):
    """Cohen (1968) with exact fractions: 1 - sum(w * O) / sum(w * E), w = (i - j)^2."""
    n = len(judge)
    obs = [[Fraction(0)] * k for _ in range(k)]
    for a, b in zip(judge, rater):
        obs[a][b] += 1
    rows = [sum(obs[i]) for i in range(k)]
    cols = [sum(obs[i][j] for i in range(k)) for j in range(k)]
    num = sum((i - j) ** 2 * obs[i][j] for i in range(k) for j in range(k))
    den = sum((i - j) ** 2 * rows[i] * cols[j] / n for i in range(k) for j in range(k))
    return 1 - num / den


def test_qwk_by_hand_and_against_sklearn():
    # Observed weighted disagreement 7, expected 18 -> 11/18.
    assert _qwk_formula(JUDGE, RATER, 4) == Fraction(11, 18)
    assert qwk(JUDGE, RATER, LABELS) == pytest.approx(11 / 18, abs=1e-12)
    ref = cohen_kappa_score(JUDGE, RATER, labels=LABELS, weights="quadratic")
    assert qwk(JUDGE, RATER, LABELS) == pytest.approx(ref, abs=1e-12)


def test_qwk_weights_by_category_position_like_sklearn():
    labels = [0, 1, 3]  # unevenly spaced values: weights still use positions 0, 1, 2
    judge, rater = [0, 1, 3, 3, 1], [0, 3, 3, 1, 1]
    ref = cohen_kappa_score([0, 1, 2, 2, 1], [0, 2, 2, 1, 1], labels=[0, 1, 2], weights="quadratic")
    assert qwk(judge, rater, labels) == pytest.approx(ref, abs=1e-12)


def _alpha_ordinal_formula(judge, rater, k):
    """Krippendorff's ordinal alpha for two coders, one unit per pair, exact fractions."""
    o = [[Fraction(0)] * k for _ in range(k)]
    for a, b in zip(judge, rater):  # a unit with values (a, b) adds both ordered pairs, weight 1/(2-1)
        o[a][b] += 1
        o[b][a] += 1
    n_v = [sum(o[c]) for c in range(k)]
    total = sum(n_v)

    def dist(c, d):
        lo, hi = min(c, d), max(c, d)
        return (sum(n_v[lo : hi + 1]) - Fraction(n_v[c] + n_v[d], 2)) ** 2

    d_obs = sum(o[c][d] * dist(c, d) for c in range(k) for d in range(k))
    d_exp = sum(n_v[c] * n_v[d] * dist(c, d) for c in range(k) for d in range(k) if c != d) / (total - 1)
    return 1 - d_obs / d_exp


def test_krippendorff_alpha_ordinal_by_hand_and_against_package():
    # Coincidences [[2,1,0,0],[1,2,1,1],[0,1,2,1],[0,1,1,2]], n_v = 3,5,4,4:
    # observed 249, expected 10176/15 -> alpha = 2147/3392.
    assert _alpha_ordinal_formula(JUDGE, RATER, 4) == Fraction(2147, 3392)
    assert krippendorff_alpha_ordinal(JUDGE, RATER, LABELS) == pytest.approx(2147 / 3392, abs=1e-12)
    ref = krippendorff.alpha(
        reliability_data=[JUDGE, RATER], value_domain=LABELS, level_of_measurement="ordinal"
    )
    assert krippendorff_alpha_ordinal(JUDGE, RATER, LABELS) == pytest.approx(ref, abs=1e-12)


def test_spearman_by_hand_and_against_scipy():
    # Mid-ranks: judge 1.5,3.5,5.5,7.5,5.5,3.5,1.5,7.5; rater 1,5.5,5.5,3,7.5,3,3,7.5
    # -> sum of centred products 24, sums of squares 40 and 39.
    assert spearman(JUDGE, RATER) == pytest.approx(24 / math.sqrt(40 * 39), abs=1e-12)
    assert spearman(JUDGE, RATER) == pytest.approx(spearmanr(JUDGE, RATER).statistic, abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_random_data_matches_libraries(seed):
    rng = np.random.default_rng(seed)
    judge = rng.integers(0, 4, 60)
    rater = np.clip(judge + rng.integers(-2, 3, 60), 0, 3)
    assert mae(judge, rater) == pytest.approx(mean_absolute_error(rater, judge), abs=1e-15)
    assert qwk(judge, rater, LABELS) == pytest.approx(
        cohen_kappa_score(judge, rater, labels=LABELS, weights="quadratic"), abs=1e-12
    )
    assert float(_qwk_formula(judge.tolist(), rater.tolist(), 4)) == pytest.approx(qwk(judge, rater, LABELS))
    assert float(_alpha_ordinal_formula(judge.tolist(), rater.tolist(), 4)) == pytest.approx(
        krippendorff_alpha_ordinal(judge, rater, LABELS), abs=1e-12
    )
    assert spearman(judge, rater) == pytest.approx(spearmanr(judge, rater).statistic, abs=1e-12)


def test_perfect_agreement():
    assert mae(JUDGE, JUDGE) == 0.0
    assert class_balanced_mae(JUDGE, JUDGE, LABELS) == 0.0
    assert qwk(JUDGE, JUDGE, LABELS) == pytest.approx(1.0)
    assert krippendorff_alpha_ordinal(JUDGE, JUDGE, LABELS) == pytest.approx(1.0)
    assert spearman(JUDGE, JUDGE) == pytest.approx(1.0)


@pytest.mark.filterwarnings("error")
class TestDegenerateCasesAreNan:
    """Undefined values come back as nan, silently, never as an exception."""

    def test_empty(self):
        for value in (
            mae([], []),
            signed_error([], []),
            class_balanced_mae([], [], LABELS),
            qwk([], [], LABELS),
            krippendorff_alpha_ordinal([], [], LABELS),
            spearman([], []),
        ):
            assert math.isnan(value)

    def test_single_category_everywhere(self):
        judge = rater = [2, 2, 2, 2]
        assert mae(judge, rater) == 0.0
        assert class_balanced_mae(judge, rater, LABELS) == 0.0
        assert math.isnan(qwk(judge, rater, LABELS))
        assert math.isnan(krippendorff_alpha_ordinal(judge, rater, LABELS))
        assert math.isnan(spearman(judge, rater))

    def test_single_category_scale(self):
        assert math.isnan(qwk([1, 1], [1, 1], [1]))
        assert math.isnan(krippendorff_alpha_ordinal([1, 1], [1, 1], [1]))

    def test_constant_side(self):
        assert math.isnan(spearman([2, 2, 2], [0, 1, 3]))
        assert math.isnan(spearman([0, 1, 3], [1, 1, 1]))
        # one constant side: the formula gives 0 whatever the other side does - undefined, not "chance level"
        assert math.isnan(qwk([2, 2, 2], [1, 2, 3], LABELS))
        assert math.isnan(qwk([0, 1, 3], [1, 1, 1], LABELS))

    def test_one_pair(self):
        assert math.isnan(spearman([1], [2]))
        assert mae([1], [2]) == 1.0


class TestBadInput:
    def test_length_mismatch(self):
        with pytest.raises(ValueError, match="same length"):
            mae([0, 1], [0])

    def test_two_dimensional(self):
        with pytest.raises(ValueError, match="one-dimensional"):
            mae([[0, 1]], [[0, 1]])

    def test_missing_score_is_data_error_with_fix(self):
        with pytest.raises(DataError, match="not_evaluable"):
            mae([0, np.nan], [0, 1])
        with pytest.raises(DataError, match="not numeric"):
            spearman([0, "n/a"], [0, 1])

    def test_out_of_scale(self):
        with pytest.raises(DataError, match="outside the scale"):
            qwk([0, 4], [0, 1], LABELS)
        with pytest.raises(DataError, match="outside the scale"):
            class_balanced_mae([0, 1], [0, 1.5], LABELS)

    @pytest.mark.parametrize("labels", [[], [0, 2, 1], [0, 0, 1], ["a", "b"]])
    def test_bad_labels(self, labels):
        with pytest.raises(ValueError, match="labels"):
            krippendorff_alpha_ordinal([0], [0], labels)


def test_accepts_numpy_pandas_and_float_scores():
    import pandas as pd

    assert qwk(pd.Series(JUDGE), np.asarray(RATER, dtype=float), LABELS) == pytest.approx(11 / 18)


def test_macro_mean_skips_undefined():
    assert macro_mean({"a": 0.5, "b": None, "c": math.nan, "d": 1.0}) == (0.75, 2)
    mean, used = macro_mean({"a": None})
    assert math.isnan(mean) and used == 0
    assert macro_mean({}) == (pytest.approx(math.nan, nan_ok=True), 0)


def test_no_warnings_on_regular_data():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f in (qwk, krippendorff_alpha_ordinal, class_balanced_mae):
            f(JUDGE, RATER, LABELS)
        spearman(JUDGE, RATER)


def test_class_balanced_mae_accepts_a_constant_between_labels():
    """The training-median baseline may be a half point (median of an even count)."""
    from evolve.stats import class_balanced_mae as cbm

    judge = np.full(4, 1.5)
    rater = np.array([0, 3, 3, 3])
    # class 0: |1.5 - 0| = 1.5; class 3: |1.5 - 3| = 1.5
    assert cbm(judge, rater, [0, 1, 2, 3]) == pytest.approx(1.5)
    with pytest.raises(DataError, match="outside the scale"):
        cbm(np.array([4.0]), np.array([3]), [0, 1, 2, 3])


@pytest.mark.parametrize("seed", range(40))
def test_qwk_is_sklearns_cohen_kappa_to_the_bit(seed):
    """The direct computation follows scikit-learn's arithmetic step for step: equal, not close,
    on random scales (2 to 6 categories, not all used), sizes and value spacings."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 7))
    labels = np.cumsum(rng.integers(1, 3, size=k)).astype(float).tolist()  # uneven spacing: positions count
    n = int(rng.integers(2, 60))
    judge, rater = rng.choice(labels, size=n), rng.choice(labels[: max(2, k - 1)], size=n)
    expected = cohen_kappa_score([labels.index(v) for v in judge], [labels.index(v) for v in rater],
                                 labels=list(range(k)), weights="quadratic")
    got = qwk(judge, rater, labels)
    if len(set(judge)) < 2 or len(set(rater)) < 2:
        assert math.isnan(got)  # undefined for a constant side, where sklearn says 0
    else:
        assert got == float(expected)
