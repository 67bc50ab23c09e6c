"""A fake-provider calibration on the consilium rubric writes judge.json; a bench judged with
it (run folder or the file) uses its winner, keeps the file's copy, and the bench report takes
the anchor from it - refused in words here, since the tiny pack's validation has too few cases."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from evolve.config import resolve_config
from evolve.consilium import judge_bench, run_bench
from evolve.data import load_pack, write_pack
from evolve.llm import Client, ResponseCache
from evolve.report import build_bench_report, render_bench_markdown
from evolve.splits import make_splits, write_splits
from evolve.stats import MIN_RATED_CASES
from evolve.testing import FakeProvider
from evolve.workflows import run_calibration
from tests.conftest import fake_consilium_endpoint, make_consilium_pack
from tests.consilium.bench_support import make_client, make_config, write_cases


def _calibration(tmp_path: Path, n_cases: int = 12, validation_fraction: float = 0.34,
                 max_validation_targets: int | None = None) -> Path:
    pack_dir = tmp_path / "packs" / "consilium-tiny"
    write_pack(make_consilium_pack(n_cases), pack_dir)
    split_dir = tmp_path / "splits" / "consilium-tiny"
    write_splits(make_splits(load_pack(pack_dir), holdout_fraction=0.0, validation_fraction=validation_fraction, seed=1),
                 split_dir)
    config = resolve_config(preset="quick", environ={}, overrides={
        "run_id": "calib", "pack": pack_dir, "splits": split_dir, "rubric": "consilium", "criteria": ["data_use"],
        "archives_dir": tmp_path / "archives", "cache_path": tmp_path / "calib-cache.sqlite",
        "endpoint": {"provider": "fake"}, "judge": {"model": "model-a"},
        "budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2,
                   "max_train_targets": None, "max_validation_targets": max_validation_targets}})
    with Client(FakeProvider(fake_consilium_endpoint), cache=ResponseCache(tmp_path / "calib-cache.sqlite")) as client:
        return run_calibration(config, client=client).run_dir


def test_a_calibration_judge_file_guides_the_bench_and_anchors_its_report(tmp_path):
    calib = _calibration(tmp_path)
    judge_json = calib / "judge.json"
    judge = json.loads(judge_json.read_text())
    winner = judge["criteria"]["data_use"]["winner"]["candidate_id"]
    anchor_cases = {a["case_id"] for a in judge["criteria"]["data_use"]["anchor"]}
    assert judge["judge"]["model"] == "model-a" and 0 < len(anchor_cases) < MIN_RATED_CASES

    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=2))
    client, _ = make_client(tmp_path)
    try:
        run_bench(config, client=client)
        by_folder = judge_bench(config.run_dir, calibration_run=calib, client=client)
        by_file = judge_bench(config.run_dir, calibration_run=judge_json, client=client)
    finally:
        client.close()
    assert by_folder.guidance == {k: v.model_copy(update={"source": str(calib)}) for k, v in by_file.guidance.items()}
    assert by_folder.judge_file == by_file.judge_file and by_file.warnings == []
    assert by_file.judge_file.sha256 == hashlib.sha256(judge_json.read_bytes()).hexdigest()
    scores = pd.read_csv(config.run_dir / "judge_scores.csv", keep_default_na=False)
    assert set(scores.loc[scores["criterion"] == "data_use", "guidance_id"]) == {winner}
    assert (config.run_dir / "calibrated_judge.json").read_bytes() == judge_json.read_bytes()

    report = build_bench_report(config.run_dir, n_boot=50)
    section = report.anchored
    assert section.available and [c.criterion for c in section.criteria] == ["data_use"]
    refusal = section.criteria[0].refused or section.systems[0].refused
    assert f"{len(anchor_cases)} rated cases" in refusal and str(MIN_RATED_CASES) in refusal
    assert all(r.judge_mean is not None and r.anchored_mean is None for r in section.systems)
    assert f"refused: {refusal}" in render_bench_markdown(report)


def test_a_bench_judged_with_a_calibration_of_enough_validation_cases_reports_anchored_means(tmp_path):
    """End to end with no hand-made anchor: a calibration on 30 synthetic consilium cases (15
    validated) writes judge.json; the bench it judges reports per system the raw judge mean and
    the physician-anchored mean with an interval, computed from that file's anchor."""
    calib = _calibration(tmp_path, n_cases=30, validation_fraction=0.5, max_validation_targets=1000)
    anchor = json.loads((calib / "judge.json").read_text())["criteria"]["data_use"]["anchor"]
    assert len({a["case_id"] for a in anchor}) >= MIN_RATED_CASES
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=4))
    client, _ = make_client(tmp_path)
    try:
        run_bench(config, client=client)
        judge_bench(config.run_dir, calibration_run=calib / "judge.json", client=client)
    finally:
        client.close()
    report = build_bench_report(config.run_dir, n_boot=50)
    systems = [r for r in report.anchored.systems if r.criterion == "data_use"]
    assert systems and all(r.refused is None for r in systems)
    for row in systems:
        assert row.judge_mean is not None and row.anchored_mean_low <= row.anchored_mean <= row.anchored_mean_high
        assert row.n_rated_cases == len({a["case_id"] for a in anchor})
    text = render_bench_markdown(report)
    r = systems[0]
    assert "## Physician-anchored means" in text
    assert f"{r.anchored_mean:.2f} [{r.anchored_mean_low:.2f}, {r.anchored_mean_high:.2f}]" in text
