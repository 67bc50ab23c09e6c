"""The plan of `evolve bench run` / `bench judge` against real runs on the fake provider: the
calls each phase makes fall within the plan's range, and reach its ends exactly when the model
answers at the ends (one role agreeing at once; five roles dissenting in every round with every
answer re-asked); the judging plan is exact; `--plan` makes no call and writes nothing."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.consilium import (
    BENCH_PHASES,
    PHASE_OF_STAGE,
    ConsiliumPipeline,
    case_artifact_path,
    finished_work,
    judge_bench,
    load_bench_cases,
    plan_bench_judge,
    plan_bench_run,
    run_bench,
)
from evolve.llm import ChatRequest
from evolve.runs import CallPlan, estimate_tokens, prompt_text
from evolve.testing import LoopbackChatServer
from tests.consilium.bench_support import _free_text, consilium_endpoint, make_client, make_config, write_cases
from tests.consilium.test_judge_file_bench import _calibration

SPECIALTIES = ("Cardiology", "Nephrology", "Neurology", "Oncology", "Radiology")
runner = CliRunner()


def scripted(roles: int, dissent: bool, reasks: int):
    """An endpoint answering every stage: a panel of ``roles`` roles; every vote "no" with a
    revision every round (``dissent``) or "yes" at once; every generating call answered with
    invalid JSON ``reasks`` times before a valid answer. Every text carries a hash of its
    request, so no two judge requests are the same."""

    def respond(request: ChatRequest) -> str:
        if request.tag == "judge":
            return json.dumps({"rationale": "scripted", "score": "2"})
        if (len(request.messages) - 2) // 2 < reasks:  # an earlier answer and re-ask per attempt
            return "not json"
        h = hashlib.sha256("".join(m.content for m in request.messages).encode()).hexdigest()[:10]
        answer = _answer(request.tag, request, h, roles, dissent)
        return json.dumps({"text": answer}) if _free_text(request) else answer

    return respond


def _answer(tag: str, request: ChatRequest, h: str, roles: int, dissent: bool) -> str:
    structured = request.response_format is not None and not _free_text(request)
    if tag.startswith("role_"):
        return json.dumps({"roles": [{"name": n, "primary": k == 0, "rationale": f"{n} view {h}"}
                                     for k, n in enumerate(SPECIALTIES[:roles])], "panel_rationale": f"panel {h}"})
    if tag.startswith("opinion"):
        if structured:
            return json.dumps({k: f"{k} {h}" for k in ("subjective_objective", "syndromes_mechanisms",
                                                       "differential_diagnosis", "tactics", "final_opinion")})
        return f"Reasoning {h}.\nFINAL OPINION:\nOpinion {h}."
    if tag == "synthesis":
        return f"Report {h}."
    if tag == "vote":
        return json.dumps({"vote": "no", "critique": f"c {h}", "proposed_revision": f"r {h}"} if dissent
                          else {"vote": "yes", "critique": "", "proposed_revision": ""})
    if tag == "moderator":
        return json.dumps({"decision": "revise", "summary": f"s {h}", "revised_report": f"Report {h}."})
    assert tag == "finalizer"
    if structured:
        fields = ("summary", "resolved_disagreements", "unresolved_disagreements", "final_differential",
                  "diagnostic_plan", "management_plan", "safety_warnings", "final_second_opinion")
        return json.dumps({**{k: f"{k} {h}" for k in fields}, "confidence": "moderate"})
    return f"Final opinion {h}."


def _run(tmp_path: Path, respond, **overrides) -> tuple[CallPlan, CallPlan, Counter, list[ChatRequest]]:
    """Plan, generate and judge one run; the plans and the requests the endpoint got, by phase."""
    cases_file = write_cases(tmp_path / "cases.jsonl", n=2)
    config = make_config(tmp_path, cases_file, **overrides)
    cases, _ = load_bench_cases(config)
    plan = plan_bench_run(config, cases)
    assert not config.run_dir.exists()  # planning writes nothing
    client, provider = make_client(tmp_path, respond)
    try:
        result = run_bench(config, client=client)
        assert result.n_failed == 0
        judge_plan = plan_bench_judge(config.run_dir)
        judge_bench(config.run_dir, client=client)
    finally:
        client.close()
    return plan, judge_plan, Counter(PHASE_OF_STAGE[r.tag] for r in provider.requests), list(provider.requests)


def _phase(plan: CallPlan, name: str):
    return next(p for p in plan.phases if p.phase == name)


def test_the_calls_of_a_real_run_fall_within_the_plan(tmp_path):
    """2 roles, dissent in round 1 and consensus in round 2 (bench_support's endpoint)."""
    plan, judge_plan, made, _ = _run(tmp_path, consilium_endpoint)
    assert [p.phase for p in plan.phases] == list(BENCH_PHASES)
    for p in plan.phases:
        assert p.calls_low <= made[p.phase] <= p.calls_high, (p.phase, made[p.phase])
        assert p.batchable == (p.phase == "judging")  # the pipeline is interactive
    assert made["opinions"] == 8 and made["review votes"] == 16
    # the scripted moderator requests of the two conditions are identical (same report and reviews):
    # the second is a cache hit, not a call
    assert made["moderator"] == 2
    # judging is exact when every pipeline run succeeds, before generation and after it
    assert _phase(plan, "judging").calls_low == _phase(plan, "judging").calls_high == made["judging"]
    assert judge_plan.phases[0].calls_high == made["judging"] and judge_plan.phases[0].batchable


def test_one_role_agreeing_at_once_makes_exactly_the_low_end(tmp_path):
    plan, _, made, requests = _run(tmp_path, scripted(roles=1, dissent=False, reasks=0))
    for p in plan.phases:
        assert made[p.phase] == p.calls_low, p.phase
    assert made["moderator"] == 0
    # the role-assignment prompts are the real ones: the plan counts exactly what was sent
    sent = [r for r in requests if r.tag == "role_assignment"]
    assert _phase(plan, "role assignment").prompt_tokens_low == sum(estimate_tokens(prompt_text(r.messages)) for r in sent)


def test_five_roles_dissenting_with_every_answer_reasked_make_exactly_the_high_end(tmp_path):
    """Both topologies (n+1 with two workers), every round up to the limit, one re-ask per call."""
    plan, _, made, _ = _run(tmp_path, scripted(roles=5, dissent=True, reasks=1), max_cases=1,
                            topologies=("single", "n+1"), workers=("w-1", "w-2"),
                            generation={"max_reasks": 1})
    for p in plan.phases:
        assert made[p.phase] == p.calls_high, (p.phase, made[p.phase], p.calls_high)
    # one case, two conditions: single 5 + n+1 (5 x 2 + 5) opinions a run, each asked twice
    assert made["opinions"] == 2 * 2 * (5 + 15) and made["moderator"] == 2 * 2 * 2 * 2


def test_the_plan_of_a_resumed_run_counts_what_is_left(tmp_path):
    """A run with one pipeline run lost: resuming makes exactly the plan's calls for it (its panel
    is stored: no role assignment), and a complete run has nothing left to generate."""
    cases_file = write_cases(tmp_path / "cases.jsonl", n=2)
    config = make_config(tmp_path, cases_file)
    cases, _ = load_bench_cases(config)
    respond = scripted(roles=1, dissent=False, reasks=0)
    client, provider = make_client(tmp_path, respond, cache="first.sqlite")
    try:
        run_bench(config, client=client)
    finally:
        client.close()
    done = plan_bench_run(config, cases, judge=False, finished=finished_work(config, cases))
    assert all(p.calls_high == 0 for p in done.phases) and "4 of them finished already" in done.render()
    case_artifact_path(config.run_dir, cases[1].case_id, "model-a", "structured", "single").unlink()
    plan = plan_bench_run(config, cases, judge=False, finished=finished_work(config, cases))
    client, provider = make_client(tmp_path, respond, cache="second.sqlite")  # a cold cache: every call is made
    try:
        run_bench(config, client=client, resume=True)
    finally:
        client.close()
    made = Counter(PHASE_OF_STAGE[r.tag] for r in provider.requests)
    assert made["role assignment"] == 0 and sum(made.values()) == 4  # opinion, synthesis, vote, finalizer
    for p in plan.phases:
        assert p.calls_low == made[p.phase], p.phase


def test_the_judging_plan_of_a_generated_run_is_exact(tmp_path):
    """`plan_bench_judge`: the calls and the prompt tokens of the requests judge_bench then sends."""
    cases_file = write_cases(tmp_path / "cases.jsonl", n=2)
    config = make_config(tmp_path, cases_file)
    client, provider = make_client(tmp_path)
    try:
        run_bench(config, client=client)
        before = len(provider.requests)
        plan = plan_bench_judge(config.run_dir, repeats=2)
        assert len(provider.requests) == before and not (config.run_dir / "judge_scores.csv").exists()
        judge_bench(config.run_dir, client=client, repeats=2)
    finally:
        client.close()
    sent = [r for r in provider.requests[before:] if r.tag == "judge"]
    phase = plan.phases[0]
    assert phase.calls_low == phase.calls_high == len(sent) > 0
    assert phase.prompt_tokens_high == sum(estimate_tokens(prompt_text(r.messages)) for r in sent)
    # a warm prefix cache: the second repeat whole (it differs by its seed), the other criteria of a
    # target their shared protocol, case and target
    assert phase.prompt_tokens_high // 2 < phase.cached_prompt_tokens_high < phase.prompt_tokens_high
    assert "estimate: 3.5 characters per token" in plan.render()


def test_the_judging_plan_with_a_judge_file_counts_its_guidance(tmp_path):
    calib = _calibration(tmp_path)
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=1))
    client, provider = make_client(tmp_path)
    try:
        run_bench(config, client=client)
        plan = plan_bench_judge(config.run_dir, calibration_run=calib / "judge.json")
        before = len(provider.requests)
        result = judge_bench(config.run_dir, calibration_run=calib / "judge.json", client=client)
    finally:
        client.close()
    sent = provider.requests[before:]
    assert result.guidance and len(sent) == plan.phases[0].calls_high
    assert plan.phases[0].prompt_tokens_high == sum(estimate_tokens(prompt_text(r.messages)) for r in sent)


