"""A calibration stopped at its spending limit (issue 25, item 1b): the run ends cleanly, leaves
a resumable folder and no report, and a resume with a higher limit pays nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.config import resolve_config
from evolve.errors import SpendLimitReachedError
from evolve.llm import Client, FakeProvider, ResponseCache
from evolve.runs import EndpointSettings, Journal
from evolve.workflows import run_calibration
from tests.conftest import fake_endpoint

PER_CALL = 100 + 20  # the fake provider's prompt and completion tokens per call


def _config(tmp_path: Path, pack: Path, splits: Path, run_id: str, **endpoint):
    return resolve_config(preset="quick", environ={}, overrides={
        "run_id": run_id, "pack": pack, "splits": splits, "archives_dir": tmp_path / "archives",
        "cache_path": tmp_path / f"{run_id}.sqlite", "endpoint": {"provider": "fake", **endpoint}, "audit": False,
        "budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2}})


def _run(config, provider: FakeProvider, *, resume: bool = False):
    with Client(provider, cache=ResponseCache(config.cache_path), max_concurrency=2, backoff_initial=0.01) as client:
        return run_calibration(config, client=client, resume=resume)


def test_a_calibration_stops_at_its_token_limit_and_resumes_without_paying_twice(tmp_path, tiny_pack_dir, tiny_splits_dir):
    whole = FakeProvider(fake_endpoint, prompt_tokens=100, completion_tokens=20)
    _run(_config(tmp_path, tiny_pack_dir, tiny_splits_dir, "whole"), whole)
    uninterrupted = whole.calls
    assert uninterrupted > 10

    limit = (uninterrupted // 2) * PER_CALL  # half the run's tokens
    provider = FakeProvider(fake_endpoint, prompt_tokens=100, completion_tokens=20)
    stopped = _config(tmp_path, tiny_pack_dir, tiny_splits_dir, "limited", max_tokens=limit)
    with pytest.raises(SpendLimitReachedError, match="--max-tokens"):
        _run(stopped, provider)
    first = provider.calls
    assert 0 < first * PER_CALL <= limit  # stopped before passing the limit
    run_dir = stopped.run_dir
    assert not (run_dir / "report.md").exists() and not (run_dir / "report.json").exists()  # no half-written report
    events = [e["event"] for e in Journal(run_dir / "journal.jsonl").events()]
    assert "spend_limit" in events and "spend_limit_reached" in events and "run_interrupted" in events

    # the same limit refuses at once: what the first process paid is counted from the journal
    with pytest.raises(SpendLimitReachedError):
        _run(stopped, provider, resume=True)
    assert provider.calls == first

    raised = _config(tmp_path, tiny_pack_dir, tiny_splits_dir, "limited", max_tokens=10 * uninterrupted * PER_CALL)
    result = _run(raised, provider, resume=True)
    assert provider.calls == uninterrupted  # nothing paid twice across the stop and the resume
    spend = result.report.usage.spend
    assert spend is not None and spend.max_tokens == 10 * uninterrupted * PER_CALL
    assert spend.spent.calls == uninterrupted and spend.tokens == uninterrupted * PER_CALL
    assert spend.stopped_at_limit == 2 and spend.usd is None  # no prices given
    report_md = (run_dir / "report.md").read_text()
    assert "### Spending" in report_md and "stopped at its limit 2 times" in report_md


def test_a_usd_limit_is_priced_with_the_cached_input_price(tmp_path, tiny_pack_dir, tiny_splits_dir):
    provider = FakeProvider(fake_endpoint, prompt_tokens=100, completion_tokens=20)
    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir, "priced", max_usd=1000.0, price_in=2.0, price_out=8.0,
                     price_cached_in=0.5)
    result = _run(config, provider)
    spend = json.loads((config.run_dir / "report.json").read_text())["usage"]["spend"]
    assert spend == result.report.usage.spend.model_dump()
    calls = provider.calls
    assert spend["spent"]["calls"] == calls and spend["stopped_at_limit"] == 0
    assert spend["usd"] == pytest.approx(calls * (100 * 2.0 + 20 * 8.0) / 1e6)  # the fake reports no cached tokens
    assert spend["price"]["cached_input_usd_per_m"] == 0.5
    assert "never reached its limit" in (config.run_dir / "report.md").read_text()


def test_calibrate_with_its_own_client_lets_calls_out_finish_at_the_limit(tmp_path, tiny_pack_dir, tiny_splits_dir):
    """``evolve.calibration.calibrate`` opening its own client (no workflow around it): at the
    limit the calls already sent finish and are cached instead of being cancelled, so the resume
    does not send them again."""
    from evolve.calibration import calibrate
    from evolve.testing import LoopbackChatServer, chat_completion
    from tests.conftest import request_of

    def answer(body: dict) -> object:
        return 200, chat_completion(fake_endpoint(request_of(body)), prompt_tokens=100, completion_tokens=20)

    with LoopbackChatServer(answer) as server:
        def config(run_id: str, **limit):
            return _config(tmp_path, tiny_pack_dir, tiny_splits_dir, run_id).model_copy(update={"endpoint": EndpointSettings(
                base_url=server.base_url, model="scripted", max_concurrency=4, **limit)})

        calibrate(config("whole"))
        uninterrupted = len(server.bodies)
        stopped = config("limited", max_tokens=uninterrupted // 2 * PER_CALL)
        with pytest.raises(SpendLimitReachedError):
            calibrate(stopped)
        calibrate(config("limited", max_tokens=10 * uninterrupted * PER_CALL), resume=True)
    assert len(server.bodies) == 2 * uninterrupted  # the whole run, then the stop and the resume: nothing twice
