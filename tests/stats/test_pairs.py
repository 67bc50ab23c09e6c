"""Physician-vs-physician pairs for the ceiling."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from evolve.errors import DataError
from evolve.stats import agreement_table, rater_ceiling, rater_pairs

LABELS = [0, 1, 2, 3]


def ratings_frame():
    return pd.DataFrame([
        # t1: three raters -> three unordered pairs
        ("c1", "t1", "r2", "entailment", 2),
        ("c1", "t1", "r1", "entailment", 1),
        ("c1", "t1", "r3", "entailment", 3),
        # t2: one numeric rating and one not-evaluable -> no pair
        ("c1", "t2", "r1", "entailment", 0),
        ("c1", "t2", "r2", "entailment", ""),
        # t3 in another case: two raters
        ("c2", "t3", "r1", "entailment", 0),
        ("c2", "t3", "r3", "entailment", 0),
        # same target, other criterion: never paired with the entailment ratings
        ("c2", "t3", "r2", "other", 3),
    ], columns=["case_id", "target_id", "rater_id", "criterion", "score"])


def test_unordered_pairs_of_different_raters_per_target_and_criterion():
    pairs = rater_pairs(ratings_frame())
    assert list(pairs.columns) == ["case_id", "target_id", "criterion", "first_rater_id", "rater_id", "judge", "rater"]
    shown = pairs[["target_id", "first_rater_id", "rater_id", "judge", "rater"]]
    got = [tuple(row) for row in shown.itertuples(index=False)]
    assert got == [
        ("t1", "r1", "r2", 1, 2),
        ("t1", "r1", "r3", 1, 3),
        ("t1", "r2", "r3", 2, 3),
        ("t3", "r1", "r3", 0, 0),
    ]
    assert pairs["judge"].dtype == "int64"


def test_ceiling_mae_matches_existing_rater_ceiling():
    ratings = ratings_frame()
    table = agreement_table(rater_pairs(ratings), LABELS, n_boot=100)
    ceiling, n = rater_ceiling(ratings)
    assert table["mae"].n_pairs == n == 4
    assert table["mae"].estimate == pytest.approx(ceiling)  # (1 + 2 + 1 + 0) / 4
    assert table["mae"].n_clusters == 2


def test_without_criterion_column():
    ratings = ratings_frame().drop(columns="criterion")
    pairs = rater_pairs(ratings)
    assert "criterion" not in pairs.columns
    # Without criteria, the "other" rating of t3 by r2 joins the t3 pairs.
    assert len(pairs) == 3 + 3


def test_no_target_with_two_raters_gives_empty_frame():
    ratings = pd.DataFrame(
        {"case_id": ["c1", "c1"], "target_id": ["t1", "t2"], "rater_id": ["r1", "r1"], "score": [1, 2]}
    )
    pairs = rater_pairs(ratings)
    assert pairs.empty
    assert {"case_id", "target_id", "first_rater_id", "rater_id", "judge", "rater"} <= set(pairs.columns)
    table = agreement_table(pairs, LABELS, n_boot=10)
    assert all(math.isnan(iv.estimate) for iv in table.values())


def test_same_rater_twice_is_not_a_pair():
    ratings = pd.DataFrame({"case_id": ["c1"] * 2, "target_id": ["t1"] * 2, "rater_id": ["r1"] * 2, "score": [1, 2]})
    assert rater_pairs(ratings).empty


def test_missing_column():
    with pytest.raises(DataError, match="rater_id"):
        rater_pairs(pd.DataFrame({"case_id": [], "target_id": [], "score": []}))
