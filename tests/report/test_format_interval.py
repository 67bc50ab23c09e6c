"""``format_interval``: the one way every report writes an estimate with its interval."""

from __future__ import annotations

import pytest

from evolve.markdown import format_interval, format_number


@pytest.mark.parametrize(("args", "kwargs", "text"), [
    ((2.31, 2.1, 2.52), {}, "2.310 [2.100, 2.520]"),
    ((0.5, None, 0.7), {}, "0.500"),  # one bound missing: the estimate alone
    ((None, 0.1, 0.2), {}, "—"),
    ((None, None, None), {"missing": "undefined"}, "undefined"),
    ((0.125, 0.08, 0.171), {"digits": 1, "scale": 100.0, "suffix": "%"}, "12.5% [8.0, 17.1]"),
    ((-1e-17, -0.0004, 0.25), {}, "0.000 [0.000, 0.250]"),  # never -0.000
    ((-0.02, -0.05, 0.01), {"digits": 2}, "-0.02 [-0.05, 0.01]"),
])
def test_an_estimate_and_its_interval_are_written_one_way(args, kwargs, text):
    assert format_interval(*args, **kwargs) == text


@pytest.mark.parametrize(("value", "kwargs", "text"), [
    (0.4, {"signed": True}, "+0.400"),
    (-1e-17, {"signed": True}, "+0.000"),  # never -0.000, signed or not
    (-0.0004, {}, "0.000"),
    (-0.7, {"signed": True}, "-0.700"),
    (0.125, {"digits": 1}, "0.1"),
])
def test_a_number_is_written_without_a_negative_zero(value, kwargs, text):
    assert format_number(value, **kwargs) == text


def test_a_verdict_is_described_without_a_negative_zero():
    from evolve.workflows import Verdict

    verdict = Verdict(baseline="no_guidance", verdict="no distinguishable difference", estimate=0.0, low=-1e-17,
                      high=0.0, n_pairs=18, n_cases=9)
    assert verdict.describe() == "no distinguishable difference vs no_guidance: +0.000 [+0.000, +0.000] (9 cases)"


def test_a_verdict_is_described_as_the_report_words_it():
    """p-value, cases and Holm's correction, as report.md says them: a "better" that does not
    survive the correction must not read as a plain "better" in Python."""
    from evolve.workflows import Verdict

    verdict = Verdict(baseline="best_initial", verdict="better", estimate=-0.462, low=-0.75, high=-0.167, n_pairs=26,
                      n_cases=13, p_value=0.016, holm_p=0.048, holm_survives=False)
    assert verdict.describe() == ("better vs best_initial: -0.462 [-0.750, -0.167] (p = 0.016, 13 cases) - not after "
                                  "Holm's correction")
    kept = verdict.model_copy(update={"holm_survives": True})
    assert kept.describe() == "better vs best_initial: -0.462 [-0.750, -0.167] (p = 0.016, 13 cases)"
    few = Verdict(baseline="no_guidance", verdict="too few cases to tell", estimate=-0.5, low=None, high=None,
                  n_pairs=4, n_cases=1, p_value=0.5)
    assert few.describe() == "too few cases to tell vs no_guidance: -0.500 [—] (1 case)"
