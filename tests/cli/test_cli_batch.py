"""``--batch`` through the command line (issue 25, item 2), against the loopback server's fake
Batch API: a calibration and an ``evolve judge`` run complete through it; a process killed
with SIGKILL after its batch id was journaled is resumed by polling that batch (not submitting
it again), and no request is paid twice (lines and interactive requests counted at the server)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import load_pack, write_pack
from evolve.report import spend_report
from evolve.runs import Journal
from evolve.splits import make_splits, write_splits
from evolve.testing import BatchScript, LoopbackChatServer
from tests.conftest import fake_endpoint, make_tiny_pack, request_of

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def _answer(body: dict) -> str:
    return fake_endpoint(request_of(body))


def _inputs(tmp_path: Path, n: int = 20, holdout: float = 0.0) -> tuple[Path, Path]:
    pack, splits = tmp_path / "pack", tmp_path / "splits"
    write_pack(make_tiny_pack(n), pack)
    write_splits(make_splits(load_pack(pack), holdout_fraction=holdout, validation_fraction=0.5, seed=3), splits)
    return pack, splits


CAL_OPTIONS = ["--model", "scripted", "--accepted", "1", "--max-attempts", "2", "--batch-size", "1", "--train-repeats", "1",
               "--no-audit"]  # few calls: the batch route, not the search, is tested


def _calibrate_args(pack: Path, splits: Path, archives: Path, url: str, run_id: str, *extra: str) -> list[str]:
    return ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", run_id, "--archives-dir",
            str(archives), "--base-url", url, *CAL_OPTIONS, *extra]


def _events(run_dir: Path, name: str) -> list[dict]:
    return [e for e in Journal(run_dir / "journal.jsonl").events() if e.get("event") == name]


def _paid(server: LoopbackChatServer) -> int:
    """Requests the server answered: interactive ones plus batch lines."""
    return len(server.bodies) + len(server.batch_answered)


def test_calibrate_through_the_batch_api_pays_what_an_interactive_run_pays(tmp_path, monkeypatch):
    pack, splits = _inputs(tmp_path)
    with LoopbackChatServer(_answer) as plain:
        monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-plain"))
        done = runner.invoke(app, _calibrate_args(pack, splits, tmp_path / "a", plain.base_url, "plain"))
        assert done.exit_code == 0, done.output
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-batch"))
    with LoopbackChatServer(_answer, BatchScript(polls_in_progress=0)) as server:
        run = runner.invoke(app, _calibrate_args(pack, splits, tmp_path / "b", server.base_url, "cal", "--batch",
                                                 "--price-in", "1", "--price-out", "2", "--price-batch-in", "0.5",
                                                 "--price-batch-out", "1", "--max-usd", "1000"))
        assert run.exit_code == 0, run.output
        assert "submitted" in " ".join(run.output.split())  # calibrate prints the batch notes too
    run_dir = tmp_path / "b" / "cal"
    spend = spend_report(Journal(run_dir / "journal.jsonl"))["spent"]  # batch calls priced at the batch prices
    batch_prompt, batch_completion = spend["batch_prompt_tokens"], spend["batch_completion_tokens"]
    assert batch_prompt == 50 * len(server.batch_answered) and batch_completion == 10 * len(server.batch_answered)
    expected = ((spend["prompt_tokens"] - batch_prompt) * 1 + (spend["completion_tokens"] - batch_completion) * 2
                + batch_prompt * 0.5 + batch_completion * 1) / 1e6
    assert spend_report(Journal(run_dir / "journal.jsonl"))["usd"] == pytest.approx(expected)
    submitted, finished = _events(run_dir, "batch_submitted"), _events(run_dir, "batch_finished")
    # initial evaluation, finalists and re-evaluation per criterion
    assert len(submitted) == len(server.batches) == len(finished) >= 3
    assert all(f["status"] == "completed" for f in finished)
    assert not any(n > 1 for n in Counter(server.batch_answered).values())  # no line answered twice
    assert _paid(server) == len(plain.bodies)  # the same calls, part of them by batch
    assert 0 < len(server.bodies) < len(plain.bodies)  # racing and mutation stayed interactive
    mutations = [b for b in server.bodies if "judge" not in json.dumps(b.get("response_format") or {})]
    assert mutations, "the mutation calls went interactively"
    report = (run_dir / "report.md").read_text()
    assert "judge (batch)" in report  # batch calls counted apart (priced at batch prices)
    assert json.loads((run_dir / "config.json").read_text())["endpoint"]["batch"] is True
    # the same winners as the interactive run: the batch changes no answer
    assert _winners(tmp_path / "a" / "plain") == _winners(run_dir)


def _winners(run_dir: Path) -> list[tuple]:
    return sorted((e["criterion"], e["candidate_id"], e["train_mae"]) for e in _events(run_dir, "winner_selected"))


def test_judge_through_the_batch_api_and_resume_pays_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = _inputs(tmp_path)
    archives = tmp_path / "archives"
    with LoopbackChatServer(_answer, BatchScript(polls_in_progress=0)) as server:
        cal = runner.invoke(app, _calibrate_args(pack, splits, archives, server.base_url, "cal"))
        assert cal.exit_code == 0, cal.output
        before = len(server.bodies)
        args = ["judge", str(pack), "--judge", str(archives / "cal"), "--run-id", "scored", "--archives-dir",
                str(archives), "--base-url", server.base_url, "--batch"]
        scored = runner.invoke(app, args)
        assert scored.exit_code == 0, scored.output
        said = " ".join(scored.output.split())
        assert "note: batch batch-" in said and "submitted" in said and "completed: " in said  # the user sees the wait
        assert len(server.bodies) == before  # every judge call went by batch (none was cached from calibration)
        assert len(server.batches) == 1 and server.batch_answered
        answered = len(server.batch_answered)
        again = runner.invoke(app, args + ["--resume"])
        assert again.exit_code == 0, again.output
        assert len(server.bodies) == before and len(server.batch_answered) == answered and len(server.batches) == 1
    journal = _events(archives / "scored", "batch_submitted")
    assert len(journal) == 1 and journal[0]["lines"] == answered


def test_batch_with_the_embedded_model_is_refused_before_anything_runs(tmp_path):
    pack, splits = _inputs(tmp_path)
    result = runner.invoke(app, ["calibrate", "--pack", str(pack), "--splits", str(splits), "--archives-dir",
                                 str(tmp_path / "a"), "--batch"])
    assert result.exit_code != 0 and "--batch needs an endpoint with a Batch API" in result.output.replace("\n", " ")
    assert "Traceback" not in result.output and not (tmp_path / "a").exists()


def _spawn(args: list[str], cache: Path) -> subprocess.Popen:
    env = {**os.environ, "EVOLVE_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    code = "import sys; from evolve.cli import main; sys.argv = ['evolve'] + sys.argv[1:]; main()"
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _wait_for_batch(run_dir: Path, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (run_dir / "journal.jsonl").is_file() and _events(run_dir, "batch_submitted"):
            return
        if process.poll() is not None:
            raise AssertionError(f"the run ended before submitting a batch: {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.2)
    raise AssertionError("no batch_submitted in the journal in time")


@pytest.mark.slow  # an evolve process, killed and resumed (~10 s of CPU)
def test_kill_9_between_submit_and_completion_then_resume_polls_the_batch(tmp_path, monkeypatch):
    """The done-when of issue 25 for a calibration: SIGKILL while the first batch (the initial
    evaluation) is in progress; --resume polls that batch, submits no line twice and pays no
    line twice; the whole costs what an uninterrupted batch run costs."""
    pack, splits = _inputs(tmp_path)
    with LoopbackChatServer(_answer, BatchScript(polls_in_progress=0)) as whole:
        monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-whole"))
        assert runner.invoke(app, _calibrate_args(pack, splits, tmp_path / "a", whole.base_url, "whole",
                                                  "--batch")).exit_code == 0
    cache = tmp_path / "cache-killed"
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(cache))
    archives = tmp_path / "b"
    run_dir = archives / "cal"
    with LoopbackChatServer(_answer, BatchScript(hold=True)) as server:
        process = _spawn(_calibrate_args(pack, splits, archives, server.base_url, "cal", "--batch"), cache)
        try:
            _wait_for_batch(run_dir, process)
            time.sleep(0.5)  # it is polling now
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == -signal.SIGKILL
        (submitted,) = _events(run_dir, "batch_submitted")
        assert not _events(run_dir, "batch_finished") and not server.batch_answered
        server.batch_script.hold = False
        server.batch_script.polls_in_progress = 0
        resumed = runner.invoke(app, ["calibrate", "--resume", str(run_dir)])
        assert resumed.exit_code == 0, resumed.output
    lines = [line["custom_id"] for line in server.batch_lines]
    assert len(lines) == len(set(lines))  # no line submitted twice
    assert not any(n > 1 for n in Counter(server.batch_answered).values())  # none paid twice
    assert _events(run_dir, "batch_finished")[0]["batch_id"] == submitted["batch_id"]  # the killed run's batch, polled
    assert _paid(server) == _paid(whole) and len(server.batches) == len(whole.batches)
    assert (run_dir / "report.md").is_file()


@pytest.mark.slow  # an evolve process, killed and resumed (~13 s of CPU)
def test_kill_9_of_evolve_judge_then_resume_pays_no_line_twice(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(cache))
    pack, splits = _inputs(tmp_path)
    archives = tmp_path / "archives"
    with LoopbackChatServer(_answer, BatchScript(hold=True)) as server:
        assert runner.invoke(app, _calibrate_args(pack, splits, archives, server.base_url, "cal")).exit_code == 0
        interactive = len(server.bodies)
        args = ["judge", str(pack), "--judge", str(archives / "cal"), "--run-id", "scored", "--archives-dir",
                str(archives), "--base-url", server.base_url, "--batch"]
        process = _spawn(args, cache)
        try:
            _wait_for_batch(archives / "scored", process)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        server.batch_script.hold = False
        # resumed even with --no-batch: the batch the killed process paid for is still polled and read
        resumed = runner.invoke(app, [a for a in args if a != "--batch"] + ["--no-batch", "--resume"])
        assert resumed.exit_code == 0, resumed.output
    assert len(server.batches) == 1 and len(server.bodies) == interactive  # polled, not resubmitted; nothing interactive
    assert sorted(server.batch_answered) == sorted(line["custom_id"] for line in server.batch_lines)
    assert (archives / "scored" / "report.md").is_file()


def _run_batch_offline(requests: Path, output: Path, answer=_answer) -> None:
    """What vLLM's run_batch does with a request file: one output line per request line."""
    from evolve.testing import chat_completion

    lines = [json.loads(x) for x in requests.read_text().splitlines() if x.strip()]
    output.write_text("".join(json.dumps({"id": f"vllm-{i}", "custom_id": line["custom_id"], "error": None,
                                          "response": {"status_code": 200, "request_id": f"r{i}",
                                                       "body": chat_completion(answer(line["body"]))}}) + "\n"
                              for i, line in enumerate(lines)))


