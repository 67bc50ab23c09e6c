"""``--max-usd`` / ``--max-tokens`` through the command line (issue 25, item 1b): a run stops
cleanly before a call would pass the limit, says how to continue, and a resume with a higher
limit pays nothing twice (requests counted at a loopback server)."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import load_pack, write_pack
from evolve.outputs import BenchReport
from evolve.runs import Journal
from evolve.splits import make_splits, write_splits
from evolve.testing import LoopbackChatServer, chat_completion
from tests.conftest import fake_endpoint, make_tiny_pack, request_of

runner = CliRunner()
PER_CALL = 50 + 10  # the loopback answer's prompt and completion tokens


def _answer(body: dict) -> object:
    return 200, chat_completion(fake_endpoint(request_of(body)), prompt_tokens=50, completion_tokens=10, cached_tokens=20)


def _inputs(tmp_path):
    pack, splits = tmp_path / "pack", tmp_path / "splits"
    write_pack(make_tiny_pack(20), pack)
    write_splits(make_splits(load_pack(pack), holdout_fraction=0.0, validation_fraction=0.5, seed=3), splits)
    return pack, splits


def _calibrate(pack, splits, archives, url, run_id, *extra):
    return runner.invoke(app, ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", run_id,
                               "--archives-dir", str(archives), "--base-url", url, "--model", "scripted",
                               "--accepted", "1", "--max-attempts", "2", "--batch-size", "1", "--train-repeats", "1",
                               "--no-audit", *extra])  # few calls: the limits, not the search, are tested


def test_calibrate_stops_at_max_tokens_and_resumes_with_a_higher_limit_paying_nothing_twice(tmp_path, monkeypatch):
    pack, splits = _inputs(tmp_path)
    with LoopbackChatServer(_answer) as whole:
        monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-whole"))
        assert _calibrate(pack, splits, tmp_path / "a", whole.base_url, "whole").exit_code == 0
    uninterrupted = len(whole.bodies)

    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-limited"))
    archives = tmp_path / "b"
    limit = uninterrupted // 3 * PER_CALL
    with LoopbackChatServer(_answer) as server:
        stopped = _calibrate(pack, splits, archives, server.base_url, "cal", "--max-tokens", str(limit))
        assert stopped.exit_code == 2, stopped.output
        said = " ".join(stopped.output.split())
        assert "--max-tokens" in said and "spending limit" in said
        assert f"evolve calibrate --resume {archives / 'cal'} --max-tokens MORE" in said  # the limit it reached
        first = len(server.bodies)
        assert 0 < first * PER_CALL <= limit
        assert not (archives / "cal" / "report.md").exists()
        resumed = runner.invoke(app, ["calibrate", "--resume", str(archives / "cal"), "--max-tokens", str(10 * limit)])
        assert resumed.exit_code == 0, resumed.output
    assert len(server.bodies) == uninterrupted  # the stop and the resume together: an uninterrupted run's requests
    print(f"uninterrupted calibration: {uninterrupted} requests; stopped after {first} at {limit} tokens")
    spend = json.loads((archives / "cal" / "report.json").read_text())["usage"]["spend"]
    assert spend["max_tokens"] == 10 * limit and spend["stopped_at_limit"] == 1
    assert spend["spent"]["calls"] == uninterrupted and spend["spent"]["cached_prompt_tokens"] == 20 * uninterrupted


def test_max_usd_needs_prices_and_is_refused_before_any_call(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = _inputs(tmp_path)
    with LoopbackChatServer(_answer) as server:
        refused = _calibrate(pack, splits, tmp_path / "a", server.base_url, "cal", "--max-usd", "1")
        bad = _calibrate(pack, splits, tmp_path / "a", server.base_url, "cal2", "--max-tokens", "-5")
    assert refused.exit_code == 2 and "needs prices" in " ".join(refused.output.split())
    assert bad.exit_code == 2 and "-5 is out of range" in bad.output
    assert server.bodies == []


def test_max_usd_with_cached_input_price_stops_and_the_report_prices_cached_tokens(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = _inputs(tmp_path)
    archives = tmp_path / "a"
    # one call: 30 uncached prompt tokens at $100/M + 20 cached at $10/M + 10 out at $200/M = $0.0052
    per_call = (30 * 100 + 20 * 10 + 10 * 200) / 1e6
    prices = ["--price-in", "100", "--price-out", "200", "--price-cached-in", "10"]
    with LoopbackChatServer(_answer) as server:
        stopped = _calibrate(pack, splits, archives, server.base_url, "cal", *prices, "--max-usd", "0.3")
        assert stopped.exit_code == 2, stopped.output
        assert "--max-usd 0.3" in " ".join(stopped.output.split())
        first = len(server.bodies)
        assert 0 < first * per_call <= 0.3
        resumed = runner.invoke(app, ["calibrate", "--resume", str(archives / "cal"), *prices, "--max-usd", "1000"])
        assert resumed.exit_code == 0, resumed.output
    spend = json.loads((archives / "cal" / "report.json").read_text())["usage"]["spend"]
    assert spend["spent"]["calls"] == len(server.bodies)
    assert abs(spend["usd"] - len(server.bodies) * per_call) < 1e-9  # cached prompt tokens at the cached-input price
    assert spend["price"]["cached_input_usd_per_m"] == 10 and spend["max_usd"] == 1000
    assert "### Spending" in (archives / "cal" / "report.md").read_text()


def test_evolve_judge_stops_at_max_tokens_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = _inputs(tmp_path)
    archives = tmp_path / "a"
    with LoopbackChatServer(_answer) as server:  # one server: its URL is part of every cache key
        assert _calibrate(pack, splits, archives, server.base_url, "cal").exit_code == 0
        shutil.copytree(tmp_path / "cache", tmp_path / "cache2")  # the calibration's cache, for the limited run
        args = ["judge", str(pack), "--judge", str(archives / "cal"), "--archives-dir", str(archives),
                "--base-url", server.base_url, "--run-id"]
        calibrated = len(server.bodies)
        whole = runner.invoke(app, [*args, "whole"])  # every call, to count them
        assert whole.exit_code == 0, whole.output
        needed = len(server.bodies) - calibrated
        assert needed > 4

        monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache2"))
        limit, before = needed // 2 * PER_CALL, len(server.bodies)
        stopped = runner.invoke(app, [*args, "scored", "--max-tokens", str(limit)])
        assert stopped.exit_code == 2, stopped.output
        said = " ".join(stopped.output.split())
        assert "spending limit" in said and "--max-tokens" in said and "--resume" in said
        first = len(server.bodies) - before
        assert 0 < first * PER_CALL <= limit
        resumed = runner.invoke(app, [*args, "scored", "--max-tokens", str(10 * limit), "--resume"])
        assert resumed.exit_code == 0, resumed.output
        assert len(server.bodies) - before == needed  # the calls paid before the stop were not paid again
    events = [e["event"] for e in Journal(archives / "scored" / "journal.jsonl").events()]
    assert events.count("spend_limit_reached") == 1
    spend = json.loads((archives / "scored" / "summary.json").read_text())["spend"]
    assert spend["stopped_at_limit"] == 1 and spend["spent"]["calls"] == needed and spend["max_tokens"] == 10 * limit
    assert "The run stopped at its limit 1 time" in (archives / "scored" / "report.md").read_text()


def test_bench_judge_stops_at_max_tokens_and_a_rerun_with_more_pays_nothing_twice(tmp_path, monkeypatch):
    from tests.cli.test_cli_bench import respond
    from tests.consilium.bench_support import write_cases

    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    cases = write_cases(tmp_path / "cases.jsonl", n=2)
    run = tmp_path / "archives" / "b"
    with LoopbackChatServer(respond) as server:
        generated = runner.invoke(app, ["bench", "run", "--cases", str(cases), "--run-id", "b", "--archives-dir",
                                        str(tmp_path / "archives"), "--base-url", server.base_url, "--model", "scripted",
                                        "--max-cases", "1", "--no-judge"])
        assert generated.exit_code == 0, generated.output
        before = len(server.bodies)
        stopped = runner.invoke(app, ["bench", "judge", str(run), "--max-tokens", "1"])
        assert stopped.exit_code == 2, stopped.output
        said = " ".join(stopped.output.split())
        assert "spending limit" in said and f"evolve bench judge {run}" in said
        assert len(server.bodies) == before  # the first call could pass 1 token: nothing sent
        judged = runner.invoke(app, ["bench", "judge", str(run), "--max-tokens", "100000000"])
        assert judged.exit_code == 0, judged.output
        paid = len(server.bodies) - before
        again = runner.invoke(app, ["bench", "judge", str(run), "--max-tokens", "100000000"])
        assert again.exit_code == 0, again.output
    assert paid > 0 and len(server.bodies) - before == paid  # the rerun is all cache hits
    assert (run / "judge_scores.csv").exists()


def test_bench_run_stops_at_max_tokens_and_resumes_to_an_uninterrupted_runs_requests(tmp_path, monkeypatch):
    from tests.cli.test_cli_bench import respond
    from tests.consilium.bench_support import write_cases

    cases = write_cases(tmp_path / "cases.jsonl", n=2)

    def bench(server, run_id, *extra):
        return runner.invoke(app, ["bench", "run", "--cases", str(cases), "--run-id", run_id, "--archives-dir",
                                   str(tmp_path / "archives"), "--base-url", server.base_url, "--model", "scripted",
                                   "--max-cases", "1", *extra])

    with LoopbackChatServer(respond) as server:
        monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-whole"))
        assert bench(server, "whole").exit_code == 0
        uninterrupted = len(server.bodies)
        tokens = sum(int(e.get("usage", {}).get(tag, {}).get("billed_prompt_tokens", 0))
                     + int(e.get("usage", {}).get(tag, {}).get("billed_completion_tokens", 0))
                     for e in Journal(tmp_path / "archives" / "whole" / "journal.jsonl").events()
                     if e.get("event") == "usage" and "final" not in e for tag in e.get("usage", {}))
        assert tokens > 0
        monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache-limited"))
        stopped = bench(server, "b", "--max-tokens", str(tokens // 2))
        assert stopped.exit_code == 2, stopped.output
        said = " ".join(stopped.output.split())
        assert "spending limit" in said and "evolve bench run --resume" in said
        first = len(server.bodies) - uninterrupted
        assert 0 < first < uninterrupted
        resumed = runner.invoke(app, ["bench", "run", "--resume", str(tmp_path / "archives" / "b"), "--max-tokens",
                                      str(10 * tokens)])
        assert resumed.exit_code == 0, resumed.output
        assert len(server.bodies) - uninterrupted == uninterrupted  # the stop and the resume: nothing paid twice
    report = BenchReport.model_validate_json((tmp_path / "archives" / "b" / "bench_report.json").read_text())
    assert report.usage is not None and report.usage.spend is not None
    assert report.usage.spend.stopped_at_limit == 1 and report.usage.spend.max_tokens == 10 * tokens


def test_otb_run_and_judge_take_the_limits(tmp_path):
    from tests.otb.test_cli_otb import EXAMPLE, respond

    env = {"EVOLVE_CACHE_DIR": str(tmp_path / "cache")}
    run = tmp_path / "archives" / "o"
    with LoopbackChatServer(respond) as server:
        stopped = runner.invoke(app, ["otb", "run", "--turn", str(EXAMPLE / "task2_example.jsonl"), "--base-url",
                                      server.base_url, "--model", "scripted", "--max-items", "4", "--run-id", "o",
                                      "--archives-dir", str(tmp_path / "archives"), "--max-tokens", "1"], env=env)
        assert stopped.exit_code == 2, stopped.output
        assert f"evolve otb run --resume {run} --max-tokens MORE" in " ".join(stopped.output.split())
        assert server.bodies == []  # no call fits in one token: none was sent
        refused = runner.invoke(app, ["otb", "run", "--resume", str(run), "--max-usd", "5"], env=env)
        assert refused.exit_code == 2 and "needs prices" in " ".join(refused.output.split())
        still = runner.invoke(app, ["otb", "run", "--resume", str(run), "--max-usd", "5", "--price-in", "1",
                                    "--price-out", "2"], env=env)
        assert still.exit_code == 2, still.output  # the stored --max-tokens 1 still holds: raise it to continue
        assert server.bodies == []
        resumed = runner.invoke(app, ["otb", "run", "--resume", str(run), "--max-usd", "5", "--price-in", "1",
                                      "--price-out", "2", "--max-tokens", "100000000"], env=env)
        assert resumed.exit_code == 0, resumed.output
        paid = len(server.bodies)
        judged = runner.invoke(app, ["otb", "judge", str(run), "--max-tokens", "1"], env=env)
        assert judged.exit_code == 0, judged.output  # every judge call is a cache hit: free, never refused
    assert paid > 0 and len(server.bodies) == paid
    spend = json.loads((run / "otb_report.json").read_text())["usage"]["spend"]
    assert spend["spent"]["calls"] == paid and spend["usd"] is not None and spend["stopped_at_limit"] == 2


def test_audit_takes_the_limits_and_a_stopped_audit_continues_with_a_higher_one(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = _inputs(tmp_path)
    run = tmp_path / "a" / "cal"
    with LoopbackChatServer(_answer) as server:
        assert _calibrate(pack, splits, tmp_path / "a", server.base_url, "cal").exit_code == 0
        before = len(server.bodies)
        stopped = runner.invoke(app, ["audit", str(run), "--no-embeddings", "--max-tokens", "1"])
        assert stopped.exit_code == 2, stopped.output
        assert f"evolve audit {run} --max-tokens MORE" in " ".join(stopped.output.split())
        assert len(server.bodies) == before  # nothing fits in one token: nothing sent
        audited = runner.invoke(app, ["audit", str(run), "--no-embeddings", "--max-tokens", "100000000"])
        assert audited.exit_code == 0, audited.output
    assert len(server.bodies) > before and (run / "audit.json").exists()


def _bench_answer(body: dict) -> object:
    """The scripted consilium endpoint, every answer billed 50 + 10 tokens."""
    from tests.cli.test_cli_bench import respond

    return 200, chat_completion(respond(body), prompt_tokens=50, completion_tokens=10)


def _judged_with(run) -> tuple[object, int]:
    """The judge file and repeats a bench run's judge.json records."""
    meta = json.loads((run / "judge.json").read_text("utf-8"))
    return meta["calibration_run"], meta["repeats"]


