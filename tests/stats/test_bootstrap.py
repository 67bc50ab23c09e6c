"""Case-clustered bootstrap: determinism, coverage of the estimate, clustering, NaN accounting."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pandas as pd
import pydantic
import pytest

from evolve.errors import DataError
from evolve.stats import (
    STATISTICS,
    Interval,
    agreement_table,
    class_balanced_mae,
    cluster_bootstrap,
    constant_agreement_table,
    krippendorff_alpha_ordinal,
    mae,
    qwk,
    signed_error,
    spearman,
)

LABELS = [0, 1, 2, 3]


def synthetic_pairs(n_cases=40, pairs_per_case=12, seed=0, case_effect=0.8):
    """Judge vs rater on 0-3 with a per-case shift, so pairs of one case are correlated."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_cases):
        shift = rng.normal(0, case_effect)
        for p in range(pairs_per_case):
            truth = rng.integers(0, 4)
            judge = int(np.clip(np.rint(truth + shift + rng.normal(0, 0.5)), 0, 3))
            rows.append({"case_id": f"case-{c:03d}", "target_id": f"t{c}-{p // 3}", "judge": judge, "rater": truth,
                         "pair_id": f"{c}-{p}"})
    return pd.DataFrame(rows)


def test_same_seed_same_interval_other_seed_differs():
    pairs = synthetic_pairs()
    a = cluster_bootstrap(pairs, mae, n_boot=300, seed=11)
    b = cluster_bootstrap(pairs, mae, n_boot=300, seed=11)
    c = cluster_bootstrap(pairs, mae, n_boot=300, seed=12)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)
    assert agreement_table(pairs, LABELS, n_boot=300, seed=11) == agreement_table(pairs, LABELS, n_boot=300, seed=11)


def test_row_order_does_not_change_the_interval():
    pairs = synthetic_pairs()
    shuffled = pairs.sample(frac=1.0, random_state=5).reset_index(drop=True)
    assert agreement_table(pairs, LABELS, n_boot=200, seed=3) == agreement_table(shuffled, LABELS, n_boot=200, seed=3)


def test_interval_brackets_estimate_and_reports_counts():
    pairs = synthetic_pairs()
    table = agreement_table(pairs, LABELS, n_boot=1000, seed=0)
    assert list(table) == list(STATISTICS)
    for name, iv in table.items():
        assert iv.low <= iv.estimate <= iv.high, name
        assert iv.low < iv.high, name
        assert (iv.n_boot, iv.n_valid, iv.n_nan) == (1000, 1000, 0)
        assert (iv.n_clusters, iv.n_pairs, iv.confidence) == (40, 480, 0.95)
    assert table["mae"].estimate == pytest.approx(np.mean(np.abs(pairs["judge"] - pairs["rater"])))


def test_wider_confidence_gives_wider_interval():
    pairs = synthetic_pairs()
    narrow = cluster_bootstrap(pairs, mae, n_boot=800, seed=1, confidence=0.5)
    wide = cluster_bootstrap(pairs, mae, n_boot=800, seed=1, confidence=0.99)
    assert wide.low < narrow.low < narrow.high < wide.high


def test_agreement_table_equals_per_statistic_bootstrap_with_same_seed():
    """The vectorised replicates are the library statistics on the same resampled cases."""
    pairs = synthetic_pairs(n_cases=25, pairs_per_case=6, seed=4)
    table = agreement_table(pairs, LABELS, n_boot=150, seed=9)
    functions = {
        "mae": mae,
        "signed_error": signed_error,
        "class_balanced_mae": partial(class_balanced_mae, labels=LABELS),
        "qwk": partial(qwk, labels=LABELS),
        "krippendorff_alpha": partial(krippendorff_alpha_ordinal, labels=LABELS),
        "spearman": spearman,
    }
    for name, f in functions.items():
        single = cluster_bootstrap(pairs, f, n_boot=150, seed=9)
        got = table[name]
        assert got.estimate == pytest.approx(single.estimate, abs=1e-12), name
        assert got.low == pytest.approx(single.low, abs=1e-9), name
        assert got.high == pytest.approx(single.high, abs=1e-9), name
        assert got.n_valid == single.n_valid, name