def test_export_run_offline_import_then_the_calibration_does_not_send_them(tmp_path, monkeypatch):
    pack, splits = _inputs(tmp_path)
    with LoopbackChatServer(_answer) as plain:
        monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-plain"))
        assert runner.invoke(app, _calibrate_args(pack, splits, tmp_path / "a", plain.base_url, "p")).exit_code == 0
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    requests, output = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    with LoopbackChatServer(_answer) as server:
        args = _calibrate_args(pack, splits, tmp_path / "b", server.base_url, "cal")
        exported = runner.invoke(app, [*args, "--export-batch", str(requests)])
        assert exported.exit_code == 0, exported.output
        assert "vllm.entrypoints.openai.run_batch" in exported.output and not server.bodies
        assert not (tmp_path / "b").exists()  # nothing but the file written
        lines = [json.loads(x) for x in requests.read_text().splitlines()]
        assert lines and all(x["url"] == "/v1/chat/completions" and x["method"] == "POST" for x in lines)
        _run_batch_offline(requests, output)
        imported = runner.invoke(app, ["batch", "import", str(output), "--requests", str(requests)])
        assert imported.exit_code == 0, imported.output
        assert f"{len(lines)} answer(s) cached" in imported.output
        run = runner.invoke(app, args)
        assert run.exit_code == 0, run.output
    sent = {json.dumps(b, sort_keys=True) for b in server.bodies}
    assert not sent & {json.dumps(x["body"], sort_keys=True) for x in lines}  # none of them sent again
    assert len(server.bodies) == len(plain.bodies) - len(lines)


