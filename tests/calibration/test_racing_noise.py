"""Racing that follows the judge's noise, the accepted budget's shortfall and calls made vs cache
hits in the report (issue 25 item 4), on the fake provider."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from evolve.calibration._racing import Race, judge_noise_sd, prune_decision
from evolve.cli import app
from evolve.config import RacingSettings
from evolve.llm import ChatRequest
from tests.calibration.test_racing_selection import Scripted, _config, _run, _tables

runner = CliRunner()


def test_prune_decision_keeps_a_mutant_worse_only_by_the_margin():
    worse_by_a_little = [0.1, 0.2, 0.1, 0.0, 0.2, 0.1, 0.1, 0.2]  # mean 0.125
    prune, p = prune_decision(worse_by_a_little, p_threshold=0.5, margin=0.0)
    assert prune and p < 0.01
    kept, p_margin = prune_decision(worse_by_a_little, p_threshold=0.5, margin=0.2)
    assert not kept and p_margin == 1.0  # the mean is not above the margin: no test at all
    prune_big, _ = prune_decision([1.0, 0.8, 1.2, 0.9, 1.0, 1.1, 0.7, 1.0], p_threshold=0.5, margin=0.2)
    assert prune_big
    assert prune_decision([-0.5, 0.5], p_threshold=0.5, margin=0.0) == (False, 1.0)  # mean 0
    assert prune_decision([0.3], p_threshold=0.5, margin=0.0) == (False, 1.0)  # one target: no test


def _scipy_prune(differences, *, p_threshold, margin):
    """The pruning rule computed by scipy alone (the oracle of :func:`prune_decision`)."""
    d = np.asarray(differences, dtype=float) - margin
    if len(d) < 2 or d.mean() <= 0 or np.all(d == 0):
        return False, 1.0
    p = float(stats.wilcoxon(d, alternative="greater", zero_method="zsplit").pvalue)
    return p < p_threshold, p


def test_prune_decision_gives_scipys_wilcoxon_p_value_exactly():
    """The sign-flip enumeration that stands in for scipy's permutation test on tied or zero
    differences (n <= 13) gives scipy's p-value to the last bit, on racing-like differences
    (errors in quarter points, ties and zeros everywhere) and with margins. scipy's own test
    takes up to 2 s a call near n = 13, so the cases stay small (a one-off run of 400 random
    cases up to n = 13 found no difference)."""
    rng = np.random.default_rng(7)
    cases = [[0.25, 0.25, 0.0, 0.5, -0.25, 0.25, 0.0, 0.75], [0.5] * 9, [0.5] * 8 + [0.0], [1.0, 0.0],
             [0.1, 0.2, 0.3, 0.4], [0.5] * 14 + [0.25, 0.0]]
    # all tied, one zero among ties, n = 2, no ties (scipy's exact test), n > 13 (scipy's normal approximation)
    cases += [rng.choice(np.arange(-4, 9) / 4, size=int(rng.integers(2, 9))).tolist() for _ in range(16)]
    for differences in cases:
        for margin in (0.0, 0.125):
            expected = _scipy_prune(differences, p_threshold=0.05, margin=margin)
            assert prune_decision(differences, p_threshold=0.05, margin=margin) == expected, (differences, margin)


def test_judge_noise_sd_is_the_sd_of_the_seed_to_seed_differences():
    first = {("a", "t1"): 0.0, ("a", "t2"): 1.0, ("b", "t1"): 1.0, ("b", "t3"): 2.0}
    second = {("a", "t1"): 1.0, ("a", "t2"): 1.0, ("b", "t1"): 0.0, ("c", "t9"): 0.0}
    # common keys a/t1, a/t2, b/t1: differences -1, 0, 1 -> sample SD 1
    assert judge_noise_sd(first, second) == pytest.approx(1.0)
    assert judge_noise_sd({("a", "t1"): 0.0}, {("a", "t1"): 1.0}) is None
    assert judge_noise_sd({("a", "t1"): 0.0, ("a", "t2"): float("inf")},
                          {("a", "t1"): 1.0, ("a", "t2"): 0.0}) is None  # a failed target says nothing


def test_race_margin_follows_the_measured_noise():
    race = Race(16, RacingSettings(margin_sd=1.0), seed=0)
    race.add_incumbent({i: 0.5 for i in range(16)})
    first = race.batches()[0]
    assert race.margin(4) == 0.0  # nothing measured yet: the plain paired test
    plain = race.start()
    assert race.report(plain, {int(i): 0.5 + (0.1 if k % 2 else 0.2) for k, i in enumerate(first)})
    race.set_noise(0.6)  # margin after 4 targets: 1.0 x 0.6 / 2 = 0.3
    assert race.margin(4) == pytest.approx(0.3) and race.margin(16) == pytest.approx(0.15)
    noisy = race.start()
    assert not race.report(noisy, {int(i): 0.5 + (0.1 if k % 2 else 0.2) for k, i in enumerate(first)})
    clearly = race.start()
    assert race.report(clearly, {int(i): 1.5 for i in first})
    off = Race(16, RacingSettings(margin_sd=0.0), seed=0)
    off.set_noise(0.6)
    assert off.margin(4) == 0.0


def test_the_noise_is_measured_on_calls_the_run_makes_anyway(tmp_path, pack_and_splits):
    result, provider = _run(_config(tmp_path, pack_and_splits))
    _, scores = _tables(result.run_dir)
    noise = scores[scores["phase"] == "noise"]
    assert len(noise) and set(noise["cached"]) == {"False"}
    # the finalists' and the re-evaluation's calls of the initial prompts on training with that
    # seed come back from the response cache: the measurement costs no call
    later = scores[scores["phase"].isin(["finalist", "reeval"]) & scores["seed"].isin(set(noise["seed"]))
                   & scores["candidate_id"].isin(set(noise["candidate_id"])) & (scores["split"] == "train")]
    assert len(later) >= len(noise) and (later["cached"] == "True").all()
    events = [json.loads(line) for line in (result.run_dir / "journal.jsonl").read_text().splitlines()]
    measured = [e for e in events if e["event"] == "racing_noise"]
    assert len(measured) == 1 and measured[0]["noise_sd"] >= 0 and measured[0]["pairs"] == len(noise)
    # calls made and cache hits add up to the judge answers the criterion used
    row = result.report.table5[0]
    judged = len([r for r in provider.requests if r.tag == "judge"])
    assert row.judge_calls == judged == int((scores["cached"] == "False").sum())
    assert row.judge_cache_hits == int((scores["cached"] == "True").sum()) > 0
    md = (result.run_dir / "report.md").read_text()
    assert "| judge calls | cache hits |" in md
    # the re-evaluation rows: the initial prompts' training calls with the finalists' seed are cache hits
    initial = next(r for r in result.report.criteria["entailment"].rows if r.kind == "initial")
    assert 0 < initial.cached_calls < initial.calls
    assert f"| {initial.calls - initial.cached_calls} + {initial.cached_calls} from cache |" in md


def test_racing_without_a_margin_measures_nothing(tmp_path, pack_and_splits):
    result, _ = _run(_config(tmp_path, pack_and_splits, racing={"margin_sd": 0.0}))
    _, scores = _tables(result.run_dir)
    assert "noise" not in set(scores["phase"])


class Repetitive(Scripted):
    """After the first mutant, every proposal repeats it: duplicates, rejected."""

    def __call__(self, request: ChatRequest) -> str:
        if request.tag == "mutation":
            return json.dumps({"analysis": "scripted", "guidance": "calibrated rule one"})
        return super().__call__(request)


def test_an_accepted_budget_not_met_is_a_warning_in_the_report_and_on_the_cli(tmp_path, pack_and_splits):
    config = _config(tmp_path, pack_and_splits, budget={"accepted": 3, "max_attempts": 4})
    result, _ = _run(config, Repetitive())
    cands, _ = _tables(result.run_dir)
    accepted = int((cands.loc[cands["origin"] == "mutation", "status"] == "accepted").sum())
    assert accepted == 1
    row = result.report.table5[0]
    assert row.accepted == 1 and row.accepted_asked == 3
    expected = "1 accepted mutant of the 3 asked - all 4 mutation attempts were spent (3 duplicate)"
    assert any(expected in w for w in result.report.warnings)
    stored = json.loads((result.run_dir / "report.json").read_text())
    assert any(expected in w for w in stored["warnings"])
    md = (result.run_dir / "report.md").read_text()
    assert expected in md and "| 1 of 3 asked |" in md
    table5 = pd.read_csv(result.run_dir / "table5.csv")
    assert int(table5.loc[0, "accepted_asked"]) == 3
    shown = runner.invoke(app, ["report", str(result.run_dir), "--n-boot", "50"])
    assert shown.exit_code == 0 and "warning: criterion" in shown.output and expected in shown.output


def test_a_met_budget_draws_no_shortfall_warning(tmp_path, pack_and_splits):
    result, _ = _run(_config(tmp_path, pack_and_splits, racing={"enabled": False}))
    assert result.report.table5[0].accepted == 3
    assert not [w for w in result.report.warnings if "asked" in w]


def test_finalists_clearly_worse_on_the_first_share_are_judged_no_further(tmp_path, pack_and_splits):
    config = _config(tmp_path, pack_and_splits, racing={"enabled": False}, selection={"finalists": 3})
    result, _ = _run(config)
    cands, scores = _tables(result.run_dir)
    fin = scores[scores["phase"] == "finalist"]
    n_train = scores.loc[scores["phase"] == "evolution", "target_id"].nunique()
    share = -(-n_train // 2)  # selection.first_share 0.5, rounded up
    mutants = cands[(cands["origin"] == "mutation") & (cands["finalist"] == "True")]
    assert set(mutants["text"].str.split().str[0]) == {"contrary", "calibrated"}
    for _, c in mutants.iterrows():
        judged = fin.loc[fin["candidate_id"] == c["candidate_id"], "target_id"].nunique()
        if c["text"].startswith("contrary"):  # worse than the leader on every target of the first share
            assert judged == share < n_train and c["note"].startswith(f"out of the final after {share} of {n_train}")
            assert c["finalist_mae"] == "" and c["selected"] == "False"
        else:
            assert judged == n_train and "out of the final" not in c["note"]
    for cid in cands.loc[cands["origin"] == "initial", "candidate_id"]:  # the initial prompts: every target
        assert fin.loc[fin["candidate_id"] == cid, "target_id"].nunique() == n_train
    assert cands.loc[cands["selected"] == "True", "text"].iloc[0].startswith("calibrated")


def test_finalists_all_judged_in_full_when_adaptive_is_off(tmp_path, pack_and_splits):
    config = _config(tmp_path, pack_and_splits, racing={"enabled": False},
                     selection={"finalists": 3, "adaptive": False})
    result, _ = _run(config)
    cands, scores = _tables(result.run_dir)
    fin = scores[scores["phase"] == "finalist"]
    n_train = scores.loc[scores["phase"] == "evolution", "target_id"].nunique()
    assert (fin.groupby("candidate_id")["target_id"].nunique() == n_train).all()
    assert set(fin["candidate_id"]) == set(cands.loc[cands["finalist"] == "True", "candidate_id"])