def test_a_stopped_bench_run_resumes_judging_with_the_guidance_it_was_started_with(tmp_path, monkeypatch):
    from tests.consilium.bench_support import write_cases
    from tests.report.test_bench_anchored import _judge_file

    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    guidance = _judge_file(tmp_path / "calib", judge_model="scripted").parent
    run = tmp_path / "archives" / "g"
    with LoopbackChatServer(_bench_answer) as server:
        args = ["bench", "run", "--cases", str(write_cases(tmp_path / "cases.jsonl", n=2)), "--run-id", "g",
                "--archives-dir", str(tmp_path / "archives"), "--base-url", server.base_url, "--model", "scripted",
                "--guidance", str(guidance)]
        stopped = runner.invoke(app, [*args, "--max-tokens", str(3 * PER_CALL)])  # stops while generating
        assert stopped.exit_code == 2 and "evolve bench run --resume" in stopped.output, stopped.output
        resumed = runner.invoke(app, ["bench", "run", "--resume", str(run), "--max-tokens", str(10**9)])
        assert resumed.exit_code == 0, resumed.output
    assert f"judging with the guidance this run was judged (or started) with: {guidance}" in " ".join(resumed.output.split())
    assert _judged_with(run)[0] == str(guidance) and (run / "calibrated_judge.json").is_file()
    scores = json.loads((run / "judge.json").read_text("utf-8"))["guidance"]
    assert set(scores) == {"data_use"}


