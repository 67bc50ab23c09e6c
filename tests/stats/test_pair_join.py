"""The dict joins of ``evolve.stats`` give what the pandas merge and groupby they replaced gave:
the same rows, in the same order, with the same dtypes and numbers (the oracles below are that
pandas code, kept here as the reference)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from evolve.stats import agreement, item_errors, judge_pairs, numeric_ratings, paired_difference, paired_mae_difference


def merged_pairs(scores: pd.DataFrame, ratings: pd.DataFrame) -> pd.DataFrame:
    keep = ["criterion", "target_id", "repeat", "score"] + (["case_id"] if "case_id" in scores.columns else [])
    s = scores[scores["outcome"] == "score"][keep].rename(columns={"score": "judge"})
    s["judge"] = s["judge"].astype(float)
    r = numeric_ratings(ratings)[["criterion", "target_id", "rater_id", "score"]].rename(columns={"score": "rater"})
    pairs = s.merge(r, on=["criterion", "target_id"], how="inner")
    pairs["error"] = pairs["judge"] - pairs["rater"]
    return pairs


def grouped_item_errors(scores: pd.DataFrame, ratings: pd.DataFrame) -> pd.DataFrame:
    outcome = scores["outcome"]
    flags = pd.DataFrame({"target_id": scores["target_id"], "failures": (outcome == "model_failure").astype(int),
                          "declined": (outcome == "not_evaluable").astype(int)})
    calls = flags.groupby("target_id").agg(failures=("failures", "sum"), declined=("declined", "sum"),
                                           calls=("failures", "size"))
    pairs = merged_pairs(scores, ratings)
    pairs["abs_error"] = pairs["error"].abs()
    per = pairs.groupby("target_id").agg(judge_mean=("judge", "mean"), rater_mean=("rater", "mean"),
                                         abs_error=("abs_error", "mean"))
    out = calls.join(per, how="left").reset_index()
    out["abs_error"] = out["abs_error"].fillna(math.inf)
    return out.sort_values(["abs_error", "target_id"], ascending=[False, True]).reset_index(drop=True)


def _frames(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    targets = [f"t{int(x)}" for x in rng.integers(0, 12, n)]
    outcome = rng.choice(["score", "score", "score", "model_failure", "not_evaluable"], n)
    scores = pd.DataFrame({"criterion": rng.choice(["a", "b"], n), "target_id": targets,
                           "case_id": [f"c{int(t[1:]) // 2}" for t in targets], "repeat": rng.integers(0, 3, n),
                           "outcome": outcome,
                           "score": [str(int(rng.integers(0, 4))) if o == "score" else "" for o in outcome]})
    if seed % 3 == 0:
        scores = scores.drop(columns="case_id")
    m = int(rng.integers(0, 50))
    ratings = pd.DataFrame({"criterion": rng.choice(["a", "b"], m), "target_id": [f"t{int(x)}" for x in rng.integers(0, 12, m)],
                            "rater_id": rng.choice(["r1", "r2", "r3"], m), "score": rng.choice(["0", "1", "2", "3", "", "x"], m)})
    return scores, ratings


@pytest.mark.parametrize("seed", range(40))
def test_judge_pairs_and_item_errors_match_the_pandas_merge(seed):
    scores, ratings = _frames(seed)
    pd.testing.assert_frame_equal(judge_pairs(scores, ratings), merged_pairs(scores, ratings))
    ours, reference = item_errors(scores, ratings), grouped_item_errors(scores, ratings)
    pd.testing.assert_frame_equal(ours, reference[ours.columns], check_dtype=False, check_index_type=False)


@pytest.mark.parametrize("seed", range(40))
def test_agreement_matches_the_pairs_it_summarises(seed):
    scores, ratings = _frames(seed)
    pairs, got = merged_pairs(scores, ratings), agreement(scores, ratings)
    assert got.n_pairs == len(pairs) and got.n_calls == len(scores)
    assert got.mae == (pytest.approx(pairs["error"].abs().mean()) if len(pairs) else None)
    assert got.signed_error == (pytest.approx(pairs["error"].mean()) if len(pairs) else None)
    per_repeat = {int(r): float(g["error"].abs().mean()) for r, g in pairs.groupby("repeat")}
    assert got.per_repeat_mae == pytest.approx(per_repeat)


@pytest.mark.parametrize("seed", range(20))
def test_paired_mae_difference_matches_the_merged_pairs(seed):
    a, ratings = _frames(seed)
    if "case_id" not in a.columns:
        a["case_id"] = "c0"
    b = a.sample(frac=1.0, random_state=seed).copy()
    b["score"] = [str((int(x) + seed) % 4) if x else "" for x in b["score"]]
    key = ["criterion", "target_id", "repeat", "rater_id"]
    joined = merged_pairs(a, ratings).merge(merged_pairs(b, ratings)[key + ["error"]], on=key, suffixes=("_a", "_b"))
    reference = paired_difference((joined["error_a"].abs() - joined["error_b"].abs()).to_numpy(dtype=np.float64),
                                  joined["case_id"].astype(str).to_numpy(), seed=1)
    got = paired_mae_difference(a, b, ratings, seed=1)
    assert got.model_dump() == pytest.approx(reference.model_dump(), nan_ok=True)
