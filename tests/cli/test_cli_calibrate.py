"""`evolve calibrate` through the CLI against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.llm import ChatRequest, Message
from tests.conftest import fake_endpoint

runner = CliRunner()


class _Endpoint:
    """Answers chat completions like `fake_endpoint`; can be told to fail after N calls."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.calls = 0
        self.auth = set()
        self.answered: list[str] = []  # canonical bodies answered with 200, in order
        self.requested: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                canonical = json.dumps(body, sort_keys=True)
                outer.auth.add(self.headers.get("authorization"))
                outer.calls += 1
                outer.requested.append(canonical)
                if outer.fail_after is not None and outer.calls > outer.fail_after:
                    self.send_response(400)  # a fatal error: the judge records model_failure
                    data = b'{"error": {"message": "endpoint gone"}}'
                else:
                    name = body["response_format"]["json_schema"]["name"]
                    request = ChatRequest(
                        model=body["model"],
                        messages=tuple(Message(**m) for m in body["messages"]),
                        seed=body["seed"],
                        tag="mutation" if name == "guidance_revision" else "judge",
                    )
                    text = fake_endpoint(request)
                    data = json.dumps({
                        "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
                    }).encode()
                    self.send_response(200)
                    outer.answered.append(canonical)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoint():
    ep = _Endpoint()
    yield ep
    ep.close()


def test_calibrate_command_end_to_end_with_key_from_environment(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MY_KEY", "sk-test-not-a-real-key-000000000000")
    args = ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir), "--run-id", "cli",
            "--archives-dir", str(tmp_path / "archives"), "--base-url", endpoint.base_url, "--model", "scripted",
            "--api-key-env", "MY_KEY", "--accepted", "2", "--max-attempts", "4", "--batch-size", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "archives" / "cli"
    assert "| **evolved winner" in result.stdout  # the report is printed
    assert endpoint.auth == {"Bearer sk-test-not-a-real-key-000000000000"}
    for path in run.iterdir():  # the key is used, never written
        assert "sk-test" not in path.read_text(), path.name
    config = json.loads((run / "config.json").read_text())
    assert config["endpoint"]["base_url"] == endpoint.base_url and config["endpoint"]["api_key_env"] == "MY_KEY"

    # the same command with another run id is free: every call comes from the cache
    calls = endpoint.calls
    args[args.index("cli")] = "cli-again"
    assert runner.invoke(app, args).exit_code == 0
    assert endpoint.calls == calls


def test_resume_through_the_cli_repays_only_failed_calls(tmp_path, tiny_pack_dir, tiny_splits_dir, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    flaky = _Endpoint(fail_after=25)
    args = ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir), "--run-id", "r",
            "--archives-dir", str(tmp_path / "archives"), "--base-url", flaky.base_url,
            "--accepted", "2", "--max-attempts", "4", "--batch-size", "2", "--min-coverage", "0.0"]
    try:
        first = runner.invoke(app, args)
        run = tmp_path / "archives" / "r"
        # calls after the 25th failed: recorded as model_failure, never as scores
        scores = pd.read_csv(run / "scores.csv")
        assert first.exit_code == 0, first.output
        failed = scores["outcome"] == "model_failure"
        assert failed.any() and scores.loc[failed, "score"].isna().all()

        answered_before = set(flaky.answered)
        n_before = len(flaky.requested)
        flaky.fail_after = None  # the endpoint is back
        second = runner.invoke(app, ["calibrate", "--resume", str(run)])
        assert second.exit_code == 0, second.output
    finally:
        flaky.close()
    again = flaky.requested[n_before:]
    assert again and not answered_before & set(again)  # nothing answered before is paid twice
    assert (pd.read_csv(run / "scores.csv")["outcome"] == "score").all()
    events = [json.loads(line)["event"] for line in (run / "journal.jsonl").read_text().splitlines()]
    assert events.count("run_started") == 1 and events.count("run_resumed") == 1