def test_a_stopped_bench_judging_continues_with_its_settings_and_an_unguided_one_is_warned_about(tmp_path, monkeypatch):
    from tests.consilium.bench_support import write_cases
    from tests.report.test_bench_anchored import _judge_file

    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    guidance = _judge_file(tmp_path / "calib", judge_model="scripted")
    run = tmp_path / "archives" / "j"
    with LoopbackChatServer(_bench_answer) as server:
        made = runner.invoke(app, ["bench", "run", "--cases", str(write_cases(tmp_path / "cases.jsonl", n=2)),
                                   "--run-id", "j", "--archives-dir", str(tmp_path / "archives"),
                                   "--base-url", server.base_url, "--model", "scripted", "--no-judge"])
        assert made.exit_code == 0, made.output
        generated = len(server.bodies) * PER_CALL
        stopped = runner.invoke(app, ["bench", "judge", str(run), "--guidance", str(guidance), "--repeats", "2",
                                      "--price-in", "1", "--price-out", "2", "--max-tokens", str(generated + 5 * PER_CALL)])
        assert stopped.exit_code == 2, stopped.output
        hint = f"evolve bench judge {run} --guidance {guidance} --repeats 2 --price-in 1.0 --price-out 2.0 --max-tokens MORE"
        assert hint in " ".join(stopped.output.split())  # the command that continues it, with its settings
        paid = len(server.bodies)
        continued = runner.invoke(app, ["bench", "judge", str(run), "--max-tokens", str(10**9)])
        assert continued.exit_code == 0, continued.output
        said = " ".join(continued.output.split())
        assert f"note: continuing the judging that stopped part-way with its settings: guidance {guidance}, 2 repeat(s)" in said
        assert _judged_with(run) == (str(guidance), 2)
        judged = len(server.bodies) - paid
        again = runner.invoke(app, ["bench", "judge", str(run), "--guidance", str(guidance), "--repeats", "2"])
        assert again.exit_code == 0 and len(server.bodies) - paid == judged  # all of it cached: nothing paid twice
        unguided = runner.invoke(app, ["bench", "judge", str(run)])
        assert unguided.exit_code == 0, unguided.output
    assert f"were judged with the guidance of {guidance}; this judging has none and replaces them" in " ".join(
        unguided.output.split())
    assert _judged_with(run) == (None, 1)
