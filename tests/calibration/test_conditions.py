"""The paper preset calibrates on structured targets (issue 13 item 4); other packs keep theirs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from evolve.calibration import calibrate, plan_calibration
from evolve.config import resolve_config
from evolve.data import load_pack, write_pack
from evolve.llm import Client, ResponseCache
from evolve.report import write_report
from evolve.splits import make_splits, write_splits
from evolve.testing import FakeProvider
from tests.conftest import make_tiny_pack


def _pack(tmp_path: Path, *, two_conditions: bool) -> tuple[Path, Path]:
    """The tiny pack; with ``two_conditions`` each case's first target is structured and its
    second free-form, as in a consilium pack of both conditions."""
    pack = make_tiny_pack(20)
    if two_conditions:
        targets = tuple(t.model_copy(update={"condition": "structured" if t.target_id.endswith("t0") else "free-form"})
                        for t in pack.targets)
        pack = dataclasses.replace(pack, targets=targets)
    write_pack(pack, tmp_path / "pack")
    write_splits(make_splits(load_pack(tmp_path / "pack"), holdout_fraction=0.0, validation_fraction=0.5, seed=3),
                 tmp_path / "splits")
    return tmp_path / "pack", tmp_path / "splits"


def _config(tmp_path: Path, pack: Path, splits: Path, preset: str, **extra):
    overrides = {"run_id": "r", "pack": pack, "splits": splits, "archives_dir": tmp_path / "archives", "audit": False,
                 "cache_path": tmp_path / "cache.sqlite", "endpoint": {"provider": "fake"},
                 "budget": {"accepted": 1, "max_attempts": 1, "shared_attempts": None, "batch_size": 1,
                            "train_repeats": 1}, **extra}
    return resolve_config(preset=preset, overrides=overrides, environ={})


def _conditions_used(plan) -> set[str]:
    return {it.target.condition for train, val in plan.items.values() for it in [*train, *val]}


def test_the_paper_preset_calibrates_on_structured_targets_and_says_so(tmp_path):
    pack, splits = _pack(tmp_path, two_conditions=True)
    plan = plan_calibration(_config(tmp_path, pack, splits, "paper"))
    assert plan.conditions == ("structured",) and _conditions_used(plan) == {"structured"}
    assert len(plan.notes) == 1 and "20 'structured' targets of 40" in plan.notes[0] and "--condition" in plan.notes[0]
    # the quick preset pools both, as before; an explicit choice wins over the preset
    quick = plan_calibration(_config(tmp_path, pack, splits, "quick"))
    assert quick.conditions is None and _conditions_used(quick) == {"structured", "free-form"} and not quick.notes
    chosen = plan_calibration(_config(tmp_path, pack, splits, "paper", conditions=["free-form"]))
    assert chosen.conditions == ("free-form",) and _conditions_used(chosen) == {"free-form"} and not chosen.notes


def test_a_pack_without_structured_targets_keeps_all_of_them_under_the_paper_preset(tmp_path):
    pack, splits = _pack(tmp_path, two_conditions=False)
    plan = plan_calibration(_config(tmp_path, pack, splits, "paper"))
    assert plan.conditions is None and _conditions_used(plan) == {"Must_have"} and not plan.notes


def test_the_chosen_condition_is_recorded_in_config_json_and_the_report(tmp_path):
    pack, splits = _pack(tmp_path, two_conditions=True)
    config = _config(tmp_path, pack, splits, "paper", parallel_criteria=1,
                     judge={"max_tokens": 160, "rationale_max_chars": 120}, archive={"length_bins": 4, "bias_bins": 3})

    def judge(request):
        if request.tag == "mutation":
            return json.dumps({"analysis": "scripted", "guidance": "Score the statement strictly."})
        return json.dumps({"rationale": "scripted", "score": "1"})

    with Client(FakeProvider(judge), cache=ResponseCache(":memory:")) as client:
        result = calibrate(config, client=client)
    stored = json.loads((result.run_dir / "config.json").read_text())
    assert stored["conditions"] == ["structured"] and stored["prefer_condition"] == "structured"
    scores = pd.read_csv(result.run_dir / "scores.csv", dtype=str)
    assert scores["target_id"].str.endswith("t0").all()  # structured targets only
    write_report(result.run_dir)
    assert "targets of condition `structured` only" in (result.run_dir / "report.md").read_text()
