"""The calibration judge and `evolve judge` read rationale lengths as they were sent.

The quick preset's judge sends a rationale ``maxLength`` of 120. An endpoint run with
``schema_limits`` off was never told it, so a 300-character rationale is read whole (not
clipped) by calibration and by scoring, and cached (a resume pays nothing). With the limit sent
the same reply is a ``model_failure`` - never clipped, never cached: a resume asks it again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

import evolve
from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.testing import FakeProvider
from evolve.workflows import run_calibration
from tests.conftest import fake_endpoint
from tests.scoring.test_judge import _config, pack_dirs  # noqa: F401 - pack_dirs is a fixture

LONG = "s" * 300


def _long_endpoint(request: ChatRequest) -> str:
    answer = fake_endpoint(request)
    if request.tag != "judge":
        return answer
    return json.dumps({**json.loads(answer), "rationale": LONG})


def _client(provider: FakeProvider, cache: Path) -> Client:
    return Client(provider, cache=ResponseCache(cache), max_concurrency=2, backoff_initial=0.01)


def test_a_rationale_over_a_limit_never_sent_is_read_whole_and_one_over_a_sent_limit_fails(tmp_path, pack_dirs):  # noqa: F811
    pack, splits = pack_dirs
    untold = FakeProvider(_long_endpoint)
    untold.schema_limits = False
    config = _config(tmp_path, pack, splits, endpoint={"provider": "fake", "schema_limits": False})
    assert config.judge.rationale_max_chars == 120
    with _client(untold, tmp_path / "cache.sqlite") as client:
        run = run_calibration(config, client=client).run_dir
        scores = pd.read_csv(run / "scores.csv", keep_default_na=False)
        assert len(scores) > 0 and (scores["outcome"] == "score").all() and (scores["rationale"] == LONG).all()
        judge = evolve.load_judge(run)
        summary = judge.score(pack, client=client, run_dir=tmp_path / "untold")
        calls = pd.read_csv(summary.run_dir / "calls.csv", keep_default_na=False)
        assert (calls["outcome"] == "score").all() and (calls["rationale"] == LONG).all()
        assert summary.criteria["entailment"].n_failed == 0
        before = untold.calls
        judge.score(pack, client=client, run_dir=tmp_path / "untold", resume=True)
        assert untold.calls == before  # kept in the cache: a resume pays nothing

    told = FakeProvider(_long_endpoint)  # schema_limits on: the endpoint was sent maxLength 120
    with _client(told, tmp_path / "told.sqlite") as client:
        summary = judge.score(pack, client=client, run_dir=tmp_path / "told")
        calls = pd.read_csv(summary.run_dir / "calls.csv", keep_default_na=False)
        failed = calls[calls["outcome"] == "model_failure"]
        assert len(failed) == len(calls) == told.calls > 0 and (failed["score"] == "").all()
        assert failed["rationale"].str.contains("120").all()
        counts = summary.criteria["entailment"]
        assert counts.n_failed == counts.n_items > 0 and counts.n_scored == 0  # items, not calls (repeats, no guidance)
        assert counts.n_items == counts.n_scored + counts.n_failed + counts.n_not_evaluable + counts.n_excluded
        judge.score(pack, client=client, run_dir=tmp_path / "told", resume=True)
        assert told.calls == 2 * len(calls)  # never cached: a resume asks every one of them again