@pytest.mark.parametrize("seed", range(12))
def test_constant_agreement_table_equals_the_per_statistic_bootstrap_of_a_constant(seed):
    """The count-based replicates of a constant predictor are the library statistics on the
    same resampled cases, for constants on and between the categories, cases of one pair or
    many, and scales whose categories are not all used."""
    rng = np.random.default_rng(seed)
    labels = [0, 1, 2, 3, 4][: int(rng.integers(2, 6))]
    n_cases = int(rng.integers(1, 9))
    sizes = rng.integers(1, 5, size=n_cases)
    used = rng.choice(labels, size=int(rng.integers(1, len(labels) + 1)), replace=False)
    rater = rng.choice(used, size=int(sizes.sum())).astype(float)
    value = float(rng.choice([labels[0], labels[-1], (labels[0] + labels[-1]) / 2, labels[0] + 0.5]))
    pairs = pd.DataFrame({"case_id": np.repeat([f"c{i}" for i in range(n_cases)], sizes), "judge": value,
                          "rater": rater})
    n_boot = int(rng.integers(1, 120))
    table = constant_agreement_table(value, pairs, labels, n_boot=n_boot, seed=seed)
    functions = {"mae": mae, "signed_error": signed_error,
                 "class_balanced_mae": partial(class_balanced_mae, labels=labels)}
    assert list(table) == list(functions)
    for name, f in functions.items():
        single = cluster_bootstrap(pairs, f, n_boot=n_boot, seed=seed)
        got = table[name]
        assert got.estimate == pytest.approx(single.estimate, abs=1e-12), name
        assert got.low == pytest.approx(single.low, abs=1e-12, nan_ok=True), name
        assert got.high == pytest.approx(single.high, abs=1e-12, nan_ok=True), name
        assert (got.n_boot, got.n_valid, got.n_clusters, got.n_pairs) == (
            single.n_boot, single.n_valid, single.n_clusters, single.n_pairs), name


def test_constant_agreement_table_refuses_a_constant_outside_the_scale():
    pairs = pd.DataFrame({"case_id": ["a", "b"], "judge": 0.0, "rater": [0.0, 1.0]})
    with pytest.raises(DataError, match="outside the scale"):
        constant_agreement_table(4.0, pairs, [0, 1, 2], n_boot=10)


def test_resampling_is_by_case_not_by_pair():
    """Errors shared within a case: the case bootstrap sees 30 units, a pair bootstrap 1,200."""
    rng = np.random.default_rng(2)
    rows = []
    for c in range(30):
        err = int(rng.integers(0, 3))  # every pair of a case has the same error
        for p in range(40):
            rows.append({"case_id": c, "pair_id": f"{c}-{p}", "judge": err, "rater": 0})
    pairs = pd.DataFrame(rows)
    by_case = cluster_bootstrap(pairs, mae, n_boot=1000, seed=0)
    by_pair = cluster_bootstrap(pairs, mae, n_boot=1000, seed=0, cluster="pair_id")
    assert by_case.estimate == by_pair.estimate
    assert (by_case.n_clusters, by_pair.n_clusters) == (30, 1200)
    width_case, width_pair = by_case.high - by_case.low, by_pair.high - by_pair.low
    # Expected ratio ~ sqrt(40) = 6.3; assert a safe margin.
    assert width_case > 3 * width_pair
    # The same holds inside agreement_table.
    t_case = agreement_table(pairs, LABELS, n_boot=1000, seed=0)["mae"]
    t_pair = agreement_table(pairs, LABELS, n_boot=1000, seed=0, cluster="pair_id")["mae"]
    assert (t_case.high - t_case.low) > 3 * (t_pair.high - t_pair.low)


def test_a_case_drawn_twice_contributes_all_its_pairs_twice():
    # Case "a" has 3 pairs, case "b" 1 pair. Record the resample sizes seen by the statistic.
    pairs = pd.DataFrame({"case_id": ["a", "a", "a", "b"], "judge": [1, 1, 1, 0], "rater": [0, 0, 0, 0]})
    sizes, values = [], []

    def spy(judge, rater):
        sizes.append(judge.size)
        values.append(float(np.mean(judge - rater)))
        return values[-1]

    cluster_bootstrap(pairs, spy, n_boot=200, seed=0)
    sizes, values = sizes[1:], values[1:]  # first call is the estimate
    # {a,a} -> 6 pairs, mean 1; {a,b} -> 4 pairs, mean 3/4; {b,b} -> 2 pairs, mean 0.
    assert set(zip(sizes, values)) == {(6, 1.0), (4, 0.75), (2, 0.0)}