def test_judge_export_import_pays_nothing_and_bad_answers_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = _inputs(tmp_path)
    archives = tmp_path / "archives"
    requests, output = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    with LoopbackChatServer(_answer) as server:
        assert runner.invoke(app, _calibrate_args(pack, splits, archives, server.base_url, "cal")).exit_code == 0
        before = len(server.bodies)
        args = ["judge", str(pack), "--judge", str(archives / "cal"), "--run-id", "scored", "--archives-dir",
                str(archives), "--base-url", server.base_url]
        assert runner.invoke(app, [*args, "--export-batch", str(requests)]).exit_code == 0
        n = len(requests.read_text().splitlines())
        _run_batch_offline(requests, output, answer=lambda body: '{"score": "not a number"}')
        refused = runner.invoke(app, ["batch", "import", str(output), "--requests", str(requests)])
        assert refused.exit_code == 0 and f"0 answer(s) cached, 0 already in the cache, {n} refused" in refused.output
        _run_batch_offline(requests, output)
        good = runner.invoke(app, ["batch", "import", str(output), "--requests", str(requests)]).output
        cached, already = (int(x) for x in re.match(r"(\d+) answer\(s\) cached, (\d+) already", good).groups())
        assert cached > 0 and cached + already == n  # the calibration had cached some of them already
        scored = runner.invoke(app, args)
        assert scored.exit_code == 0, scored.output
        assert len(server.bodies) == before  # every judge call came from the imported answers
    missing = runner.invoke(app, ["batch", "import", str(tmp_path / "nope.jsonl"), "--requests", str(requests)])
    assert missing.exit_code != 0 and "nope.jsonl" in missing.output and "Traceback" not in missing.output
    embedded = runner.invoke(app, ["judge", str(pack), "--judge", str(archives / "cal"), "--export-batch",
                                   str(tmp_path / "x.jsonl")])
    assert embedded.exit_code != 0 and "--base-url" in embedded.output and "Traceback" not in embedded.output


