"""`evolve bench run / judge / report` through the CLI against a scripted OpenAI-compatible
server on 127.0.0.1 (the real pipeline, the real HTTP client)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.consilium._prompts import render
from evolve.llm import ChatRequest, Message
from evolve.testing import LoopbackChatServer
from tests.consilium.bench_support import consilium_endpoint, write_cases

runner = CliRunner()

try:
    from evolve.report import write_bench_report  # noqa: F401 - written by another module; optional here
except ImportError:
    HAVE_REPORT = False
else:
    HAVE_REPORT = True

_FORMAT_TAGS = {"role_assignment": "role_assignment", "structured_opinion": "opinion", "vote": "vote",
                "moderator_decision": "moderator", "structured_final": "finalizer", "judge_verdict": "judge"}


def _tag(body: dict) -> str:
    """The pipeline stage of a request body (the tag is not sent over HTTP)."""
    fmt = body.get("response_format")
    if fmt and fmt["json_schema"]["name"] != "free_text":  # free text inside {"text": ...}: by its system prompt
        return _FORMAT_TAGS[fmt["json_schema"]["name"]]
    system = body["messages"][0]["content"]
    if system == render("synthesis.system"):
        return "synthesis"
    if system == render("finalizer.system"):
        return "finalizer"
    return "opinion"


def respond(body: dict) -> str:
    request = ChatRequest(model=body["model"], messages=tuple(Message(**m) for m in body["messages"]),
                          seed=body.get("seed"), response_format=body.get("response_format"), tag=_tag(body))
    return consilium_endpoint(request)


@pytest.fixture
def endpoint():
    server = LoopbackChatServer(respond)
    yield server
    server.close()


def _chats(server: LoopbackChatServer) -> int:
    return sum("messages" in b for b in server.bodies)


def test_bench_run_judge_report_end_to_end(tmp_path, endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MY_KEY", "sk-bench-cli-not-a-real-key-0000")
    cases = write_cases(tmp_path / "cases.jsonl", n=3)
    args = ["bench", "run", "--cases", str(cases), "--run-id", "cli", "--archives-dir", str(tmp_path / "archives"),
            "--base-url", endpoint.base_url, "--model", "scripted", "--api-key-env", "MY_KEY", "--max-cases", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "archives" / "cli"
    assert set(endpoint.authorizations) == {"Bearer sk-bench-cli-not-a-real-key-0000"}
    for path in run.rglob("*"):  # the key is used, never written
        if path.is_file():
            assert "sk-bench-cli" not in path.read_text(errors="ignore"), path
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["endpoint"]["base_url"] == endpoint.base_url and manifest["models"] == {"scripted": "scripted"}
    assert manifest["case_ids"] == ["10.0000/bench-00", "10.0000/bench-01"]
    assert len(list((run / "cases").glob("*.json"))) == 4  # 2 cases x 2 conditions
    scores = pd.read_csv(run / "judge_scores.csv")
    assert len(scores) == 2 * 20 + 2 * 8 + 2 * 2  # structured runs: 20 pairs; free-form: the final (8)
    assert f"records: {run / 'records' / 'scripted'}" in result.stdout
    assert "judge scores:" in result.stdout and "4 pipeline runs with a record, 0 failed" in result.stdout
    assert "judge_scores.csv (60 calls: score 60)" in result.stdout  # the outcomes, failures included when any
    if HAVE_REPORT:  # the tables, printed
        assert (run / "bench_report.md").is_file() and "# Benchmark report" in result.stdout

    # judging again is free: every call comes from the cache
    calls = _chats(endpoint)
    judged = runner.invoke(app, ["bench", "judge", str(run)])
    assert judged.exit_code == 0, judged.output
    assert _chats(endpoint) == calls and "60 judge calls" in judged.stdout and "60 from the cache" in judged.stdout
    # free-form role components on request: only their 2 x 12 calls are new
    roles = runner.invoke(app, ["bench", "judge", str(run), "--free-form-roles"])
    assert roles.exit_code == 0, roles.output
    assert "84 judge calls" in roles.stdout and "60 from the cache" in roles.stdout and _chats(endpoint) == calls + 24
    assert "split fallbacks" not in roles.stdout  # every scripted opinion has its FINAL OPINION line
    calls = _chats(endpoint)

    # resuming a finished run calls nothing and keeps every artifact
    resumed = runner.invoke(app, ["bench", "run", "--resume", str(run), "--no-judge"])
    assert resumed.exit_code == 0, resumed.output
    assert _chats(endpoint) == calls
    events = [json.loads(line)["event"] for line in (run / "journal.jsonl").read_text().splitlines()]
    assert events.count("bench_started") == 1 and events.count("bench_resumed") == 1

    report = runner.invoke(app, ["bench", "report", str(run), "--n-boot", "20"])
    if HAVE_REPORT:
        assert report.exit_code == 0, report.output
        assert "bench_report.md" in report.stdout
        # every call of the three processes (run, judge, resume): paid once, then from the cache
        usage = json.loads((run / "bench_report.json").read_text())["usage"]
        assert usage["total"]["calls"] == calls and usage["total"]["cache_hits"] >= 84
        assert usage["by_tag"]["judge"]["calls"] == 84 and "## Calls and tokens" in (run / "bench_report.md").read_text()
    else:
        assert report.exit_code == 2 and "no bench report" in report.output


def test_bench_run_with_guidance_and_a_single_condition(tmp_path, endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    calib = tmp_path / "calib"
    calib.mkdir()
    pd.DataFrame([{"candidate_id": "management:m2", "criterion": "management", "text": "calibrated: be specific.",
                   "selected": True}]).to_csv(calib / "candidates.csv", index=False)
    cases = write_cases(tmp_path / "cases.jsonl", n=1)
    result = runner.invoke(app, [
        "bench", "run", "--cases", str(cases), "--run-id", "g", "--archives-dir", str(tmp_path / "archives"),
        "--base-url", endpoint.base_url, "--model", "scripted", "--condition", "structured",
        "--guidance", str(calib), "--judge-repeats", "2"])
    assert result.exit_code == 0, result.output
    scores = pd.read_csv(tmp_path / "archives" / "g" / "judge_scores.csv")
    management = scores[scores["criterion"] == "management"]
    assert set(management["guidance_id"]) == {"management:m2"} and set(management["score"]) == {3}
    assert set(scores["repeat"]) == {0, 1} and set(scores["condition"].dropna()) == {"structured"}


def test_bench_errors_are_reported_with_the_fix(tmp_path, endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    missing = runner.invoke(app, ["bench", "run", "--base-url", endpoint.base_url])
    assert missing.exit_code == 2 and "--cases" in missing.output
    bad = runner.invoke(app, ["bench", "run", "--cases", str(tmp_path / "none.jsonl"), "--base-url", endpoint.base_url,
                              "--topology", "n+1", "--archives-dir", str(tmp_path / "a")])
    assert bad.exit_code == 2 and "worker" in bad.output
    nothing = runner.invoke(app, ["bench", "judge", str(tmp_path)])
    assert nothing.exit_code == 2 and "evolve bench run" in nothing.output
    gone = runner.invoke(app, ["bench", "run", "--resume", str(tmp_path / "nope")])
    assert gone.exit_code == 2 and "manifest.json" in gone.output
    assert _chats(endpoint) == 0


def test_a_bench_run_whose_every_pipeline_fails_says_why_and_exits_non_zero(tmp_path, monkeypatch):
    """Every request refused with llama.cpp's context-size error: each failure names the context
    window (not the model name or the key), the last line counts the failures, exit code 1."""
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    server = LoopbackChatServer(lambda body: (400, {"error": {"message": "the request exceeds the available context size"}}))
    try:
        cases = write_cases(tmp_path / "cases.jsonl", n=2)
        result = runner.invoke(app, ["bench", "run", "--cases", str(cases), "--run-id", "refused",
                                     "--archives-dir", str(tmp_path / "archives"), "--base-url", server.base_url,
                                     "--model", "scripted", "--max-cases", "2"])
    finally:
        server.close()
    assert result.exit_code == 1, result.output
    assert "context window" in result.output and "not retried" in result.output
    assert "check the model name" not in result.output.lower()
    last = [line for line in result.output.strip().splitlines() if line.strip()][-1]
    assert "pipeline runs failed" in last


def test_bench_resume_refuses_options_it_would_drop(tmp_path, endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    cases = write_cases(tmp_path / "cases.jsonl", n=1)
    args = ["bench", "run", "--cases", str(cases), "--run-id", "b", "--archives-dir", str(tmp_path / "archives"),
            "--base-url", endpoint.base_url, "--model", "scripted", "--no-judge"]
    assert runner.invoke(app, args).exit_code == 0
    run = tmp_path / "archives" / "b"
    refused = runner.invoke(app, ["bench", "run", "--resume", str(run), "--max-rounds", "4", "--max-cases", "1"])
    assert refused.exit_code == 2
    assert "--max-rounds" in refused.output and "--max-cases" in refused.output
    calls = _chats(endpoint)
    resumed = runner.invoke(app, ["bench", "run", "--resume", str(run), "--no-judge", "--parallel-cases", "2"])
    assert resumed.exit_code == 0, resumed.output
    assert _chats(endpoint) == calls
