"""The plan of `evolve otb run` / `otb judge` against real runs: generation calls exact, judging at
most the plan (a malformed answer is not judged) and exact on a generated run, prompt tokens of the
real requests; `--plan` makes no model call and writes nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.llm import Client, ResponseCache
from evolve.otb import generate_otb, judge_otb, plan_otb_judge, plan_otb_run, resolve_otb_config
from evolve.runs import OtbFolder, estimate_tokens, prompt_text
from evolve.testing import FakeProvider, LoopbackChatServer
from tests.otb.test_cli_otb import EXAMPLE, respond
from tests.otb.test_judge_file_guidance import GUIDANCE, _judge_file
from tests.otb.test_run_judge import BOARD_OK, Endpoint, _manifest, files  # noqa: F401 - files is a fixture

runner = CliRunner()
PHASE = {"otb_board": "generation: Board Simulation", "otb_turn": "generation: Specialist Turn"}


def _made(requests) -> Counter:
    """Requests by plan phase (judge requests by the task their schema belongs to)."""
    out: Counter = Counter()
    for r in requests:
        if r.tag in PHASE:
            out[PHASE[r.tag]] += 1
        else:
            name = r.response_format["json_schema"]["name"]
            out["judging: Specialist Turn" if name == "clinical_equivalence" else "judging: Board Simulation"] += 1
    return out


def _config(tmp_path: Path, files, **extra):  # noqa: F811 - files is the fixture's value
    return resolve_otb_config(preset="quick", environ={}, overrides={
        "run_id": "otb", "archives_dir": tmp_path / "archives", "board": files[0], "turn": files[1], "max_items": 10,
        "models": ("model-a",), "endpoint": {"provider": "fake"}, "cache_path": tmp_path / "cache.sqlite", **extra})


def _phase(plan, name):
    return next(p for p in plan.phases if p.phase == name)


def test_generation_is_exact_and_judging_at_most_the_plan(tmp_path, files):  # noqa: F811
    """sim-002's answer is malformed (not judged: two board judge calls fewer than planned)."""
    config = _config(tmp_path, files)
    plan = plan_otb_run(config)
    assert not config.run_dir.exists()
    provider = FakeProvider(Endpoint())
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        judge_plan = plan_otb_judge(config.run_dir)
        judged_from = len(provider.requests)
        judge_otb(config.run_dir, client=client)
    made = _made(provider.requests)
    assert [p.phase for p in plan.phases] == ["generation: Board Simulation", "generation: Specialist Turn",
                                              "judging: Board Simulation", "judging: Specialist Turn"]
    assert all(p.batchable and p.calls_low == p.calls_high for p in plan.phases)
    assert _phase(plan, "generation: Board Simulation").calls_high == made["generation: Board Simulation"] == 2
    assert _phase(plan, "generation: Specialist Turn").calls_high == made["generation: Specialist Turn"] == 3
    assert _phase(plan, "judging: Board Simulation").calls_high == made["judging: Board Simulation"] + 2
    assert _phase(plan, "judging: Specialist Turn").calls_high == made["judging: Specialist Turn"] == 3
    # the generation prompts are the real requests
    sent = [r for r in provider.requests if r.tag == "otb_turn"]
    assert _phase(plan, "generation: Specialist Turn").prompt_tokens_high == sum(
        estimate_tokens(prompt_text(r.messages)) for r in sent)
    # on the generated run: exact calls and prompt tokens of what judging then sent
    judged = provider.requests[judged_from:]
    for task, name in (("board", "judging: Board Simulation"), ("turn", "judging: Specialist Turn")):
        want = [r for r in judged if ("clinical_equivalence" == r.response_format["json_schema"]["name"]) == (task == "turn")]
        phase = _phase(judge_plan, name)
        assert phase.calls_high == len(want) and phase.prompt_tokens_high == sum(
            estimate_tokens(prompt_text(r.messages)) for r in want)
    assert "1 malformed answer(s) are not judged." in judge_plan.render()


def test_every_usable_answer_makes_exactly_the_planned_judge_calls(tmp_path, files):  # noqa: F811
    config = _config(tmp_path, files, judge={"four_decisions": False})

    def clean(request):
        return BOARD_OK if request.tag == "otb_board" else Endpoint()(request)

    provider = FakeProvider(clean)
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        judge_otb(config.run_dir, client=client)
    made = _made(provider.requests)
    plan = plan_otb_run(config)
    for p in plan.phases:
        assert p.calls_high == made[p.phase], p.phase
    assert made["judging: Board Simulation"] == 2  # alignment only: four_decisions off


def test_the_plans_count_the_guidance_of_a_judge_file(tmp_path, files):  # noqa: F811
    config = _config(tmp_path, files)
    judge_json = _judge_file(tmp_path / "calib", config.judge.model)
    turn = "judging: Specialist Turn"
    assert (_phase(plan_otb_run(config, calibration_run=judge_json), turn).prompt_tokens_high
            > _phase(plan_otb_run(config), turn).prompt_tokens_high)
    provider = FakeProvider(Endpoint())
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        plan = plan_otb_judge(config.run_dir, calibration_run=judge_json)
        start = len(provider.requests)
        judge_otb(config.run_dir, client=client, calibration_run=judge_json)
    sent = [r for r in provider.requests[start:] if r.response_format["json_schema"]["name"] == "clinical_equivalence"]
    assert all(GUIDANCE in r.messages[-1].content for r in sent)
    assert _phase(plan, turn).prompt_tokens_high == sum(estimate_tokens(prompt_text(r.messages)) for r in sent)


