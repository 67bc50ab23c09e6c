"""Agreement statistics against independent computations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import mean_absolute_error

from evolve.stats import agreement, constant_agreement, item_errors, median_baseline, rater_ceiling

RATINGS = pd.DataFrame(
    [
        ("c", "t1", "a", "k", 2), ("c", "t1", "b", "k", 1),
        ("c", "t2", "a", "k", 0), ("c", "t2", "b", "k", 0),
        ("d", "t3", "a", "k", 3), ("d", "t3", "b", "k", None),  # b: not evaluable
    ],
    columns=["case_id", "target_id", "rater_id", "criterion", "score"],
)
SCORES = pd.DataFrame(
    [
        ("t1", 0, "score", 2), ("t2", 0, "score", 1), ("t3", 0, "model_failure", None),
        ("t1", 1, "score", 1), ("t2", 1, "score", 1), ("t3", 1, "score", 3),
    ],
    columns=["target_id", "repeat", "outcome", "score"],
).assign(criterion="k")


def test_mae_pools_every_individual_rating_and_repeat():
    pairs_true, pairs_pred = [], []
    ratings = {("t1"): [2, 1], ("t2"): [0, 0], ("t3"): [3]}
    for _, row in SCORES[SCORES["outcome"] == "score"].iterrows():
        for r in ratings[row["target_id"]]:
            pairs_true.append(r)
            pairs_pred.append(row["score"])
    ag = agreement(SCORES, RATINGS)
    assert ag.mae == pytest.approx(mean_absolute_error(pairs_true, pairs_pred))
    assert ag.n_pairs == len(pairs_true) == 9
    assert ag.coverage == pytest.approx(5 / 6)
    assert ag.signed_error == pytest.approx(np.mean(np.array(pairs_pred) - np.array(pairs_true)))
    rep0 = mean_absolute_error([2, 1, 0, 0], [2, 2, 1, 1])
    rep1 = mean_absolute_error([2, 1, 0, 0, 3], [1, 1, 1, 1, 3])
    assert ag.per_repeat_mae == pytest.approx({0: rep0, 1: rep1})
    assert ag.repeat_sd == pytest.approx(np.std([rep0, rep1], ddof=1))


def test_training_median_and_constant_predictor():
    med = median_baseline(RATINGS)
    assert med == 1.0  # median of 2, 1, 0, 0, 3
    ag = constant_agreement(med, RATINGS)
    assert ag.mae == pytest.approx(mean_absolute_error([2, 1, 0, 0, 3], [1] * 5))


def test_rater_ceiling_uses_pairs_on_shared_targets():
    mae, n = rater_ceiling(RATINGS)
    assert (mae, n) == (pytest.approx(0.5), 2)  # |2-1| on t1, |0-0| on t2; t3 has one numeric rating
    assert rater_ceiling(RATINGS[RATINGS["rater_id"] == "a"]) == (None, 0)


def test_item_errors_put_failed_items_first():
    one = SCORES[SCORES["repeat"] == 0]
    errs = item_errors(one, RATINGS)
    assert errs["target_id"].tolist() == ["t3", "t2", "t1"]
    assert errs.loc[errs["target_id"] == "t2", "abs_error"].item() == 1.0


def test_the_judge_as_one_more_rater_compares_on_the_ceilings_targets():
    """Issue 13 item 5: the judge's MAE beside the physicians' own disagreement, same targets."""
    from evolve.stats import judge_as_rater

    ratings = pd.DataFrame({
        "case_id": ["a", "a", "b", "c"], "target_id": ["t1", "t1", "t2", "t3"], "rater_id": ["r1", "r2", "r1", "r2"],
        "criterion": ["c"] * 4, "score": [2.0, 1.0, 3.0, 0.0], "not_evaluable": [False] * 4, "comment": [""] * 4,
    })
    scores = pd.DataFrame({"criterion": ["c"] * 4, "target_id": ["t1", "t1", "t2", "t3"], "case_id": ["a", "a", "b", "c"],
                           "repeat": [0, 1, 0, 0], "outcome": ["score"] * 4, "score": [2.0, 1.0, 0.0, 0.0]})
    table = judge_as_rater(scores, ratings).set_index("rater_id")
    # only t1 has two physicians: t2 and t3 (one rater each) are left out on both sides
    assert table.loc["r1"].to_dict() == {"n_targets": 1, "judge_mae": 0.5, "judge_pairs": 2, "peers_mae": 1.0, "peer_pairs": 1}
    assert table.loc["r2"].to_dict() == {"n_targets": 1, "judge_mae": 0.5, "judge_pairs": 2, "peers_mae": 1.0, "peer_pairs": 1}
    assert judge_as_rater(scores, ratings[ratings["target_id"] != "t1"]).empty
