"""Output limits per model (issue 13 item 2; consilium paper, generation defaults: the paper gave each model its own)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from evolve.consilium import load_bench_manifest, run_bench
from evolve.errors import ConfigError
from tests.consilium.bench_support import make_client, make_config, write_cases

QUICK = {"role_assignment": 600, "opinion": 600, "consilium": 500, "finalizer": 700}  # the quick preset's limits
STAGE_LIMIT = {"role_assignment": "role_assignment", "opinion": "opinion", "synthesis": "consilium", "vote": "consilium",
               "moderator": "consilium", "finalizer": "finalizer"}


def test_a_model_with_its_own_limits_gets_them_and_the_others_keep_the_runs(tmp_path: Path):
    own = {"opinion": 900, "finalizer": 1200}  # consilium and role assignment: the run's
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=1), models=("model-a", "model-b"),
                         conditions=("structured",), generation={"model_limits": {"model-b": own}})
    client, provider = make_client(tmp_path)
    try:
        run_bench(config, client=client)
    finally:
        client.close()
    sent: dict[tuple[str, str], set[int]] = defaultdict(set)
    for r in provider.requests:
        sent[(r.model, STAGE_LIMIT[r.tag])].add(r.max_tokens)
    assert {stage for model, stage in sent} == set(QUICK)  # every stage was called for both models
    for (model, stage), limits in sent.items():
        expected = {**QUICK, **own}[stage] if model == "model-b" else QUICK[stage]
        assert limits == {expected}, (model, stage)
    manifest = load_bench_manifest(config.run_dir)
    stored = json.loads(manifest.model_dump_json())["config"]["generation"]["model_limits"]
    assert stored == {"model-b": {"role_assignment": None, "opinion": 900, "consilium": None, "finalizer": 1200}}


def test_limits_for_a_model_the_run_does_not_use_are_refused_by_name(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"model_limits names \['gpt-typo'\].*spell the model id"):
        make_config(tmp_path, tmp_path / "cases.jsonl", generation={"model_limits": {"gpt-typo": {"opinion": 900}}})
