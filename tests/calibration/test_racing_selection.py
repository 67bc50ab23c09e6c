"""Racing, selection rules, paired verdicts and budgets (issue 11), on scripted endpoints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.calibration import budget_warnings
from evolve.cli import app
from evolve.config import BudgetSettings, load_run_config, resolve_config
from evolve.errors import NoWinnerError, TransientEndpointError
from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.testing import FakeProvider, LoopbackChatServer
from evolve.workflows import run_calibration
from tests.conftest import request_of

runner = CliRunner()


def _config(tmp_path: Path, pack_and_splits: tuple[Path, Path], **sections):
    pack, splits = pack_and_splits
    overrides = {"run_id": "r", "pack": pack, "splits": splits, "archives_dir": tmp_path / "archives", "audit": False,
                 "cache_path": tmp_path / "cache.sqlite", "endpoint": {"provider": "fake"}, **sections}
    overrides["budget"] = {"accepted": 3, "max_attempts": 6, "batch_size": 2, "train_repeats": 1,
                           "max_train_targets": 100, "max_validation_targets": 100, **sections.get("budget", {})}
    return resolve_config(preset="quick", overrides=overrides, environ={})


def _truth(request: ChatRequest) -> int:
    return int(re.search(r"truth (\d)", request.messages[-1].content).group(1))  # type: ignore[union-attr]


def _guidance(request: ChatRequest) -> str:
    user = request.messages[-1].content
    return user.split("GUIDANCE FOR THIS CRITERION:", 1)[1] if "GUIDANCE FOR THIS CRITERION:" in user else ""


class Scripted:
    """Mutation proposals alternate between 'contrary rule N' (the score farthest from the
    truth: clearly worse than any initial prompt) and 'calibrated rule N' (the truth: better);
    initial prompts are right except on truth 0, where they say 1."""

    def __init__(self) -> None:
        self.proposals = 0

    def __call__(self, request: ChatRequest) -> str:
        if request.tag == "mutation":
            self.proposals += 1
            kind = "contrary" if self.proposals % 2 else "calibrated"
            return json.dumps({"analysis": "scripted", "guidance": f"{kind} rule {request.seed}"})
        truth, guidance = _truth(request), _guidance(request)
        if "calibrated" in guidance:
            score = truth
        elif "contrary" in guidance:
            score = 0 if truth >= 1 else 2
        else:
            score = max(truth, 1)
        return json.dumps({"rationale": "scripted", "score": str(score)})


def _run(config, respond=None):
    provider = FakeProvider(respond or Scripted())
    with Client(provider, cache=ResponseCache(config.cache_path), max_concurrency=1, max_retries=0) as client:
        result = run_calibration(config, client=client)
    return result, provider


def _tables(run: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    cands = pd.read_csv(run / "candidates.csv", keep_default_na=False, dtype=str)
    scores = pd.read_csv(run / "scores.csv", keep_default_na=False, dtype=str)
    return cands, scores


def test_paper_protocol_judges_every_accepted_mutant_on_every_training_target(tmp_path, pack_and_splits):
    config = _config(tmp_path, pack_and_splits, racing={"enabled": False}, selection={"rule": "paper"},
                     budget={"train_repeats": 2})
    result, _ = _run(config)
    cands, scores = _tables(result.run_dir)
    evo = scores[scores["phase"] == "evolution"]
    n_train = evo["target_id"].nunique()
    accepted = cands[(cands["status"] == "accepted") & (cands["origin"] != "none")]
    assert len(accepted[accepted["origin"] == "mutation"]) == 3 and "pruned" not in set(cands["status"])
    for cid in accepted["candidate_id"]:  # every training target, both seeds
        mine = evo[evo["candidate_id"] == cid]
        assert len(mine) == 2 * n_train and mine["target_id"].nunique() == n_train
    assert "finalist" not in set(scores["phase"])
    # the winner by the paper's rule: lowest training MAE, then repeat SD, length, id
    rows = accepted.assign(mae=accepted["train_mae"].astype(float), sd=pd.to_numeric(accepted["train_repeat_sd"]).fillna(0),
                           n=accepted["text"].str.len(), seq=accepted["seq"].astype(int))
    best = rows.sort_values(["mae", "sd", "n", "seq"]).iloc[0]["candidate_id"]
    assert cands.loc[cands["selected"] == "True", "candidate_id"].tolist() == [best]
    initials = rows[rows["origin"] == "initial"].sort_values(["mae", "sd", "n", "seq"])
    assert cands.loc[cands["best_initial"] == "True", "candidate_id"].tolist() == [initials.iloc[0]["candidate_id"]]


def test_racing_prunes_a_clearly_worse_mutant_and_keeps_it_out_of_the_archive(tmp_path, pack_and_splits):
    config = _config(tmp_path, pack_and_splits)
    result, _ = _run(config)
    cands, scores = _tables(result.run_dir)
    pruned = cands[cands["status"] == "pruned"]
    assert len(pruned) >= 1 and pruned["text"].str.startswith("contrary").all()
    evo = scores[scores["phase"] == "evolution"]
    n_train = evo["target_id"].nunique()
    for _, c in pruned.iterrows():
        used = evo[evo["candidate_id"] == c["candidate_id"]]
        assert int(c["race_targets"]) == len(used) == 4 < n_train  # stopped after the first batch
        assert int(c["calls_saved"]) == n_train - 4 and c["train_mae"] == ""  # no partial MAE as its MAE
    archive = pd.read_csv(result.run_dir / "archive_entailment.csv", dtype=str)
    assert not set(pruned["candidate_id"]) & set(archive["candidate_id"])
    # pruned mutants are not accepted: the accepted budget is met by survivors only
    assert (cands.loc[cands["origin"] == "mutation", "status"] == "accepted").sum() == 3
    events = [json.loads(line) for line in (result.run_dir / "journal.jsonl").read_text().splitlines()]
    assert {e["candidate_id"] for e in events if e["event"] == "candidate_pruned"} == set(pruned["candidate_id"])
    e = result.report.table5[0]
    assert e.ceiling_val_pairs > 0 and e.evolved_val_pairs_ceiling_targets > 0  # the ceiling beside the judge
    assert e.evolved_val_mae_ceiling_targets is not None and "one more rater" in (result.run_dir / "report.md").read_text()
    assert e.pruned == len(pruned) and e.accepted == 3 and e.attempts == e.accepted + e.pruned + e.rejected


@pytest.mark.parametrize("finalist_repeats", [1, 2])
def test_robust_selection_rejudges_finalists_and_their_calls_serve_the_reevaluation(tmp_path, pack_and_splits,
                                                                                     finalist_repeats):
    config = _config(tmp_path, pack_and_splits, selection={"finalist_repeats": finalist_repeats},
                     budget={"reeval_repeats": 2})
    result, _ = _run(config)
    cands, scores = _tables(result.run_dir)
    finalists = cands[cands["finalist"] == "True"]
    assert set(finalists["origin"]) == {"initial", "mutation"}
    fin = scores[scores["phase"] == "finalist"]
    assert set(fin["candidate_id"]) == set(finalists["candidate_id"])
    winner = cands[cands["selected"] == "True"].iloc[0]
    assert winner["text"].startswith("calibrated")  # the truly better mutant wins
    # the re-evaluation's training calls of the finalists it re-scores are the finalist calls
    reeval_train = scores[(scores["phase"] == "reeval") & (scores["split"] == "train")
                          & scores["candidate_id"].isin(finalists["candidate_id"])]
    shared = reeval_train["repeat"].astype(int) < config.selection.finalist_repeats
    assert set(reeval_train.loc[shared, "seed"]) == set(fin["seed"])
    assert (reeval_train.loc[shared, "cached"] == "True").all()
    # beyond the finalists' repeats the re-evaluation pays its own training calls, on other seeds
    # (with as many finalist repeats as re-evaluation repeats, there is no such call)
    assert (~shared).sum() == (len(reeval_train) // 2 if finalist_repeats == 1 else 0)
    assert (reeval_train.loc[~shared, "cached"] == "False").all()
    assert not set(reeval_train.loc[~shared, "seed"]) & set(fin["seed"])
    best_initial = cands[cands["best_initial"] == "True"]
    assert len(best_initial) == 1 and best_initial.iloc[0]["origin"] == "initial"


def test_the_report_gives_paired_verdicts_and_warns_when_guidance_is_worse_than_none(tmp_path, pack_and_splits):
    """Any guidance makes this judge one point off; without guidance it answers the truth."""
    def harmful(request: ChatRequest) -> str:
        if request.tag == "mutation":
            return json.dumps({"analysis": "scripted", "guidance": f"another rule {request.seed}"})
        truth = _truth(request)
        return json.dumps({"rationale": "scripted", "score": str((truth + 1) % 3 if _guidance(request) else truth)})

    pack, splits = pack_and_splits
    with LoopbackChatServer(lambda body: harmful(request_of(body))) as server:
        args = ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", "h", "--archives-dir",
                str(tmp_path / "archives"), "--base-url", server.base_url, "--model", "m", "--no-audit",
                "--max-train-targets", "100", "--max-validation-targets", "100"]
        result = runner.invoke(app, args, env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "archives" / "h" / "report.json").read_text())
    row = report["table5"][0]
    assert row["vs_none_verdict"] == "worse" and row["vs_none_low"] > 0 and row["vs_none_diff"] > 0
    assert "WORSE with the physicians than no guidance" in (tmp_path / "archives" / "h" / "report.md").read_text()
    last = result.output.strip().splitlines()
    assert any(line.startswith("warning: criterion") and "than no guidance" in line for line in last[-8:])
    assert any("vs no guidance" in line and "worse" in line for line in last)
    # the budget warning came first, before the run: the quick preset affords 2 mutants
    assert "warning: the budget affords at most 2 mutant(s) per criterion" in result.output.splitlines()[0]


def test_a_run_whose_every_judge_call_fails_stops_before_mutating(tmp_path, pack_and_splits):
    def down(request: ChatRequest) -> str:
        raise TransientEndpointError("HTTP 503 from the endpoint: model is loading")

    config = _config(tmp_path, pack_and_splits)
    with pytest.raises(NoWinnerError, match="model is loading") as info:
        _, provider = _run(config, down)
    assert "every one of" in str(info.value)
    requests = [json.loads(line) for line in (config.run_dir / "journal.jsonl").read_text().splitlines()
                if '"mutation_attempt"' in line]
    assert requests == []  # no mutation budget spent


def test_budget_warnings_and_the_shared_attempt_budget():
    paper = BudgetSettings(accepted=25, max_attempts=320, shared_attempts=320)
    assert [paper.attempts_for(i, 9) for i in range(9)] == [36, 36, 36, 36, 36, 35, 35, 35, 35]
    assert sum(paper.attempts_for(i, 9) for i in range(9)) == 320
    assert paper.attempts_for(0, 1) == 320 and BudgetSettings().attempts_for(3, 9) == 320
    config = resolve_config(preset="paper", overrides={"run_id": "x", "pack": "p", "splits": "s"}, environ={})
    assert config.budget.shared_attempts == 320 and not config.racing.enabled and config.selection.rule == "paper"
    assert budget_warnings(config, 9) == []
    assert "attempts will run out first" in budget_warnings(config.model_copy(update={"budget": paper.model_copy(
        update={"shared_attempts": 90})}), 9)[-1]
    quick = resolve_config(preset="quick", overrides={"run_id": "x", "pack": "p", "splits": "s"}, environ={})
    assert quick.racing.enabled and quick.selection.rule == "robust"
    assert "demonstrates the machinery" in budget_warnings(quick, 1)[0]


def test_racing_and_selection_options_are_checked(tmp_path, pack_and_splits):
    pack, splits = pack_and_splits
    bad = runner.invoke(app, ["calibrate", "--pack", str(pack), "--splits", str(splits), "--racing", "maybe"])
    assert bad.exit_code == 2 and "--racing takes 'on' or 'off'" in bad.output
    bad = runner.invoke(app, ["calibrate", "--pack", str(pack), "--splits", str(splits), "--selection", "best"])
    assert bad.exit_code == 2 and "--selection takes 'robust' or 'paper', not 'best'" in bad.output
    # checked before anything else: a missing pack is not what the user hears about first
    bad = runner.invoke(app, ["calibrate", "--pack", str(tmp_path / "nowhere"), "--racing", "maybe"])
    assert bad.exit_code == 2 and "--racing takes 'on' or 'off'" in bad.output


@pytest.mark.parametrize(("version", "why"), [(1, "other judge seeds"), (2, "without the noise margin"),
                                             (3, "laid out target first")])
def test_a_run_of_an_older_configuration_version_is_reported_but_not_resumed(tmp_path, pack_and_splits, version, why):
    """Resuming it would replay other seeds or other racing and selection rules: other results."""
    config = _config(tmp_path, pack_and_splits)
    result, _ = _run(config)
    stored = json.loads((result.run_dir / "config.json").read_text())
    assert stored["version"] == 4 and stored["judge"]["layout"] == "criterion-first"
    older = {**stored, "version": version, "judge": {k: v for k, v in stored["judge"].items() if k != "layout"}}
    (result.run_dir / "config.json").write_text(json.dumps(older))
    assert load_run_config(result.run_dir).judge.layout == "target-first"  # read as it was judged
    refused = runner.invoke(app, ["calibrate", "--resume", str(result.run_dir)])
    assert refused.exit_code == 2 and "started by an older evolve" in refused.output and "Traceback" not in refused.output
    said = " ".join(refused.output.split())
    assert f"configuration version {version}:" in said and why in said
    assert runner.invoke(app, ["report", str(result.run_dir), "--n-boot", "50"]).exit_code == 0
