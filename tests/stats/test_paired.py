"""Paired verdicts: the sign-flip test, the interval that inverts it, the min-cases rule, Holm."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from evolve.stats import (
    MIN_CASES,
    PairedDifference,
    holm,
    paired_difference,
    paired_mae_difference,
    shift_interval,
    sign_flip_test,
)


def _calls(scores: dict[str, float], cases: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"criterion": "c", "target_id": t, "case_id": cases[t], "repeat": 0, "outcome": "score",
                          "score": str(s)} for t, s in scores.items()])


def _ratings(truth: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([{"criterion": "c", "target_id": t, "rater_id": "r1", "score": str(v)} for t, v in truth.items()])


def _pair(errors_a: list[float], errors_b: list[float], cases: list[str]):
    """Candidates whose absolute errors against a rating of 0 are the given numbers."""
    targets = [f"t{i}" for i in range(len(cases))]
    case_of = dict(zip(targets, cases))
    a = _calls(dict(zip(targets, errors_a)), case_of)
    b = _calls(dict(zip(targets, errors_b)), case_of)
    return a, b, _ratings({t: 0.0 for t in targets})


# -- the sign-flip test ----------------------------------------------------------------------------


def test_all_eight_cases_one_way_give_two_in_256():
    assert sign_flip_test(np.ones(8)) == pytest.approx(2 / 256)
    assert sign_flip_test(-np.arange(1, 9, dtype=float)) == pytest.approx(2 / 256)


def test_exact_p_value_of_a_hand_counted_example():
    # sums 1, 2, 3 (total 6): of the 8 sign patterns only (+,+,+) and (-,-,-) reach |6|;
    # (-,+,+) gives 4, (+,-,+) 2, (+,+,-) 0 -> 2/8
    assert sign_flip_test([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    # sums 3, 1, 1, 1 (total 6): flipping any 1 gives 4 or less, flipping the 3 gives 0 -> 2/16
    assert sign_flip_test([3.0, 1.0, 1.0, 1.0]) == pytest.approx(2 / 16)
    assert sign_flip_test([1.0, 1.0, 1.0, 3.0]) == sign_flip_test([3.0, 1.0, 1.0, 1.0])
    # sums 1, -1: total 0, every pattern is as extreme -> 1
    assert sign_flip_test([1.0, -1.0]) == 1.0
    # sums 1, 1, 1, 1, 0: the zero case's sign is free -> 4 of 32 reach 4
    assert sign_flip_test([1.0, 1.0, 1.0, 1.0, 0.0]) == pytest.approx(4 / 32)


def test_no_case_gives_one_and_bad_input_is_refused():
    assert sign_flip_test([]) == 1.0
    with pytest.raises(ValueError, match="finite"):
        sign_flip_test([1.0, math.nan])
    with pytest.raises(ValueError, match="n_flips"):
        sign_flip_test([1.0, 2.0], n_flips=0)


def test_beyond_exact_enumeration_the_monte_carlo_p_is_seeded_and_close():
    rng = np.random.default_rng(3)
    sums = rng.normal(0.3, 1.0, size=40)
    p1 = sign_flip_test(sums, seed=1)
    assert p1 == sign_flip_test(sums, seed=1)
    assert 0 < p1 <= 1
    # a normal approximation of the same randomisation distribution: sum of +-s_i has variance sum s_i^2
    z = abs(sums.sum()) / math.sqrt((sums**2).sum())
    normal_p = math.erfc(z / math.sqrt(2))
    assert p1 == pytest.approx(normal_p, abs=0.03)


# -- paired_mae_difference -------------------------------------------------------------------------


def test_a_better_on_every_one_of_eight_cases_is_better_with_exact_p():
    cases = [f"k{i}" for i in range(8)]
    a, b, ratings = _pair([0.0] * 8, [1.0] * 8, cases)
    d = paired_mae_difference(a, b, ratings)
    assert isinstance(d, PairedDifference)
    assert d.estimate == -1.0 and d.n_pairs == 8 and d.n_cases == 8
    assert d.p_value == pytest.approx(2 / 256)
    assert d.method == "exact sign-flip test over 8 cases"
    # every case differs by exactly -1, so every other shift is rejected: the interval is that point
    assert d.verdict == "better" and d.low == d.estimate == d.high == -1.0


def test_the_same_data_on_seven_cases_is_too_few_to_tell_but_still_reported():
    cases = [f"k{i}" for i in range(7)]
    a, b, ratings = _pair([0.0] * 7, [1.0] * 7, cases)
    d = paired_mae_difference(a, b, ratings)
    assert d.p_value == pytest.approx(2 / 128) and d.p_value < 0.05
    assert d.verdict == "too few cases to tell"
    assert d.estimate == -1.0 and d.high < 0  # estimate and interval still there
    # the rule follows min_cases
    assert paired_mae_difference(a, b, ratings, min_cases=7).verdict == "better"
    assert MIN_CASES == 8


def test_many_pairs_in_few_cases_are_not_many_cases():
    # 40 targets, all better, but in 4 cases: the test cannot go below 2/16
    cases = [f"k{i % 4}" for i in range(40)]
    a, b, ratings = _pair([0.0] * 40, [1.0] * 40, cases)
    d = paired_mae_difference(a, b, ratings, min_cases=1)
    assert d.n_cases == 4 and d.n_pairs == 40
    assert d.p_value == pytest.approx(2 / 16)
    assert d.verdict == "no distinguishable difference"
    assert math.isnan(d.low) and math.isnan(d.high)  # no shift can be rejected with 4 cases


def test_no_shared_pair_is_nan_and_too_few_cases():
    a, _, ratings = _pair([0.0] * 3, [1.0] * 3, ["k0", "k1", "k2"])
    b = a.assign(target_id=["x0", "x1", "x2"])
    d = paired_mae_difference(a, b, ratings)
    assert d.n_pairs == 0 and d.n_cases == 0 and d.p_value is None
    assert math.isnan(d.estimate) and math.isnan(d.low) and math.isnan(d.high)
    assert d.verdict == "too few cases to tell"


def test_old_keyword_arguments_still_work_and_confidence_is_checked():
    cases = [f"k{i}" for i in range(10)]
    a, b, ratings = _pair([0, 1, 0, 1, 0, 1, 0, 1, 0, 1], [1, 1, 1, 0, 1, 1, 0, 1, 1, 1], cases)
    d = paired_mae_difference(a, b, ratings, n_boot=50, seed=4, confidence=0.9)
    assert d.confidence == 0.9 and d.n_cases == 10
    with pytest.raises(ValueError, match="confidence"):
        paired_mae_difference(a, b, ratings, confidence=1.0)


@pytest.mark.parametrize("seed", range(12))
def test_verdict_and_interval_always_agree(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 20))
    cases = [f"k{i}" for i in rng.integers(0, n, size=3 * n)]
    shift = rng.choice([-0.6, 0.0, 0.6])
    ea = np.clip(rng.integers(0, 3, size=len(cases)) + shift, 0, None)
    eb = rng.integers(0, 3, size=len(cases)).astype(float)
    a, b, ratings = _pair(list(ea), list(eb), cases)
    d = paired_mae_difference(a, b, ratings, seed=seed)
    assert d.low <= d.estimate <= d.high
    assert (d.verdict == "better") == (d.high < 0)
    assert (d.verdict == "worse") == (d.low > 0)
    assert (d.verdict in ("better", "worse")) == (d.p_value < 0.05)


def test_the_interval_ends_are_the_shifts_where_the_test_turns():
    sums = np.array([-3.0, -1.0, -2.0, 0.5, -1.5, -2.5, -0.5, -1.0, 1.0, -2.0])
    counts = np.array([2, 1, 2, 1, 1, 3, 1, 1, 2, 2], dtype=float)
    low, high = shift_interval(sums, counts)
    eps = 1e-6
    assert sign_flip_test(sums - (high - eps) * counts) >= 0.05 > sign_flip_test(sums - (high + eps) * counts)
    assert sign_flip_test(sums - (low + eps) * counts) >= 0.05 > sign_flip_test(sums - (low - eps) * counts)


def test_cases_that_all_differ_by_the_same_mean_give_that_point_exactly():
    """Two runs that answered alike (every difference 0) have the interval [0, 0], not the
    bisection's +-1e-10; the same for any common shift. Too few cases still give none."""
    assert shift_interval(np.zeros(8), np.full(8, 4.0)) == (0.0, 0.0)
    assert shift_interval(np.full(8, 2.0), np.full(8, 4.0)) == (0.5, 0.5)
    low, high = shift_interval(np.zeros(3), np.ones(3))
    assert math.isnan(low) and math.isnan(high)


