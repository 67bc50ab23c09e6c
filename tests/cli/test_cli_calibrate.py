"""`evolve calibrate` through the CLI against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.testing import LoopbackChatServer
from tests.conftest import REPO, fake_endpoint, request_of

runner = CliRunner()


class _Endpoint(LoopbackChatServer):
    """A loopback endpoint answering like `fake_endpoint`; fails with HTTP 400 after N calls."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.answered: list[str] = []  # canonical bodies answered with 200
        super().__init__(self._respond)

    @property
    def calls(self) -> int:
        return len(self.bodies)

    @property
    def requested(self) -> list[str]:
        return [json.dumps(b, sort_keys=True) for b in self.bodies]

    def _respond(self, body: dict):
        if "input" in body:  # POST /v1/embeddings (the drift audit asks): a chat-only server
            return 404, {"error": {"message": "not found"}}
        if self.fail_after is not None and len(self.bodies) > self.fail_after:
            return 400, {"error": {"message": "endpoint gone"}}  # fatal: recorded as model_failure
        request = request_of(body)
        self.answered.append(json.dumps(body, sort_keys=True))
        if request.tag == "judge" and "truth " not in request.messages[-1].content:
            return json.dumps({"rationale": "scripted", "score": "2"})  # material without a planted truth
        return fake_endpoint(request)


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
    assert set(endpoint.authorizations) == {"Bearer sk-test-not-a-real-key-000000000000"}
    for path in run.rglob("*"):  # the key is used, never written (the rubric copy included)
        if path.is_file():
            assert "sk-test" not in path.read_text(), path.name
    config = json.loads((run / "config.json").read_text())
    assert config["endpoint"]["base_url"] == endpoint.base_url and config["endpoint"]["api_key_env"] == "MY_KEY"

    # the same command with another run id is free: every chat call comes from the cache (the
    # audit asks again for embeddings, which this endpoint does not serve: a failure, not cached)
    def chats() -> int:
        return sum("messages" in b for b in endpoint.bodies)

    calls = chats()
    args[args.index("cli")] = "cli-again"
    assert runner.invoke(app, args).exit_code == 0
    assert chats() == calls


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


def test_calibrate_from_workbooks_in_one_command(tmp_path, endpoint, monkeypatch):
    """Physician workbooks + case file + consilium records -> import, split, nine archives,
    Table 5 and the drift audit, all in the run folder, from one command."""
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    example = REPO / "ratings" / "example-workbooks"
    args = ["calibrate", "--workbooks", str(example / "workbooks"), "--cases", str(example / "cases.jsonl"),
            "--outputs", str(example / "outputs"), "--rubric", "consilium", "--run-id", "wb",
            "--archives-dir", str(tmp_path / "archives"), "--base-url", endpoint.base_url,
            "--accepted", "1", "--max-attempts", "2", "--batch-size", "1", "--min-coverage", "0.0",
            "--train-repeats", "1", "--max-train-targets", "4", "--max-validation-targets", "4"]  # few calls: the plumbing is tested
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "archives" / "wb"
    assert "imported cases 3, targets 22, ratings 184" in result.stdout
    assert (run / "pack" / "structural_exclusions.csv").is_file() and (run / "splits" / "train.txt").is_file()
    table = pd.read_csv(run / "table5.csv")
    assert table["number"].dropna().astype(int).tolist() == list(range(1, 10))
    assert set(table.loc[table["criterion"] != "macro", "drift"]) <= {"ok", "review", "drift"}
    audit = json.loads((run / "audit.json").read_text())
    assert len(audit["criteria"]) == 9
    assert "## Table 5" in result.stdout and "macro mean" in result.stdout
    # a second import into the same run folder is refused rather than overwriting it
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "already exists" in again.output


def _small_run(tmp_path, pack, splits, endpoint):
    """A finished one-mutant calibration against the loopback endpoint; returns its folder."""
    args = ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", "r",
            "--archives-dir", str(tmp_path / "archives"), "--base-url", endpoint.base_url, "--model", "scripted",
            "--accepted", "1", "--max-attempts", "2", "--batch-size", "1", "--no-audit"]
    assert runner.invoke(app, args).exit_code == 0
    return tmp_path / "archives" / "r"


def test_resume_refuses_options_it_would_drop_and_applies_harmless_ones(tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                                         endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    run = _small_run(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint)
    calls = endpoint.calls
    refused = runner.invoke(app, ["calibrate", "--resume", str(run), "--accepted", "3", "--batch-size", "2"])
    assert refused.exit_code == 2
    assert "--accepted, --batch-size would change them" in refused.output and "stored settings" in refused.output
    moved = runner.invoke(app, ["calibrate", "--resume", str(run), "--base-url", "http://x/v1"])
    assert moved.exit_code == 2 and "would pay every finished call again. Resume without --base-url" in " ".join(
        moved.output.split())
    resumed = runner.invoke(app, ["calibrate", "--resume", str(run), "--parallel-criteria", "1", "--max-concurrency", "3"])
    assert resumed.exit_code == 0, resumed.output
    assert endpoint.calls == calls  # everything came from the cache


def test_the_cache_location_is_recorded_so_a_resume_under_another_cache_dir_pays_nothing(
        tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "first"))
    run = _small_run(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint)
    stored = json.loads((run / "config.json").read_text())
    assert stored["cache_path"] == str(tmp_path / "first" / "responses.sqlite")
    (run / "report.md").unlink()
    calls = endpoint.calls
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "second"))
    resumed = runner.invoke(app, ["calibrate", "--resume", str(run)])
    assert resumed.exit_code == 0, resumed.output
    assert endpoint.calls == calls and (run / "report.md").is_file()


def test_a_run_made_before_the_cache_path_was_recorded_still_resumes(tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                                     endpoint, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    run = _small_run(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint)
    stored = json.loads((run / "config.json").read_text())
    stored["cache_path"] = None  # as written by earlier versions
    (run / "config.json").write_text(json.dumps(stored))
    calls = endpoint.calls
    resumed = runner.invoke(app, ["calibrate", "--resume", str(run)])
    assert resumed.exit_code == 0, resumed.output
    assert endpoint.calls == calls


def test_a_command_run_in_process_gives_the_callers_sigterm_handler_back(tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                                          monkeypatch):
    """The CLI turns SIGTERM into Ctrl-C while a run works; a process that runs a command
    in-process (a test, a notebook) has its own handler again afterwards, even after a failure."""
    import signal

    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    mine = signal.getsignal(signal.SIGTERM)
    with _Endpoint(fail_after=0) as endpoint:  # every call answered HTTP 400: the run stops at once
        result = runner.invoke(app, ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir),
                                     "--run-id", "r", "--archives-dir", str(tmp_path / "archives"),
                                     "--base-url", endpoint.base_url, "--model", "scripted", "--accepted", "1",
                                     "--max-attempts", "2", "--batch-size", "1", "--no-audit"])
    assert result.exit_code == 2 and endpoint.calls > 0, result.output  # it ran, and failed in words
    assert signal.getsignal(signal.SIGTERM) is mine


def test_the_selection_help_states_the_configured_finalists_and_seeds():
    """The help is written out (the command line loads no configuration for --help); it must say
    what the defaults are."""
    import typer.main

    from evolve.config import SelectionSettings

    command = typer.main.get_command(app).commands["calibrate"]  # type: ignore[attr-defined]
    (selection,) = [p for p in command.params if "--selection" in p.opts]
    defaults = SelectionSettings()
    assert f"the {defaults.finalists} best mutants on training with {defaults.finalist_repeats} fresh seeds" in selection.help
