"""Faults injected by an in-process OpenAI-compatible endpoint, through the command line: an
endpoint that dies mid-run, 5xx/429 storms, garbage and cut JSON. Each run either finishes or
stops with a named error and its resume command, and a resume pays for no finished call twice."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.testing import DROP, LoopbackChatServer, chat_completion
from tests.conftest import fake_endpoint, request_of

runner = CliRunner()


class FaultyEndpoint(LoopbackChatServer):
    """Answers like ``fake_endpoint``; ``faults[n]`` replaces the answer to the n-th call (from 1)
    with ``"drop"`` (connection closed), an HTTP status, ``"garbage"`` or ``"cut"`` (a JSON
    object cut by the output limit). ``drop_after`` drops every call after that many;
    ``latency_s`` delays every answer."""

    def __init__(self) -> None:
        self.faults: dict[int, object] = {}
        self.drop_after: int | None = None
        self.latency_s = 0.0
        self.answered: list[str] = []
        super().__init__(self._respond)

    def _respond(self, body: dict):
        n = len(self.bodies)
        if "input" in body:  # embeddings: a chat-only server
            return 404, {"error": {"message": "not found"}}
        fault = self.faults.get(n)
        time.sleep(self.latency_s)
        if (self.drop_after is not None and n > self.drop_after) or fault == "drop":
            return DROP
        if isinstance(fault, int):
            return fault, {"error": {"message": f"injected HTTP {fault}"}}
        if fault == "garbage":
            return "this is not the JSON you asked for"
        if fault == "cut":
            return 200, chat_completion('{"rationale": "cut he', finish_reason="length")
        self.answered.append(json.dumps(body, sort_keys=True))
        return fake_endpoint(request_of(body))


@pytest.fixture
def endpoint():
    ep = FaultyEndpoint()
    yield ep
    ep.close()


def _calibrate(tmp_path: Path, pack: Path, splits: Path, endpoint: FaultyEndpoint, retries: int = 0, **endpoint_settings):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"endpoint": {"max_retries": retries, **endpoint_settings}}))
    args = ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", "f", "--archives-dir",
            str(tmp_path / "archives"), "--base-url", endpoint.base_url, "--model", "scripted", "--no-audit",
            "--accepted", "1", "--max-attempts", "2", "--batch-size", "1", "--config", str(config)]
    return runner.invoke(app, args), tmp_path / "archives" / "f"


def _outcomes(run: Path) -> Counter:
    return Counter(pd.read_csv(run / "scores.csv", dtype=str, keep_default_na=False)["outcome"])


def test_an_endpoint_that_dies_mid_run_stops_it_and_a_resume_finishes_it(tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                                         endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    endpoint.drop_after = 25
    result, run = _calibrate(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint)
    assert result.exit_code == 2, result.output
    assert "could not reach the endpoint" in result.output and f"evolve calibrate --resume {run}" in result.output
    assert not (run / "scores.csv").exists()  # no table of failures
    before = len(endpoint.answered)
    endpoint.drop_after = None  # the endpoint is back
    resumed = runner.invoke(app, ["calibrate", "--resume", str(run)])
    assert resumed.exit_code == 0, resumed.output
    assert _outcomes(run)["model_failure"] == 0
    # no finished call is paid twice; only a call still in flight when the run stopped (at most
    # max_concurrency = 2, answered by the server but cancelled in the client) is asked again
    first, again = Counter(endpoint.answered[:before]), endpoint.answered[before:]
    repeated = [body for body in again if body in first]
    assert len(repeated) <= 2 and all(body in endpoint.answered[before - 2:before] for body in repeated)


@pytest.mark.parametrize("status", [500, 429])
def test_a_storm_of_retryable_errors_is_ridden_out(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint, monkeypatch,
                                                   status):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    endpoint.faults = {3: status, 4: status, 9: status}
    result, run = _calibrate(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint, retries=2)
    assert result.exit_code == 0, result.output
    assert _outcomes(run)["model_failure"] == 0


def test_garbage_and_cut_answers_are_failures_that_a_resume_repairs(tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                                    endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    endpoint.faults = {2: "garbage", 5: "cut", 7: "garbage"}
    result, run = _calibrate(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint)
    assert result.exit_code == 0, result.output
    assert _outcomes(run)["model_failure"] == 3  # recorded as failures, never as scores
    endpoint.faults = {}
    (run / "report.md").unlink()
    resumed = runner.invoke(app, ["calibrate", "--resume", str(run)])
    assert resumed.exit_code == 0, resumed.output
    assert _outcomes(run)["model_failure"] == 0  # not cached: asked again, and answered
    assert max(Counter(endpoint.answered).values()) == 1


def _replayable(run: Path) -> Counter:
    from evolve.runs import REPLAYED_EVENTS

    names = {e.value for e in REPLAYED_EVENTS}
    events = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    return Counter(json.dumps({k: v for k, v in e.items() if k != "t"}, sort_keys=True) for e in events if e["event"] in names)


def test_a_resumed_run_journals_each_event_once_and_counts_the_calls_of_every_process(tmp_path, tiny_pack_dir,
                                                                                      tiny_splits_dir, endpoint,
                                                                                      monkeypatch):
    """Before: the replay journaled every finished candidate, attempt and snapshot a second time,
    and the usage (and so the report's call counts) covered only the resumed process."""
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    endpoint.drop_after = 25
    result, run = _calibrate(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint)
    assert result.exit_code == 2, result.output
    first_answered = len(endpoint.answered)
    endpoint.drop_after = None
    assert runner.invoke(app, ["calibrate", "--resume", str(run)]).exit_code == 0

    # the same events as one uninterrupted run in its own cache, each once
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-ref"))
    answered_before_ref = len(endpoint.answered)
    (tmp_path / "ref").mkdir()
    ref_result, ref = _calibrate(tmp_path / "ref", tiny_pack_dir, tiny_splits_dir, endpoint)
    assert ref_result.exit_code == 0, ref_result.output
    assert _replayable(run) == _replayable(ref)

    # usage over both processes: every call the endpoint answered, the first process's included
    report = json.loads((run / "report.json").read_text())
    usage = report["usage"]
    assert usage["total"]["calls"] == answered_before_ref
    assert first_answered > 0 and set(usage["by_tag"]) == {"judge", "mutation"}
    sessions = {json.loads(line).get("session") for line in (run / "journal.jsonl").read_text().splitlines()
                if '"usage"' in line}
    assert len(sessions - {None}) == 2
    ref_usage = json.loads((ref / "report.json").read_text())["usage"]
    assert ref_usage["total"]["calls"] == len(endpoint.answered) - answered_before_ref
    assert "## Calls and tokens" in (run / "report.md").read_text()


def test_a_slow_endpoint_is_waited_for_and_one_slower_than_the_timeout_is_named(tmp_path, tiny_pack_dir,
                                                                               tiny_splits_dir, endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    endpoint.latency_s = 0.05  # slow but within the timeout: the same run as without latency
    result, run = _calibrate(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint, timeout_s=30)  # room on busy cores
    assert result.exit_code == 0, result.output
    assert _outcomes(run)["model_failure"] == 0

    endpoint.latency_s = 1.0  # every answer comes after the 0.3 s timeout
    (tmp_path / "slow").mkdir()
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-slow"))
    slow, run = _calibrate(tmp_path / "slow", tiny_pack_dir, tiny_splits_dir, endpoint, timeout_s=0.3)
    assert slow.exit_code != 0 and "Traceback" not in slow.output
    assert "timed out after 0.3 s" in slow.output and "timeout_s" in slow.output, slow.output
