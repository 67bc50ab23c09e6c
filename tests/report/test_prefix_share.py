"""Prefix reuse measured everywhere (issue 25 item 5): every scores file carries
``cached_prompt_tokens`` per call and every report gives the share of the prompt tokens sent that
the server served from its prefix cache - calibration, ``evolve judge``, the consilium bench and
OpenTumorBoard - against a loopback server that reports ``cached_tokens``."""

from __future__ import annotations

import json
from collections.abc import Callable

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import load_pack, write_pack
from evolve.report import prefix_cached_share, render_prefix_share
from evolve.splits import make_splits, write_splits
from evolve.testing import LoopbackChatServer, chat_completion
from tests.conftest import fake_endpoint, make_tiny_pack, request_of

runner = CliRunner()
PROMPT, CACHED = 200, 150  # every answer reports 150 of its 200 prompt tokens from the prefix cache: 75%


def _reporting_cache(respond: Callable[[dict], object]) -> Callable[[dict], object]:
    """``respond`` whose text answers report ``PROMPT`` prompt tokens, ``CACHED`` of them cached."""
    def wrapped(body: dict) -> object:
        reply = respond(body)
        if isinstance(reply, str):
            return 200, chat_completion(reply, prompt_tokens=PROMPT, completion_tokens=10, cached_tokens=CACHED)
        return reply
    return wrapped


def _sent_rows_report_the_cache(frame: pd.DataFrame) -> None:
    sent = frame[~frame["cached"].astype(str).eq("True") & (frame["prompt_tokens"] > 0)]
    assert len(sent) > 0
    assert (sent["cached_prompt_tokens"] == CACHED).all() and (sent["prompt_tokens"] == PROMPT).all()


def test_calibration_and_evolve_judge_record_cached_prompt_tokens_and_report_the_share(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits, archives = tmp_path / "pack", tmp_path / "splits", tmp_path / "archives"
    write_pack(make_tiny_pack(20), pack)
    write_splits(make_splits(load_pack(pack), holdout_fraction=0.0, validation_fraction=0.5, seed=3), splits)
    with LoopbackChatServer(_reporting_cache(lambda body: fake_endpoint(request_of(body)))) as endpoint:
        cal = runner.invoke(app, ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", "cal",
                                  "--archives-dir", str(archives), "--base-url", endpoint.base_url, "--model", "scripted",
                                  "--accepted", "1", "--max-attempts", "2", "--batch-size", "1", "--train-repeats", "1",
                                  "--no-audit"])  # few calls: the token accounting is tested
        assert cal.exit_code == 0, cal.output
        judged = runner.invoke(app, ["judge", str(pack), "--judge", str(archives / "cal"), "--run-id", "scored",
                                     "--archives-dir", str(archives), "--base-url", endpoint.base_url])
        assert judged.exit_code == 0, judged.output

    _sent_rows_report_the_cache(pd.read_csv(archives / "cal" / "scores.csv"))
    report = json.loads((archives / "cal" / "report.json").read_text())
    assert report["prefix_cached_share"] == pytest.approx(CACHED / PROMPT)
    assert all(c["prefix_cached_share"] == pytest.approx(CACHED / PROMPT) for c in report["criteria"].values())
    assert "prefix cache served 75% of the prompt tokens sent to the endpoint" in (archives / "cal" / "report.md").read_text()

    calls = pd.read_csv(archives / "scored" / "calls.csv")
    _sent_rows_report_the_cache(calls)
    summary = json.loads((archives / "scored" / "summary.json").read_text())
    # evolve judge re-asks the calibration's validation prompts: those come from the response
    # cache and are left out; the share is over the calls it sent
    assert summary["prefix_cached_share"] == pytest.approx(CACHED / PROMPT)
    assert "(`cached_prompt_tokens` per call in `calls.csv`" in (archives / "scored" / "report.md").read_text()


def test_bench_judge_scores_carry_cached_prompt_tokens_and_the_report_their_share(tmp_path, monkeypatch):
    from tests.cli.test_cli_bench import respond
    from tests.consilium.bench_support import write_cases

    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    cases = write_cases(tmp_path / "cases.jsonl", n=2)
    with LoopbackChatServer(_reporting_cache(respond)) as endpoint:
        result = runner.invoke(app, ["bench", "run", "--cases", str(cases), "--run-id", "b", "--archives-dir",
                                     str(tmp_path / "archives"), "--base-url", endpoint.base_url, "--model", "scripted",
                                     "--max-cases", "1"])
        assert result.exit_code == 0, result.output
    run = tmp_path / "archives" / "b"
    _sent_rows_report_the_cache(pd.read_csv(run / "judge_scores.csv"))
    assert json.loads((run / "bench_report.json").read_text())["prefix_cached_share"] == pytest.approx(CACHED / PROMPT)
    assert "(`cached_prompt_tokens` per call in `judge_scores.csv`" in (run / "bench_report.md").read_text()


def test_otb_judge_scores_carry_cached_prompt_tokens_and_the_report_their_share(tmp_path):
    from tests.otb.test_cli_otb import EXAMPLE, respond

    env = {"EVOLVE_CACHE_DIR": str(tmp_path / "cache")}
    with LoopbackChatServer(_reporting_cache(respond)) as endpoint:
        result = runner.invoke(app, ["otb", "run", "--turn", str(EXAMPLE / "task2_example.jsonl"), "--base-url",
                                     endpoint.base_url, "--model", "scripted", "--max-items", "4", "--run-id", "o",
                                     "--archives-dir", str(tmp_path / "archives")], env=env)
        assert result.exit_code == 0, result.output
    run = tmp_path / "archives" / "o"
    lines = [json.loads(line) for line in (run / "judge_scores.jsonl").read_text().splitlines() if line.strip()]
    assert lines and all(s["cached_prompt_tokens"] == CACHED for s in lines)
    assert json.loads((run / "otb_report.json").read_text())["prefix_cached_share"] == pytest.approx(CACHED / PROMPT)
    assert "(`cached_prompt_tokens` per call in `judge_scores.jsonl`" in (run / "otb_report.md").read_text()


def test_the_share_leaves_out_response_cache_hits_and_is_unknown_without_reports():
    rows = [
        {"prompt_tokens": 100, "cached_prompt_tokens": 90, "cached": False},
        {"prompt_tokens": 100, "cached_prompt_tokens": 10, "cached": False},
        {"prompt_tokens": 100, "cached_prompt_tokens": 0, "cached": True},  # not sent: left out
        {"prompt_tokens": 0, "cached_prompt_tokens": 0, "cached": False},  # a failed call
    ]
    assert prefix_cached_share(rows) == pytest.approx(0.5)
    assert prefix_cached_share(pd.DataFrame(rows).astype(str)) == pytest.approx(0.5)  # read with dtype=str
    assert prefix_cached_share([{**r, "cached_prompt_tokens": 0} for r in rows]) is None  # endpoint never reported it
    assert prefix_cached_share([{"prompt_tokens": 100, "cached": False}]) is None  # a file from before the column
    assert render_prefix_share(None, "scores.csv") == []
    assert render_prefix_share(0.5, "scores.csv")[0].startswith("The server's prefix cache served 50% of the prompt")


def test_the_bench_scores_contract_names_the_column():
    from evolve.consilium import JUDGE_SCORE_COLUMNS
    from evolve.report import JUDGE_SCORE_COLUMNS as REPORT_COLUMNS

    assert "cached_prompt_tokens" in JUDGE_SCORE_COLUMNS and REPORT_COLUMNS == JUDGE_SCORE_COLUMNS
