"""A rubric still holding `evolve rubric new`'s placeholder texts is named before a run pays."""

from __future__ import annotations

import dataclasses

from evolve.calibration import plan_calibration
from evolve.config import resolve_config
from evolve.rubric import PLACEHOLDER, RubricBundle


def _plan(tmp_path, pack, splits, root=None):
    overrides = {"run_id": "r", "pack": pack, "splits": splits, "archives_dir": tmp_path / "archives",
                 "prompts_root": root}
    return plan_calibration(resolve_config(preset="quick", overrides=overrides, environ={}))


def test_placeholder_texts_left_in_the_rubric_are_warned_about(tmp_path, tiny_pack_dir, tiny_splits_dir):
    assert not any("placeholder" in w for w in _plan(tmp_path, tiny_pack_dir, tiny_splits_dir).warnings)
    shipped = RubricBundle.load("kqa-entailment")
    unedited = dataclasses.replace(shipped, protocol=f"{PLACEHOLDER}: write the judge protocol.")
    unedited.write(tmp_path / "prompts")
    warnings = _plan(tmp_path, tiny_pack_dir, tiny_splits_dir, tmp_path / "prompts").warnings
    [warning] = [w for w in warnings if "placeholder" in w]
    assert "rubric 'kqa-entailment' still holds 1 placeholder text(s)" in warning and "protocol.md" in warning
    assert "evolve rubric check kqa-entailment" in warning
