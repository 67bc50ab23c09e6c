"""The cost plan against real runs on the fake provider: the calls made fall in the plan's range,
phase by phase, and ``--plan`` writes nothing and sends no completion request."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import load_pack, write_pack
from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.splits import make_splits, write_splits
from evolve.testing import FakeProvider, LoopbackChatServer
from evolve.workflows import JudgeRunOptions, run_calibration, run_judge
from evolve.workflows._plan import plan_calibration_run, plan_judge_run
from tests.calibration.test_racing_selection import Scripted, _config
from tests.conftest import make_tiny_pack, request_of

runner = CliRunner()


class Answers(Scripted):
    """The racing tests' scripted judge and mutation model, with a drift audit that passes."""

    def __call__(self, request: ChatRequest) -> str:
        if request.tag == "audit":
            return json.dumps({"rationale": "ok", "about_criterion": True, "contradicts_protocol": False, "drift": "none"})
        return super().__call__(request)


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    write_pack(make_tiny_pack(20), tmp_path / "pack")
    write_splits(make_splits(load_pack(tmp_path / "pack"), holdout_fraction=0.2, validation_fraction=0.4, seed=3),
                 tmp_path / "splits")
    return tmp_path / "pack", tmp_path / "splits"


def _made(config, client: Client) -> dict[str, int]:
    """Calls made per plan phase, from the run's scores (fresh cache: ``cached`` False is a call)."""
    scores = pd.read_csv(config.run_dir / "scores.csv", dtype=str, keep_default_na=False)
    cands = pd.read_csv(config.run_dir / "candidates.csv", dtype=str, keep_default_na=False)
    origin = dict(zip(cands["candidate_id"], cands["origin"]))
    paid = scores[scores["cached"] == "False"]
    evo = paid[paid["phase"] == "evolution"]
    initial = evo["candidate_id"].map(origin) == "initial"
    made = {"initial evaluation": int(initial.sum()), "evolution": int((~initial).sum()),
            "racing noise": int((paid["phase"] == "noise").sum()), "finalists": int((paid["phase"] == "finalist").sum()),
            "re-evaluation": int((paid["phase"] == "reeval").sum()), "mutation": client.usage["mutation"].calls}
    if "audit" in client.usage:
        made["drift audit"] = client.usage["audit"].calls
    return made


def _check(config) -> tuple[dict[str, tuple[int, int]], dict[str, int], Client]:
    plan = plan_calibration_run(config)
    assert not config.run_dir.exists() and not Path(config.cache_path).exists()  # the plan wrote nothing
    ranges = {p.phase: (p.calls_low, p.calls_high) for p in plan.phases}
    client = Client(FakeProvider(Answers()), cache=ResponseCache(config.cache_path), max_concurrency=1, max_retries=0)
    with client:
        run_calibration(config, client=client)
        made = _made(config, client)
    for phase, n in made.items():
        if n or phase in ranges:
            low, high = ranges[phase]
            assert low <= n <= high, (phase, n, ranges[phase])
    return ranges, made, client


def test_racing_run_falls_within_the_plan_phase_by_phase(tmp_path, inputs):
    ranges, made, _ = _check(_config(tmp_path, inputs))
    assert ranges["evolution"][0] < ranges["evolution"][1]  # racing makes evolution a range
    assert ranges["initial evaluation"][0] == ranges["initial evaluation"][1] == made["initial evaluation"]


def test_without_racing_the_plan_is_exact_when_the_budget_is_met(tmp_path, inputs):
    config = _config(tmp_path, inputs, racing={"enabled": False}, budget={"train_repeats": 2})
    ranges, made, client = _check(config)
    assert client.usage["mutation"].calls == config.budget.accepted  # every proposal accepted: the budget met exactly
    for phase in ("initial evaluation", "evolution"):
        assert ranges[phase] == (made[phase], made[phase]), phase


def test_paper_protocol_with_audit_and_held_out_scoring(tmp_path, inputs):
    config = _config(tmp_path, inputs, racing={"enabled": False}, selection={"rule": "paper"}, audit=True,
                     evaluate_holdout=True)
    ranges, made, client = _check(config)
    assert "finalists" not in ranges and "racing noise" not in ranges
    holdout = pd.read_csv(config.run_dir / "holdout" / "calls.csv", dtype=str, keep_default_na=False)
    assert ranges["held-out scoring"] == (len(holdout), len(holdout))
    # every judge call of the run is in some phase of the plan
    total = sum(n for phase, n in made.items() if phase not in ("mutation", "drift audit")) + len(holdout)
    assert total == client.usage["judge"].calls
    low, high = ranges["drift audit"]
    assert low <= client.usage["audit"].calls <= high