def test_nan_replicates_are_skipped_and_counted():
    # Two cases where everything is 2 (kappa undefined on their own) and one informative case.
    pairs = pd.DataFrame({
        "case_id": ["a"] * 4 + ["b"] * 4 + ["c"] * 4,
        "judge": [2] * 8 + [0, 1, 2, 3],
        "rater": [2] * 8 + [0, 2, 1, 3],
    })
    n_boot = 1000
    iv = cluster_bootstrap(pairs, partial(krippendorff_alpha_ordinal, labels=LABELS), n_boot=n_boot, seed=0)
    # A replicate is undefined exactly when case "c" is never drawn: probability (2/3)^3 = 8/27.
    assert iv.n_nan == n_boot - iv.n_valid
    assert iv.n_nan / n_boot == pytest.approx(8 / 27, abs=0.05)  # binomial SD ~0.015
    assert math.isfinite(iv.low) and math.isfinite(iv.high)
    table = agreement_table(pairs, LABELS, n_boot=n_boot, seed=0)
    assert table["qwk"].n_valid == iv.n_valid  # same draws, same degenerate replicates
    assert table["krippendorff_alpha"].n_valid == iv.n_valid
    assert table["mae"].n_valid == n_boot


def test_all_replicates_undefined():
    pairs = pd.DataFrame({"case_id": ["a", "b"], "judge": [1, 1], "rater": [1, 1]})
    iv = agreement_table(pairs, LABELS, n_boot=50)["spearman"]
    assert math.isnan(iv.estimate) and math.isnan(iv.low) and math.isnan(iv.high)
    assert (iv.n_valid, iv.n_nan) == (0, 50)


def test_empty_pairs_give_nan_not_errors():
    empty = pd.DataFrame({"case_id": [], "judge": [], "rater": []})
    for iv in agreement_table(empty, LABELS, n_boot=20).values():
        assert math.isnan(iv.estimate) and math.isnan(iv.low) and math.isnan(iv.high)
        assert (iv.n_valid, iv.n_clusters, iv.n_pairs) == (0, 0, 0)
    assert math.isnan(cluster_bootstrap(empty, mae, n_boot=20).estimate)


def test_interval_is_frozen():
    iv = cluster_bootstrap(synthetic_pairs(n_cases=5), mae, n_boot=20)
    assert isinstance(iv, Interval)
    with pytest.raises(pydantic.ValidationError):
        iv.low = 0.0


class TestBadInput:
    def test_missing_column(self):
        with pytest.raises(DataError, match="case_id"):
            agreement_table(pd.DataFrame({"judge": [1], "rater": [1]}), LABELS)

    def test_missing_cluster_id(self):
        with pytest.raises(DataError, match="missing"):
            cluster_bootstrap(pd.DataFrame({"case_id": ["a", None], "judge": [1, 1], "rater": [1, 1]}), mae)

    def test_missing_score(self):
        with pytest.raises(DataError, match="model_failure"):
            agreement_table(pd.DataFrame({"case_id": ["a", "b"], "judge": [1, None], "rater": [1, 1]}), LABELS)

    def test_out_of_scale(self):
        with pytest.raises(DataError, match="outside the scale"):
            agreement_table(pd.DataFrame({"case_id": ["a"], "judge": [4], "rater": [1]}), LABELS)

    @pytest.mark.parametrize("kwargs", [{"n_boot": 0}, {"n_boot": 2.5}, {"confidence": 1.0}, {"confidence": 0}])
    def test_bad_settings(self, kwargs):
        pairs = synthetic_pairs(n_cases=3)
        with pytest.raises(ValueError):
            agreement_table(pairs, LABELS, **kwargs)
        with pytest.raises(ValueError):
            cluster_bootstrap(pairs, mae, **kwargs)

    def test_not_a_frame(self):
        with pytest.raises(TypeError, match="DataFrame"):
            cluster_bootstrap({"case_id": [1]}, mae)
