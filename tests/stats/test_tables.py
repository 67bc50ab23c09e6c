"""The vectorised count-table formulas used for bootstrap replicates agree with the libraries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evolve.stats import (
    STATISTICS,
    class_balanced_mae,
    krippendorff_alpha_ordinal,
    mae,
    qwk,
    signed_error,
    spearman,
)
from evolve.stats._tables import cluster_tables, table_statistics


def _library_values(judge, rater, labels):
    return {
        "mae": mae(judge, rater),
        "signed_error": signed_error(judge, rater),
        "class_balanced_mae": class_balanced_mae(judge, rater, labels),
        "qwk": qwk(judge, rater, labels),
        "krippendorff_alpha": krippendorff_alpha_ordinal(judge, rater, labels),
        "spearman": spearman(judge, rater),
    }


def _table(judge, rater, labels):
    k = len(labels)
    t = np.zeros((k, k))
    np.add.at(t, (np.searchsorted(labels, judge), np.searchsorted(labels, rater)), 1)
    return t


def test_random_and_degenerate_tables_match_libraries():
    rng = np.random.default_rng(7)
    scale = np.array([0.0, 1.0, 2.0, 3.0])
    tables, expected, shapes = [], [], []
    for _ in range(400):
        n = int(rng.integers(0, 40))
        k = int(rng.integers(1, 5))
        labels = scale[:k]
        p = rng.dirichlet(np.full(k, 0.4))  # often concentrated: many degenerate draws
        judge = rng.choice(labels, size=n, p=p)
        rater = rng.choice(labels, size=n, p=p)
        if rng.random() < 0.15:
            judge = np.full(n, labels[-1])
        got = {name: float(v[0]) for name, v in table_statistics(_table(judge, rater, labels)[None], labels).items()}
        want = _library_values(judge, rater, labels)
        for name in STATISTICS:
            if math.isnan(want[name]):
                assert math.isnan(got[name]), (name, judge, rater)
            else:
                assert got[name] == pytest.approx(want[name], abs=1e-12), (name, judge, rater)
        tables.append(got)
        expected.append(want)
        shapes.append(k)
    assert sum(math.isnan(w["qwk"]) for w in expected) > 20  # the degenerate path was exercised


def test_stack_of_tables_is_computed_row_by_row():
    labels = np.array([0.0, 1.0, 2.0, 3.0])
    rng = np.random.default_rng(3)
    stack = rng.integers(0, 5, size=(6, 4, 4)).astype(float)
    together = table_statistics(stack, labels)
    for b in range(6):
        alone = table_statistics(stack[b : b + 1], labels)
        for name in STATISTICS:
            np.testing.assert_allclose(together[name][b], alone[name][0], rtol=0, atol=1e-15)


def test_cluster_tables_count_pairs_per_cluster():
    tables = cluster_tables(
        judge_codes=np.array([0, 1, 1, 2]),
        rater_codes=np.array([0, 1, 2, 2]),
        cluster_codes=np.array([0, 0, 1, 1]),
        n_clusters=2,
        n_labels=3,
    )
    assert tables.shape == (2, 9)
    assert tables[0].reshape(3, 3).tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 0]]
    assert tables[1].reshape(3, 3).tolist() == [[0, 0, 0], [0, 0, 1], [0, 0, 1]]