def test_released_prompts_are_planned_from_the_manifest(tmp_path, files):  # noqa: F811
    """--prompts released: the plan counts the stored prompts, and refuses a manifest lacking an
    item as the run does (before anything)."""
    from evolve.errors import DataError
    from evolve.llm import Message

    stored = [(f"qa-00{n}", "STORED SYSTEM PROMPT", f"STORED USER TURN {n} " * n) for n in (1, 2, 3)]
    manifest = _manifest(tmp_path / "specialist_turn.caption.jsonl", stored)
    config = _config(tmp_path, files, board=None, prompts="released", turn_manifest=manifest)
    plan = plan_otb_run(config, judge=False)
    want = sum(estimate_tokens(prompt_text((Message(role="system", content=s), Message(role="user", content=u))))
               for _, s, u in stored)
    assert [p.phase for p in plan.phases] == ["generation: Specialist Turn"]
    assert plan.phases[0].calls_high == 3 and plan.phases[0].prompt_tokens_high == want
    partial = _config(tmp_path, files, board=None, prompts="released",
                      turn_manifest=_manifest(tmp_path / "m.jsonl", stored[:1]))
    with pytest.raises(DataError, match="no stored prompt for 2 turn item"):
        plan_otb_run(partial)


def test_a_reasoning_model_may_think_up_to_its_output_limit(tmp_path, files):  # noqa: F811
    config = _config(tmp_path, files, models=("plain", "thinker"), reasoning_models=("thinker",))
    board = _phase(plan_otb_run(config, judge=False), "generation: Board Simulation")
    limit = config.decoding.max_tokens_board  # quick preset: 700, the typical answer's cap too
    assert board.calls_high == 4 and board.completion_tokens_low == 4 * min(limit, 1200)
    wide = _config(tmp_path, files, models=("plain", "thinker"), reasoning_models=("thinker",),
                   decoding={"max_tokens_board": 30000})
    board = _phase(plan_otb_run(wide, judge=False), "generation: Board Simulation")
    assert board.completion_tokens_low == 4 * 1200 and board.completion_tokens_high == 2 * 1200 + 2 * 30000


# -- the CLI ------------------------------------------------------------------------------------


@pytest.fixture
def server():
    with LoopbackChatServer(respond) as s:
        yield s


def _chat_calls(server) -> list[dict]:
    return [b for b in server.bodies if "messages" in b]  # a /tokenize request is no model call


def _args(tmp_path: Path, server) -> list[str]:
    return ["otb", "run", "--board", str(EXAMPLE / "task1_example.jsonl"), "--turn", str(EXAMPLE / "task2_example.jsonl"),
            "--base-url", server.base_url, "--model", "scripted", "--max-items", "10", "--run-id", "ex",
            "--archives-dir", str(tmp_path / "archives")]


def test_otb_run_plan_calls_no_model_and_writes_nothing(tmp_path, server):
    env = {"EVOLVE_CACHE_DIR": str(tmp_path / "cache")}
    result = runner.invoke(app, [*_args(tmp_path, server), "--plan", "--price-in", "1", "--price-out", "4",
                                 "--calls-per-hour", "1200"], env=env)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Plan of evolve otb run (no call made)" in out and "generation: Board Simulation" in out
    assert "judging: Specialist Turn" in out and "USD at 1/4 per million" in out and "Hours at 1,200 calls per hour" in out
    assert not _chat_calls(server) and not (tmp_path / "archives").exists() and not (tmp_path / "cache").exists()
    bad = runner.invoke(app, [*_args(tmp_path, server), "--plan", "--calls-per-hour", "-3"], env=env)
    assert bad.exit_code == 2 and "calls-per-hour" in bad.output


def test_otb_plans_on_an_existing_run(tmp_path, server):
    env = {"EVOLVE_CACHE_DIR": str(tmp_path / "cache")}
    assert runner.invoke(app, [*_args(tmp_path, server), "--no-judge"], env=env).exit_code == 0
    run = tmp_path / "archives" / "ex"
    calls = len(_chat_calls(server))
    # the run's own checks come first: a folder holding a run needs --resume
    again = runner.invoke(app, [*_args(tmp_path, server), "--plan"], env=env)
    assert again.exit_code == 2 and "already holds" in again.output
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    resumed = runner.invoke(app, ["otb", "run", "--resume", str(run), "--plan"], env=env)
    assert resumed.exit_code == 0 and "Plan of evolve otb run" in resumed.stdout, resumed.output
    # the plan of what is left: every item is answered, only the judging remains
    assert "7 answer(s) stored already" in resumed.stdout
    rows = {line.split("  ")[0].strip(): line.split()[3] for line in resumed.stdout.splitlines()
            if line.startswith(("generation:", "judging:"))}
    assert rows["generation: Board Simulation"] == "0" and rows["judging: Board Simulation"] == "6"
    judged = runner.invoke(app, ["otb", "judge", str(run), "--plan", "--max-tokens", "100000000"], env=env)
    assert judged.exit_code == 0, judged.output
    assert "Plan of evolve otb judge (no call made)" in judged.stdout and "exact: the run's extracted answers" in judged.stdout
    assert "--max-tokens 100,000,000: the whole plan" in judged.stdout
    assert len(_chat_calls(server)) == calls and not (OtbFolder(run) / OtbFolder.JUDGE_SCORES).exists()
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # nothing written
