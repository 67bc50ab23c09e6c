"""A validation set too small for any paired verdict is named before a run pays."""

from __future__ import annotations

from evolve.calibration import plan_calibration
from evolve.calibration._engine import validation_size_warnings
from evolve.config import resolve_config
from evolve.stats import MIN_CASES


def test_a_validation_set_of_fewer_cases_than_a_verdict_needs_is_warned_about(tmp_path, tiny_pack_dir, tiny_splits_dir):
    overrides = {"run_id": "r", "pack": tiny_pack_dir, "splits": tiny_splits_dir, "archives_dir": tmp_path / "archives"}
    plan = plan_calibration(resolve_config(preset="quick", overrides=overrides, environ={}))
    [(criterion_id, (_, validation))] = plan.items.items()
    n_cases = len({it.case.case_id for it in validation})
    assert n_cases < MIN_CASES  # the tiny pack's split
    [warning] = [w for w in plan.warnings if "paired verdict" in w]
    assert warning.startswith(f"criterion {criterion_id}: its {len(validation)} validation target(s) come from {n_cases} case(s)")
    assert "too few cases to tell" in warning and "--validation-fraction" in warning


def test_enough_validation_cases_give_no_warning(tmp_path, tiny_pack_dir, tiny_splits_dir):
    overrides = {"run_id": "r", "pack": tiny_pack_dir, "splits": tiny_splits_dir, "archives_dir": tmp_path / "archives"}
    plan = plan_calibration(resolve_config(preset="quick", overrides=overrides, environ={}))
    [(criterion_id, (train, validation))] = plan.items.items()
    many = validation * MIN_CASES  # items of at least MIN_CASES cases: pretend each copy is its own case
    distinct = [type(it)(case=it.case.model_copy(update={"case_id": f"{it.case.case_id}-{n}"}), target=it.target,
                         ratings=it.ratings, split=it.split) for n, it in enumerate(many)]
    assert validation_size_warnings({criterion_id: (train, distinct)}) == []
    assert len(validation_size_warnings({criterion_id: (train, validation)})) == 1


def test_the_plan_shows_the_warnings_of_the_run(tmp_path, tiny_pack_dir, tiny_splits_dir):
    from evolve.workflows import plan_calibration_run

    overrides = {"run_id": "r", "pack": tiny_pack_dir, "splits": tiny_splits_dir, "archives_dir": tmp_path / "archives"}
    plan = plan_calibration_run(resolve_config(preset="quick", overrides=overrides, environ={}))
    warned = [n for n in plan.notes if n.startswith("warning: ")]
    assert any("paired verdict" in n for n in warned) and any("affords at most" in n for n in warned)