# -- the CLI ------------------------------------------------------------------------------------


@pytest.fixture
def server():
    with LoopbackChatServer(lambda body: json.dumps({"rationale": "r", "score": "2"})) as s:
        yield s


def _chat_calls(server: LoopbackChatServer) -> list[dict]:
    return [b for b in server.bodies if "messages" in b]  # a /tokenize request is no model call


def test_bench_run_plan_prints_the_plan_calls_no_model_and_writes_nothing(tmp_path, server):
    cases_file = write_cases(tmp_path / "cases.jsonl", n=3)
    archives = tmp_path / "archives"
    result = runner.invoke(app, [
        "bench", "run", "--cases", str(cases_file), "--plan", "--base-url", server.base_url, "--model", "m",
        "--archives-dir", str(archives), "--price-in", "0.5", "--price-out", "2", "--calls-per-hour", "600",
        "--max-usd", "1000", "--max-tokens", "10",
    ], env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Plan of evolve bench run (no call made)" in out and "review votes" in out and "judging" in out
    assert "USD at 0.5/2 per million" in out and "Hours at 600 calls per hour" in out
    # the spending limits against the plan
    assert "--max-usd 1000: the whole plan ($" in out and "fits under it." in out
    assert "--max-tokens 10: even the plan's low end" in out and "--resume with a higher limit" in out
    assert not _chat_calls(server) and not archives.exists() and not (tmp_path / "cache").exists()


def test_bench_run_plan_counts_with_the_servers_tokenizer(tmp_path):
    """A server with ``POST /tokenize`` (one token per word here): the exact prompts are counted by
    it, and the plan says so."""
    def words(text: str) -> list[int]:
        return list(range(len(text.split())))

    cases_file = write_cases(tmp_path / "cases.jsonl", n=3)
    with LoopbackChatServer(lambda body: "unused", tokenize=words) as tokenizing:
        result = runner.invoke(app, [
            "bench", "run", "--cases", str(cases_file), "--plan", "--no-judge", "--base-url", tokenizing.base_url,
            "--model", "m", "--archives-dir", str(tmp_path / "archives")])
        assert result.exit_code == 0, result.output
        assert not _chat_calls(tokenizing) and len(tokenizing.tokenized) == 3  # one role-assignment prompt a case
        assert f"Prompt tokens: the server's tokenizer (POST {tokenizing.base_url[:-3]}/tokenize)" in result.stdout
        config = make_config(tmp_path, cases_file, max_cases=None)
        cases, _ = load_bench_cases(config)
        pipe = ConsiliumPipeline(None, config.pipeline_settings())
        exact = sum(len(prompt_text(pipe._role_ask(c, "m").messages).split()) for c in cases)
        row = next(line for line in result.stdout.splitlines() if line.startswith("role assignment"))
        assert row.split()[3].split("-")[0] == f"{exact:,}"


def test_bench_run_plan_leaves_out_runs_the_context_refuses(tmp_path, server):
    """A prompt alone beyond the stated context: the run would refuse the pipeline run before any
    call, so the plan counts no call for it (nor judging) and says why."""
    example = Path(__file__).resolve().parents[2] / "ratings" / "example"
    result = runner.invoke(app, ["bench", "run", "--cases", str(example), "--plan", "--base-url", server.base_url,
                                 "--context-tokens", "256", "--archives-dir", str(tmp_path / "archives")])
    assert result.exit_code == 0, result.output
    assert "6 refused before any call (a prompt alone exceeds the context" in result.stdout
    total = next(line for line in result.stdout.splitlines() if line.startswith("total"))
    assert total.split()[1:4] == ["0", "0", "0"] and "warning: context:" in result.output


def test_bench_run_plan_without_judging_and_bad_throughput(tmp_path, server):
    cases_file = write_cases(tmp_path / "cases.jsonl", n=1)
    args = ["bench", "run", "--cases", str(cases_file), "--plan", "--no-judge", "--base-url", server.base_url,
            "--archives-dir", str(tmp_path / "archives")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "judging" not in result.stdout and "finalizer" in result.stdout
    bad = runner.invoke(app, [*args, "--calls-per-hour", "0"])
    assert bad.exit_code == 2 and "calls-per-hour" in bad.output


def test_bench_judge_plan_on_a_generated_run_calls_nothing(tmp_path, server):
    cases_file = write_cases(tmp_path / "cases.jsonl", n=2)
    config = make_config(tmp_path, cases_file)
    client, _ = make_client(tmp_path)
    try:
        run_bench(config, client=client)
    finally:
        client.close()
    files = {p: p.read_bytes() for p in config.run_dir.rglob("*") if p.is_file()}
    result = runner.invoke(app, ["bench", "judge", str(config.run_dir), "--plan", "--repeats", "2"])
    assert result.exit_code == 0, result.output
    assert "Plan of evolve bench judge (no call made)" in result.stdout
    assert {p: p.read_bytes() for p in config.run_dir.rglob("*") if p.is_file()} == files  # nothing written
    missing = runner.invoke(app, ["bench", "judge", str(tmp_path / "nowhere"), "--plan"])
    assert missing.exit_code != 0 and "Traceback" not in missing.output
