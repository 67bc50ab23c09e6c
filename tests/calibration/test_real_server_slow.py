"""Calibration against the real embedded llama-server (slow; CI runs it after `evolve setup`).

The small local model proves the machinery, not clinical truth: these tests check schema
validity, bookkeeping and the cache, never particular scores or texts.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evolve.config import resolve_config
from evolve.local import cache_dir
from evolve.workflows import run_calibration as calibrate

pytestmark = pytest.mark.slow


def test_quick_calibration_on_the_real_local_model(installed_local_model, tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                   monkeypatch):
    key = "real-server-key-in-memory-only-0123456789"
    monkeypatch.setattr("evolve.runs._client.secrets.token_urlsafe", lambda n: key)
    overrides = {
        "pack": tiny_pack_dir,
        "splits": tiny_splits_dir,
        "archives_dir": tmp_path / "archives",
        "cache_path": tmp_path / "cache.sqlite",
        "budget": {"accepted": 1, "max_attempts": 2, "batch_size": 1, "train_repeats": 1, "reeval_repeats": 2,
                   "max_train_targets": 2, "max_validation_targets": 2},
        "min_coverage": 0.0,
    }
    config = resolve_config(preset="quick", overrides={**overrides, "run_id": "real"}, environ={})
    result = calibrate(config)
    run = result.run_dir
    scores = pd.read_csv(run / "scores.csv")
    # the real model answers in the schema: most calls give a numeric score on the 0-2 scale
    numeric = scores[scores["outcome"] == "score"]
    assert len(numeric) >= 0.7 * len(scores)
    assert numeric["score"].between(0, 2).all()
    assert (scores["prompt_tokens"] > 0).all()
    report = json.loads((run / "report.json").read_text())
    kinds = {r["kind"] for r in report["criteria"]["entailment"]["rows"]}
    assert kinds == {"no-guidance", "initial", "training-median", "winner"}
    cands = pd.read_csv(run / "candidates.csv", keep_default_na=False)
    assert (cands["origin"] == "mutation").sum() >= 1
    # the server's API key reached it (every call was authorised) but no file evolve or the server wrote
    written = [p for p in run.rglob("*") if p.is_file()] + [tmp_path / "cache.sqlite"]
    written += sorted((cache_dir() / "logs").glob("llama-server-*.log"))
    for path in written:
        assert key.encode() not in path.read_bytes(), path

    # the same run again costs no model call: every request is answered by the cache
    again = calibrate(config.model_copy(update={"run_id": "real-again"}))
    events = [json.loads(line) for line in (again.run_dir / "journal.jsonl").read_text().splitlines()]
    usage = next(e["usage"] for e in events if e["event"] == "usage")
    assert sum(u["calls"] for u in usage.values()) == 0
    assert usage["judge"]["cache_hits"] + usage["mutation"]["cache_hits"] == len(scores) + (cands["origin"] == "mutation").sum()
    assert usage["audit"]["cache_hits"] >= 2  # the drift check of the winner and the initial prompts
