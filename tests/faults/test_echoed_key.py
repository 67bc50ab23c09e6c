"""An endpoint that echoes the API key - in its error bodies, its replies and their reasoning -
gets it back into no file a run writes, nor onto the terminal (issue 24, item 2).

Each command runs through the CLI against a real HTTP endpoint on 127.0.0.1 (the openai SDK
builds the error text that quoted the key before), then every byte under the test's folder -
run folders, journals, the SQLite response cache and its side files, reports - and the
command's output are searched for the key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.llm._secrets import REDACTED
from evolve.testing import LoopbackChatServer, chat_completion
from tests.conftest import fake_endpoint, request_of

runner = CliRunner()

KEY = "sk-echoed-5c1f0a9e7b3d2c4e6f8a0b1c3d5e7f90"
ECHOED_FIELDS = {"rationale", "analysis", "guidance", "text", "answer"}


def _echo_into(value, echo: str):
    """``value`` (parsed JSON) with ``echo`` appended to every free-text field."""
    if isinstance(value, dict):
        return {k: (v + echo if k in ECHOED_FIELDS and isinstance(v, str) else _echo_into(v, echo))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_echo_into(v, echo) for v in value]
    return value


class EchoingEndpoint(LoopbackChatServer):
    """Answers like ``respond``, but quotes the Authorization header it received: every
    ``fail_every``-th request fails with an HTTP 400 whose message holds it, the first request
    with a (retried) 503 holding it, and every other answer carries it in its free-text fields
    and in its reasoning."""

    def __init__(self, respond: Callable[[dict], object], fail_every: int = 5) -> None:
        self._respond_inner = respond
        self.fail_every = fail_every
        super().__init__(self._respond)

    def _respond(self, body: dict):
        n = len(self.bodies)
        auth = self.authorizations[-1]
        if n == 1:
            return 503, {"error": {"message": f"overloaded; your request had Authorization: {auth}"}}
        if n % self.fail_every == 0 or "input" in body:  # embeddings: refused, quoting the header
            return 400, {"error": {"message": f"invalid request (headers: Authorization: {auth})"}}
        reply = self._respond_inner(body)
        if not isinstance(reply, str):
            return reply
        try:
            text = json.dumps(_echo_into(json.loads(reply), f" [{auth}]"))
        except ValueError:
            text = f"{reply}\n(request header: {auth})"
        payload = chat_completion(text)
        payload["choices"][0]["message"]["reasoning_content"] = f"I was called with {auth}"
        return 200, payload


def _leaks(root: Path, *outputs: str) -> list[str]:
    """Every file under ``root`` and every output holding the key (or a long piece of it)."""
    needles = [KEY.encode(), KEY[-24:].encode()]
    found = [str(p.relative_to(root)) for p in sorted(root.rglob("*"))
             if p.is_file() and any(n in p.read_bytes() for n in needles)]
    return found + [f"output {i}" for i, out in enumerate(outputs) if any(n.decode() in out for n in needles)]


def _redacted_in(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if p.is_file() and REDACTED.encode() in p.read_bytes()]


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ECHO_KEY", KEY)
    return {"EVOLVE_CACHE_DIR": str(tmp_path / "cache"), "ECHO_KEY": KEY}


def test_calibrate_and_judge_against_an_endpoint_echoing_the_key_write_it_nowhere(
    tmp_path, tiny_pack_dir, tiny_splits_dir, env
) -> None:
    archives = tmp_path / "archives"
    with EchoingEndpoint(lambda body: fake_endpoint(request_of(body))) as endpoint:
        cal = runner.invoke(app, [
            "calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir), "--run-id", "cal",
            "--archives-dir", str(archives), "--base-url", endpoint.base_url, "--model", "scripted",
            "--api-key-env", "ECHO_KEY", "--accepted", "2", "--max-attempts", "4", "--batch-size", "2",
            "--min-coverage", "0.0"])
        assert cal.exit_code == 0, cal.output
        judged = runner.invoke(app, [
            "judge", str(tiny_pack_dir), "--judge", str(archives / "cal"), "--run-id", "scored",
            "--archives-dir", str(archives), "--base-url", endpoint.base_url, "--api-key-env", "ECHO_KEY"])
        assert judged.exit_code == 0, judged.output
        # a command that fails on a refused request prints its error: scrubbed too
        refused = runner.invoke(app, [
            "judge", str(tiny_pack_dir), "--judge", str(archives / "cal"), "--run-id", "refused",
            "--archives-dir", str(archives), "--base-url", endpoint.base_url + "?api-key=" + KEY])
    assert set(endpoint.authorizations) == {f"Bearer {KEY}"}  # the key was sent on every request
    # a key inside the URL would be stored with the run's settings: refused, naming where it is, not what
    assert refused.exit_code == 2 and "query parameter 'api-key'" in refused.output and "Traceback" not in refused.output
    assert not (archives / "refused").exists()
    assert _leaks(tmp_path, cal.output, judged.output, refused.output) == []
    # the echoes were recorded (so the search above searched something), the key replaced
    scores = (archives / "cal" / "scores.csv").read_text()
    assert "model_failure" in scores and f"Bearer {REDACTED}" in scores
    assert {"scores.csv", "audit.json"} <= set(_redacted_in(archives / "cal"))
    assert _redacted_in(archives / "scored")


def test_bench_and_otb_runs_against_an_endpoint_echoing_the_key_write_it_nowhere(tmp_path, env) -> None:
    from tests.cli.test_cli_bench import respond as bench_respond
    from tests.consilium.bench_support import write_cases
    from tests.otb.test_cli_otb import EXAMPLE
    from tests.otb.test_cli_otb import respond as otb_respond

    archives = tmp_path / "archives"
    cases = write_cases(tmp_path / "cases.jsonl", n=2)
    with EchoingEndpoint(bench_respond, fail_every=13) as endpoint:
        bench = runner.invoke(app, [
            "bench", "run", "--cases", str(cases), "--run-id", "bench", "--archives-dir", str(archives),
            "--base-url", endpoint.base_url, "--model", "scripted", "--api-key-env", "ECHO_KEY", "--max-cases", "2"],
            env=env)
    with EchoingEndpoint(otb_respond, fail_every=6) as endpoint:
        otb = runner.invoke(app, [
            "otb", "run", "--board", str(EXAMPLE / "task1_example.jsonl"), "--turn", str(EXAMPLE / "task2_example.jsonl"),
            "--base-url", endpoint.base_url, "--model", "scripted", "--api-key-env", "ECHO_KEY", "--max-items", "10",
            "--run-id", "otb", "--archives-dir", str(archives)], env=env)
    assert (archives / "bench" / "journal.jsonl").is_file() and (archives / "otb").is_dir(), bench.output + otb.output
    assert _leaks(tmp_path, bench.output, otb.output) == []
    assert _redacted_in(archives / "bench") and _redacted_in(archives / "otb")
    # the terminal shows the marker as written (it was taken for a Rich markup tag and vanished)
    assert f"Authorization: Bearer {REDACTED})" in otb.output



@pytest.mark.parametrize(("field", "value", "words"), [
    ("api_key_env", KEY, "NAME of the environment variable"),
    ("base_url", f"https://host.example/v1?api-key={KEY}", "query parameter 'api-key'"),
    ("base_url", f"https://user:{KEY}@host.example/v1", "password"),
])
def test_endpoint_settings_that_would_store_a_key_are_refused_without_quoting_it(field, value, words) -> None:
    from evolve.errors import ConfigError
    from evolve.layering import validated
    from evolve.runs import EndpointSettings

    data = {"base_url": "http://127.0.0.1:8080/v1", field: value}
    with pytest.raises(ConfigError) as info:
        validated(EndpointSettings, data, "endpoint options")
    assert words in str(info.value) and KEY not in str(info.value)
    assert validated(EndpointSettings, {"base_url": "https://h.example/v1?api-version=2024-10-21",
                                        "api_key_env": "AZURE_OPENAI_KEY"}, "endpoint options").base_url