def test_evolve_judge_plan_counts_the_calls_it_makes(tmp_path, inputs):
    config = _config(tmp_path, inputs, racing={"enabled": False}, selection={"rule": "paper"})
    with Client(FakeProvider(Answers()), cache=ResponseCache(config.cache_path), max_concurrency=1) as client:
        run_calibration(config, client=client)
    options = JudgeRunOptions(targets=inputs[0], judge=config.run_dir, run_dir=tmp_path / "scored",
                              endpoint={"provider": "fake"}, cache_path=tmp_path / "fresh.sqlite")
    plan = plan_judge_run(options)
    assert not (tmp_path / "scored").exists()
    with Client(FakeProvider(Answers()), cache=ResponseCache(tmp_path / "fresh.sqlite"), max_concurrency=1) as client:
        run_judge(options, client=client)
        made = client.usage["judge"].calls
    total = plan.totals()
    assert total.calls_low == total.calls_high == made > 0
    assert [p.phase for p in plan.phases] == ["judging (winner)", "judging (no guidance, rated targets)"]
    # over the calibration's own cache, what it already scored (winner and no guidance on its
    # training and validation targets, same seeds) is free: the plan counts only the rest
    shared = options.model_copy(update={"run_dir": tmp_path / "scored2", "cache_path": config.cache_path})
    plan = plan_judge_run(shared)
    with Client(FakeProvider(Answers()), cache=ResponseCache(config.cache_path), max_concurrency=1) as client:
        run_judge(shared, client=client)
        made_shared = client.usage["judge"].calls
    assert plan.totals().calls_high == made_shared < made
    assert "already in the response cache" in plan.notes[0]
    # a second calibration with the same seeds finds its initial evaluation in the cache
    again = config.model_copy(update={"run_id": "again"})
    initial = next(p for p in plan_calibration_run(again).phases if p.phase == "initial evaluation")
    assert initial.calls_low == initial.calls_high == 0
    # the same through the CLI, on the default (embedded) endpoint: no server started, nothing written
    journal = (config.run_dir / "journal.jsonl").read_text()
    result = runner.invoke(app, ["judge", str(inputs[0]), "--judge", str(config.run_dir), "--run-id", "j", "--archives-dir",
                                 str(tmp_path / "archives"), "--plan", "--price-in", "1", "--price-out", "2",
                                 "--max-usd", "1000"],
                           env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Plan of evolve judge (no call made)")
    assert "--max-usd 1000: the whole plan" in result.output
    total_row = next(line.split() for line in result.output.splitlines() if line.startswith("total"))
    assert total_row[1] == f"{made:,}"
    assert "the embedded model is not started for a plan" in result.output
    assert not (tmp_path / "archives" / "j").exists() and not (tmp_path / "cache").exists()
    # --plan on --resume of the finished calibration: the whole run's plan, the run left as it was
    result = runner.invoke(app, ["calibrate", "--resume", str(config.run_dir), "--plan"],
                           env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Plan of evolve calibrate --resume (the calls left)")
    total_row = next(line.split() for line in result.output.splitlines() if line.startswith("total"))
    assert total_row[1] == "0"  # a finished run has nothing left to pay for
    assert "Completion tokens: measured in this run: " in result.output and "per judge call" in result.output
    assert (config.run_dir / "journal.jsonl").read_text() == journal


def test_calibrate_plan_cli_asks_only_the_tokenizer_and_writes_nothing(tmp_path, inputs):
    pack, splits = inputs
    with LoopbackChatServer(lambda body: Answers()(request_of(body)), tokenize=lambda text: [0] * (len(text) // 4)) as server:
        args = ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", "p", "--archives-dir",
                str(tmp_path / "archives"), "--base-url", server.base_url, "--model", "m", "--plan",
                "--price-in", "1", "--price-out", "2", "--calls-per-hour", "1000", "--max-usd", "1000",
                "--max-tokens", "10"]
        result = runner.invoke(app, args, env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
        assert result.exit_code == 0, result.output
        assert server.bodies == [] and server.tokenized  # no completion request; the tokenizer was asked
    out = result.output
    assert out.startswith("Plan of evolve calibrate (no call made)")
    assert "Prompt tokens: the server's tokenizer (POST " in out and "Hours at 1,000 calls per hour" in out
    assert "USD at 1/2 per million" in out
    # the limits given are held against the plan: 1,000 USD is more than enough, 10 tokens too few
    assert "--max-usd 1000: the whole plan" in out and "fits under it" in out
    assert "--max-tokens 10: even the plan's low end" in out and "passes it" in out
    # what was planned: the run folder, pack and split folder the layers gave (a config file's, say)
    assert f"planned for run {tmp_path / 'archives' / 'p'}: pack {pack}, splits {splits}" in out.splitlines()
    assert not (tmp_path / "archives").exists() and not (tmp_path / "cache").exists()
    # --resume of a run that does not exist is the run's own error, before any plan
    bad = runner.invoke(app, ["calibrate", "--resume", str(tmp_path / "archives" / "nope"), "--plan"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output


def test_plan_of_workbooks_imports_into_a_scratch_folder_and_leaves_nothing(tmp_path, monkeypatch):
    import tempfile

    from tests.conftest import REPO

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    example = REPO / "ratings" / "example-workbooks"
    result = runner.invoke(app, ["calibrate", "--workbooks", str(example / "workbooks"), "--cases",
                                 str(example / "cases.jsonl"), "--outputs", str(example / "outputs"), "--rubric",
                                 "consilium", "--preset", "paper", "--condition", "free-form", "--archives-dir",
                                 str(tmp_path / "archives"), "--plan", "--calls-per-hour", "100"],
                           env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    assert "Plan of evolve calibrate (no call made)" in result.output and "held-out scoring" not in result.output
    assert "25 to 35 attempts (per criterion)" in result.output  # 320 attempts shared by the nine criteria
    assert not (tmp_path / "archives").exists() and not (tmp_path / "cache").exists()
    assert list((tmp_path / "scratch").iterdir()) == []  # the scratch import is gone


def test_plan_refuses_a_bad_throughput(tmp_path, inputs):
    pack, splits = inputs
    result = runner.invoke(app, ["calibrate", "--pack", str(pack), "--splits", str(splits), "--plan",
                                 "--calls-per-hour", "0"])
    assert result.exit_code == 2 and "--calls-per-hour" in result.output


def test_calls_left_of_a_run_under_way(tmp_path, inputs):
    from evolve.calibration import calibration_calls, calls_left, plan_calibration
    from evolve.judge import Judge

    config = _config(tmp_path, inputs, racing={"enabled": False}, budget={"accepted": 3, "max_attempts": 6})
    plan = plan_calibration(config)
    judge = Judge(plan.rubric, plan.protocol, config.judge)
    cid = plan.criteria[0].criterion_id
    initial = [f"{cid}:{name}" for name, _ in plan.initial[cid]]
    events = [{"event": "candidate_evaluated", "criterion": cid, "candidate_id": c} for c in initial]
    events += [{"event": "mutation_attempt", "criterion": cid, "attempt": 0, "status": "accepted"},
               {"event": "mutation_attempt", "criterion": cid, "attempt": 1, "status": "invalid"}]
    whole = {p.phase: p for p in calibration_calls(config, plan, judge)[0].phases}
    left, notes = calls_left(config, plan, judge, events)
    phases = {p.phase: p for p in left[0].phases}
    assert (phases["initial evaluation"].low, phases["initial evaluation"].high) == (0, 0)
    # 2 of 6 attempts made, 1 of 3 mutants accepted: 2 to 4 attempts left, 2 mutants to judge
    assert (phases["mutation"].low, phases["mutation"].high) == (2, 4)
    n_train = len(plan.items[cid][0])
    assert phases["evolution"].low == phases["evolution"].high == 2 * n_train * config.budget.train_repeats
    assert (phases["re-evaluation"].low, phases["re-evaluation"].high) == (whole["re-evaluation"].low,
                                                                          whole["re-evaluation"].high)
    assert notes == [f"{cid}: initial evaluation done; 2 mutation attempts made"]