def test_an_import_names_every_line_it_cannot_read_and_the_requests_left_unanswered(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = _inputs(tmp_path)
    requests, output = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    with LoopbackChatServer(_answer) as server:
        args = _calibrate_args(pack, splits, tmp_path / "a", server.base_url, "cal")
        assert runner.invoke(app, [*args, "--export-batch", str(requests)]).exit_code == 0
    _run_batch_offline(requests, output)
    answered = output.read_text().splitlines()
    n = len(answered)
    error = json.dumps({"custom_id": json.loads(answered[1])["custom_id"], "response": None,
                        "error": {"code": "batch_expired", "message": "late"}})
    kept = [answered[0], "not json at all", "[1, 2]", error, answered[2][:40], json.dumps({"no": "id"}), "", answered[3]]
    output.write_text("\n".join(kept) + "\n")
    imported = runner.invoke(app, ["batch", "import", str(output), "--requests", str(requests)])
    assert imported.exit_code == 0, imported.output
    text = " ".join(imported.output.split())
    assert ("2 answer(s) cached, 0 already in the cache, 0 refused (cut or outside the schema sent: asked again by the "
            "run), 1 failed line(s), 4 unreadable line(s), 0 line(s) not in the request file") in text  # 7 lines
    assert f"{n - 3} request(s) of the request file have no answer in this file" in text
    for number, why in ((2, "not JSON"), (3, "not a JSON object with a custom_id"), (4, "batch_expired: late"),
                        (5, "not JSON"), (6, "not a JSON object with a custom_id")):
        assert f"{output}, line {number}: {why}" in text, (number, text)
    assert "Traceback" not in imported.output
    for content in ("", "\n\n", "garbage\n{}\n"):
        output.write_text(content)
        refused = runner.invoke(app, ["batch", "import", str(output), "--requests", str(requests)])
        assert refused.exit_code == 2 and "holds no batch output line" in refused.output, refused.output
        assert "nothing was imported" in refused.output and "Traceback" not in refused.output


def test_an_export_leaves_out_what_the_cache_already_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = _inputs(tmp_path)
    first, second, third = tmp_path / "first.jsonl", tmp_path / "second.jsonl", tmp_path / "third.jsonl"
    with LoopbackChatServer(_answer) as server:
        args = _calibrate_args(pack, splits, tmp_path / "a", server.base_url, "cal")
        assert runner.invoke(app, [*args, "--export-batch", str(first)]).exit_code == 0
        n = len(first.read_text().splitlines())
        assert runner.invoke(app, args).exit_code == 0  # answers every exported request interactively
        again = runner.invoke(app, [*_calibrate_args(pack, splits, tmp_path / "a", server.base_url, "other"),
                                    "--export-batch", str(second)])
        judged = runner.invoke(app, ["judge", str(pack), "--judge", str(tmp_path / "a" / "cal"), "--base-url",
                                     server.base_url, "--archives-dir", str(tmp_path / "a"), "--export-batch",
                                     str(third)])
    assert again.exit_code == 0 and not second.exists()
    assert f"nothing to export: the response cache already answers all {n} request(s)" in " ".join(again.output.split())
    assert judged.exit_code == 0, judged.output
    written = len(third.read_text().splitlines())  # the validation targets' calls are cached; the training ones not
    left_out = int(re.search(r"(\d+) request\(s\) left out: the response cache already answers them",
                             " ".join(judged.output.split())).group(1))
    assert written > 0 and left_out > 0


def test_bench_judge_through_the_batch_api(tmp_path, monkeypatch):
    from tests.cli.test_cli_bench import respond
    from tests.consilium.bench_support import write_cases

    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    cases = write_cases(tmp_path / "cases.jsonl", n=2)
    run = tmp_path / "archives" / "b"
    with LoopbackChatServer(respond, BatchScript(polls_in_progress=0)) as server:
        generated = runner.invoke(app, ["bench", "run", "--cases", str(cases), "--run-id", "b", "--archives-dir",
                                        str(tmp_path / "archives"), "--base-url", server.base_url, "--model", "scripted",
                                        "--max-cases", "1", "--no-judge"])
        assert generated.exit_code == 0, generated.output
        before = len(server.bodies)
        judged = runner.invoke(app, ["bench", "judge", str(run), "--batch"])
        assert judged.exit_code == 0, judged.output
        assert len(server.bodies) == before and len(server.batches) >= 1 and server.batch_answered
        again = runner.invoke(app, ["bench", "judge", str(run), "--batch"])
        assert again.exit_code == 0, again.output
    assert len(server.bodies) == before and len(set(server.batch_answered)) == len(server.batch_answered)
    assert (run / "judge_scores.csv").exists() and _events(run, "batch_submitted")


def test_otb_judge_through_the_batch_api(tmp_path):
    from tests.otb.test_cli_otb import EXAMPLE
    from tests.otb.test_cli_otb import respond as otb_respond

    with LoopbackChatServer(otb_respond, BatchScript(polls_in_progress=0)) as server:
        args = ["otb", "run", "--board", str(EXAMPLE / "task1_example.jsonl"), "--turn",
                str(EXAMPLE / "task2_example.jsonl"), "--base-url", server.base_url, "--model", "scripted",
                "--max-items", "10", "--run-id", "ex", "--archives-dir", str(tmp_path / "archives")]
        assert runner.invoke(app, args, env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")}).exit_code == 0
        before = len(server.bodies)
        run = tmp_path / "archives" / "ex"
        (tmp_path / "cache" / "responses.sqlite").unlink()  # the run keeps its answers; the judge calls are asked again
        judged = runner.invoke(app, ["otb", "judge", str(run), "--batch"], env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
        assert judged.exit_code == 0, judged.output
    assert len(server.bodies) == before  # the judge calls all went by batch
    assert len(server.batch_answered) == 10 and len(server.batches) == 1
    assert "10 judge calls (0 from the cache, 0 judge failures)" in judged.stdout