def test_paired_difference_on_raw_differences_matches_the_scores_path():
    cases = [f"k{i % 9}" for i in range(20)]
    ea = [float(i % 3) for i in range(20)]
    eb = [float((i * 7) % 4) for i in range(20)]
    a, b, ratings = _pair(ea, eb, cases)
    via_scores = paired_mae_difference(a, b, ratings)
    direct = paired_difference(np.array(ea) - np.array(eb), cases)
    assert via_scores == direct
    with pytest.raises(ValueError, match="shape"):
        paired_difference([1.0, 2.0], ["k0"])
    nan_only = paired_difference([math.nan], ["k0"])
    assert nan_only.n_pairs == 0 and nan_only.verdict == "too few cases to tell"


def test_false_better_or_worse_stays_near_five_percent_under_the_null():
    """300 comparisons of two equally good judges on 10 case clusters of 1-4 targets each: a
    shared case difficulty, independent judge noise, integer scores 0-3 (the issue's bench gave
    5 wrong verdicts in 13 with a percentile bootstrap in this setting)."""
    rng = np.random.default_rng(2026)
    definitive, draws = 0, 300
    for _ in range(draws):
        cases = np.array([f"k{g}" for g in range(10) for _ in range(int(rng.integers(1, 5)))])
        hard = {c: rng.normal(0, 0.8) for c in set(cases)}
        truth = rng.integers(0, 4, size=len(cases))
        noise = [np.array([hard[c] for c in cases]) + rng.normal(0, 0.7, size=len(cases)) for _ in "ab"]
        ea, eb = (np.abs(np.clip(np.rint(truth + z), 0, 3) - truth) for z in noise)
        definitive += paired_difference(ea - eb, cases).verdict in ("better", "worse")
    assert definitive / draws <= 0.075  # nominal 5%; 300 draws give a standard error of about 1.3 points


# -- Holm ------------------------------------------------------------------------------------------


def test_holm_against_a_hand_computed_example():
    # sorted 0.01, 0.03, 0.04 with m = 3: 0.03, max(0.03, 0.06) = 0.06, max(0.06, 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    # capped at 1, monotone
    assert holm([0.5, 0.2]) == pytest.approx([0.5, 0.4])
    assert holm([0.9, 0.8, 0.7]) == pytest.approx([1.0, 1.0, 1.0])
    assert holm([]) == [] and holm([None]) == [None]
    assert holm([0.02]) == [0.02]
