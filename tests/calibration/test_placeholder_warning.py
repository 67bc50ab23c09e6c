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


def test_the_warnings_before_a_run_stay_in_its_report(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    """Said once at the start, they would be lost to whoever reads the report (or the judge file)
    later: report.json keeps them, report.md and the end of the command repeat them."""
    import json
    import warnings

    import evolve
    from evolve.outputs import read_run
    from evolve.report import verdict_warnings

    shipped = RubricBundle.load("kqa-entailment")
    dataclasses.replace(shipped, protocol=f"{PLACEHOLDER}: write the judge protocol.").write(tmp_path / "prompts")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        summary = evolve.calibrate(tiny_pack_dir, splits=tiny_splits_dir, endpoint=fake_client, run_id="r",
                                   archives_dir=tmp_path / "archives", prompts_root=tmp_path / "prompts",
                                   config={"budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2}})
    stored = json.loads((summary.run_dir / "report.json").read_text("utf-8"))["warnings"]
    [placeholder] = [w for w in stored if "placeholder" in w]
    assert "still holds 1 placeholder text(s)" in placeholder
    assert any("fewer than the 8 a paired verdict needs" in w for w in stored)  # the tiny validation set's
    report = read_run(summary.run_dir).report
    assert placeholder in verdict_warnings(report)
    assert "placeholder text(s)" in (summary.run_dir / "report.md").read_text("utf-8")
