"""Physician-anchored means (PPI / PPI++), checked against the authors' package and by hand."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from evolve.stats import MIN_RATED_CASES, PPIEstimate, ppi_mean, ppi_mean_difference

Z95 = NormalDist().inv_cdf(0.975)


def _reference_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """40 rated items (physician 0-3, judge lenient by 0.4 with noise) and 300 judged items."""
    rng = np.random.default_rng(20231101)
    y = rng.integers(0, 4, size=40).astype(float)
    f = y + 0.4 + rng.normal(0.0, 0.8, size=40)
    yu = rng.integers(0, 4, size=300).astype(float)
    fu = yu + 0.4 + rng.normal(0.0, 0.8, size=300)
    return y, f, fu


def _frames(y, f, fu, rated_cases=None, unrated_cases=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    rated_cases = [f"r{i}" for i in range(len(y))] if rated_cases is None else rated_cases
    unrated_cases = [f"u{i}" for i in range(len(fu))] if unrated_cases is None else unrated_cases
    return (pd.DataFrame({"case_id": rated_cases, "judge": f, "physician": y}),
            pd.DataFrame({"case_id": unrated_cases, "judge": fu}))


# Values from the authors' implementation, ppi-python 0.2.3 (pip install ppi-python==0.2.3), on the
# data of _reference_data():  ppi_mean_pointestimate(y, f, fu, lam=L) and
# ppi_mean_ci(y, f, fu, alpha=0.05, lam=L) for L = None (PPI++ tuning), 1 (plain PPI) and 0
# (classical).  Its interval is the normal one with population (ddof=0) standard deviations,
# sqrt(std(lam * fu)**2 / N + std(y - lam * f)**2 / n); its tuned lam is clipped to [0, 1].
PPI_PYTHON_0_2_3 = {
    None: (1.5129886491233107, 1.2898056919211243, 1.736171606325497),
    1.0: (1.616056405569708, 1.3070984019004062, 1.9250144092390098),
    0.0: (1.275, 0.9084061703598639, 1.641593829640136),
}


@pytest.mark.parametrize("lam", [None, 1.0, 0.0])
def test_one_item_per_case_matches_ppi_python(lam):
    y, f, fu = _reference_data()
    rated, unrated = _frames(y, f, fu)
    if lam is None:
        est = ppi_mean(rated, unrated, small_sample=False)
    elif lam == 1.0:
        est = ppi_mean(rated, unrated, tune=False, small_sample=False)
    else:
        est = ppi_mean(rated, unrated, lam=0.0, small_sample=False)
    point, low, high = PPI_PYTHON_0_2_3[lam]
    assert est.estimate == pytest.approx(point, abs=1e-12)
    assert est.low == pytest.approx(low, abs=1e-12) and est.high == pytest.approx(high, abs=1e-12)
    assert est.refused is None and est.n_rated == 40 and est.n_unrated == 300
    assert est.n_rated_cases == 40 and est.n_unrated_cases == 300


def test_the_tuned_weight_and_the_figures_beside_it():
    y, f, fu = _reference_data()
    est = ppi_mean(*_frames(y, f, fu), small_sample=False)
    # the point estimate is lam * mean(fu) + mean(y - lam f): recover lam from ppi-python's estimate
    lam_ref = (PPI_PYTHON_0_2_3[None][0] - y.mean()) / (fu.mean() - f.mean())
    assert est.lam == pytest.approx(lam_ref, abs=1e-9) and 0 < est.lam < 1
    assert est.rated_mean == pytest.approx(y.mean()) and est.judge_mean == pytest.approx(fu.mean())
    judge_se = fu.std() / math.sqrt(len(fu))
    assert est.judge_low == pytest.approx(fu.mean() - Z95 * judge_se)
    assert est.judge_high == pytest.approx(fu.mean() + Z95 * judge_se)
    # effective n: 40 ratings times the ratio of the classical variance to this one
    classical = (PPI_PYTHON_0_2_3[0.0][2] - PPI_PYTHON_0_2_3[0.0][1]) ** 2
    tuned = (PPI_PYTHON_0_2_3[None][2] - PPI_PYTHON_0_2_3[None][1]) ** 2
    assert est.effective_n == pytest.approx(40 * classical / tuned)
    assert est.effective_n > 40
    assert "drawn like the judged outputs" in est.assumption


def test_lam_zero_is_the_classical_case_clustered_interval_of_the_rated_mean():
    # 12 cases of 1-3 rated items each
    rng = np.random.default_rng(5)
    cases = [f"c{g}" for g in range(12) for _ in range(1 + g % 3)]
    y = rng.integers(0, 4, size=len(cases)).astype(float)
    f = y + rng.normal(0, 1, size=len(cases))
    rated, unrated = _frames(y, f, rng.normal(1.5, 1, size=50), rated_cases=cases)
    est = ppi_mean(rated, unrated, lam=0.0)
    # by hand: case sums of centred ratings, squared, summed, over n squared, times G / (G - 1);
    # Student's t with G - 1 = 11 degrees of freedom (2.200985 from a t table)
    centred = pd.Series(y - y.mean()).groupby(cases).sum().to_numpy()
    se = math.sqrt((centred**2).sum() * 12 / 11) / len(y)
    t11 = 2.200985160091639
    assert est.estimate == pytest.approx(y.mean())
    assert est.low == pytest.approx(y.mean() - t11 * se) and est.high == pytest.approx(y.mean() + t11 * se)
    assert est.effective_n == pytest.approx(len(y))
    assert est.n_rated_cases == 12
    # the asymptotic interval (ppi-python's convention): no G / (G - 1), the normal quantile
    plain = ppi_mean(rated, unrated, lam=0.0, small_sample=False)
    se0 = math.sqrt((centred**2).sum()) / len(y)
    assert plain.low == pytest.approx(y.mean() - Z95 * se0) and plain.high == pytest.approx(y.mean() + Z95 * se0)


def test_a_perfect_judge_gives_a_narrow_interval_on_the_truth():
    rng = np.random.default_rng(11)
    y = rng.integers(0, 4, size=30).astype(float)
    yu = rng.integers(0, 4, size=600).astype(float)
    perfect = ppi_mean(*_frames(y, y, yu))
    classical = ppi_mean(*_frames(y, y, yu), lam=0.0)
    assert perfect.lam == pytest.approx(1.0, abs=0.1)
    assert perfect.low <= yu.mean() <= perfect.high
    width = perfect.high - perfect.low
    assert width < 0.3 * (classical.high - classical.low)
    assert width == pytest.approx(2 * Z95 * yu.std() / math.sqrt(600), rel=0.15)
    assert perfect.effective_n > 10 * 30


def test_a_constant_judge_is_ignored():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 4, size=20).astype(float)
    est = ppi_mean(*_frames(y, np.full(20, 2.0), np.full(100, 2.0)))
    assert est.lam == 0.0 and est.estimate == pytest.approx(y.mean())


def test_several_items_per_case_are_one_cluster():
    y, f, fu = _reference_data()
    # every item three times in its own case: the same information, the same interval
    triple = _frames(np.repeat(y, 3), np.repeat(f, 3), np.repeat(fu, 3),
                     rated_cases=[f"r{i}" for i in range(40) for _ in range(3)],
                     unrated_cases=[f"u{i}" for i in range(300) for _ in range(3)])
    once, clustered = ppi_mean(*_frames(y, f, fu), tune=False), ppi_mean(*triple, tune=False)
    assert clustered.estimate == pytest.approx(once.estimate)
    assert clustered.low == pytest.approx(once.low) and clustered.high == pytest.approx(once.high)
    assert clustered.n_rated == 120 and clustered.n_rated_cases == 40
    # treating the copies as separate cases would shrink the interval by sqrt(3)
    naive = ppi_mean(*_frames(np.repeat(y, 3), np.repeat(f, 3), np.repeat(fu, 3)), tune=False, small_sample=False)
    asymptotic = ppi_mean(*_frames(y, f, fu), tune=False, small_sample=False)
    assert (naive.high - naive.low) == pytest.approx((asymptotic.high - asymptotic.low) / math.sqrt(3))


def test_too_few_rated_cases_is_refused_with_the_size():
    y, f, fu = _reference_data()
    cases = [f"r{i % 9}" for i in range(40)]  # 40 items but 9 cases
    est = ppi_mean(*_frames(y, f, fu, rated_cases=cases))
    assert isinstance(est, PPIEstimate) and MIN_RATED_CASES == 10
    assert est.refused == "only 9 rated cases; at least 10 are needed for a physician-anchored estimate"
    assert est.estimate is est.low is est.high is est.lam is est.effective_n is est.judge_mean is None
    assert est.n_rated == 40 and est.n_rated_cases == 9 and est.n_unrated == 300
    assert ppi_mean(*_frames(y, f, fu, rated_cases=cases), min_rated_cases=9).refused is None
    empty = ppi_mean(*_frames(y, f, fu[:0]))
    assert empty.refused == "no judged (unrated) item to estimate from"


def test_bad_input_is_refused_in_words():
    y, f, fu = _reference_data()
    rated, unrated = _frames(y, f, fu)
    with pytest.raises(ValueError, match="rated frame lacks the column.*physician"):
        ppi_mean(rated.drop(columns="physician"), unrated)
    with pytest.raises(ValueError, match="'judge' has missing"):
        ppi_mean(rated, unrated.assign(judge=np.r_[math.nan, fu[1:]]))
    with pytest.raises(ValueError, match="confidence"):
        ppi_mean(rated, unrated, confidence=1.5)
    with pytest.raises(ValueError, match="lam"):
        ppi_mean(rated, unrated, lam=2.0)


# -- differences -----------------------------------------------------------------------------------


def test_difference_of_independent_samples_is_the_difference_of_the_means():
    y, f, fu = _reference_data()
    rng = np.random.default_rng(8)
    yb = rng.integers(0, 4, size=30).astype(float)
    fb = yb - 0.2 + rng.normal(0, 0.5, size=30)
    fub = rng.integers(0, 4, size=200) - 0.2 + rng.normal(0, 0.5, size=200)
    ra, ua = _frames(y, f, fu)
    rb, ub = _frames(yb, fb, fub, rated_cases=[f"s{i}" for i in range(30)], unrated_cases=[f"v{i}" for i in range(200)])
    a, b = ppi_mean(ra, ua, small_sample=False), ppi_mean(rb, ub, small_sample=False)
    d = ppi_mean_difference(ra, ua, rb, ub, small_sample=False)
    assert d.estimate == pytest.approx(a.estimate - b.estimate)
    se_a, se_b = (a.high - a.low) / (2 * Z95), (b.high - b.low) / (2 * Z95)
    assert (d.high - d.low) / (2 * Z95) == pytest.approx(math.hypot(se_a, se_b))
    assert d.rated_mean == pytest.approx(y.mean() - yb.mean())
    assert d.judge_mean == pytest.approx(fu.mean() - fub.mean())
    assert d.lam == a.lam and d.n_rated == 70 and d.n_rated_cases == 70 and d.n_unrated == 500
    assert d.effective_n is not None and "each system's" in d.assumption
    # with the small-sample correction the quantile is Student's t on the smaller rated sample (30 - 1 df)
    wide = ppi_mean_difference(ra, ua, rb, ub)
    assert wide.estimate == pytest.approx(d.estimate) and (wide.high - wide.low) > (d.high - d.low) * 2.045 / Z95


def test_difference_with_one_shared_rated_sample_is_the_judges_raw_difference():
    """Both systems answered the same 150 cases; one rated sample anchors both."""
    rng = np.random.default_rng(9)
    y, f, _ = _reference_data()
    rated = _frames(y, f, np.array([]))[0]
    hard = rng.normal(0, 1, size=150)  # a case's difficulty moves both systems' scores
    fa, fb = 2.0 + hard + rng.normal(0, 0.3, 150), 1.7 + hard + rng.normal(0, 0.3, 150)
    cases = [f"u{i}" for i in range(150)]
    ua, ub = pd.DataFrame({"case_id": cases, "judge": fa}), pd.DataFrame({"case_id": cases, "judge": fb})
    d = ppi_mean_difference(rated, ua, rated.copy(), ub, small_sample=False)
    assert d.lam == 1.0 and d.rated_mean is None and d.effective_n is None
    assert d.estimate == pytest.approx(fa.mean() - fb.mean())
    # paired by case: the standard error is that of the per-case differences, not of two independent means
    diff = fa - fb
    se = diff.std() / math.sqrt(150)
    assert d.low == pytest.approx(d.estimate - Z95 * se) and d.high == pytest.approx(d.estimate + Z95 * se)
    independent = math.hypot(fa.std(), fb.std()) / math.sqrt(150)
    assert se < independent / 3
    assert d.judge_low == pytest.approx(d.low) and d.judge_high == pytest.approx(d.high)
    assert d.n_rated == 40 and d.n_rated_cases == 40 and d.n_unrated == 300 and d.n_unrated_cases == 150
    assert "same on both systems' outputs" in d.assumption
    refused = ppi_mean_difference(rated.iloc[:5], ua, rated.iloc[:5], ub)
    assert refused.refused is not None and "only 5 rated cases" in refused.refused
