"""The report says plainly why no physician ceiling exists when every target has one rater."""

from __future__ import annotations

import json
from pathlib import Path

from evolve.config import resolve_config
from evolve.data import RatingPack, load_pack, write_pack
from evolve.splits import make_splits, write_splits
from evolve.workflows import run_calibration
from tests.conftest import make_tiny_pack


def test_single_rater_pack_reports_why_no_ceiling(tmp_path: Path, fake_client):
    tiny = make_tiny_pack()
    single = RatingPack(path=None, manifest=tiny.manifest, cases=tiny.cases, targets=tiny.targets,
                        ratings=tuple(r for r in tiny.ratings if r.rater_id == "rater-1"))  # one rater per target
    splits = make_splits(single, holdout_fraction=0.2, validation_fraction=0.4, seed=3)
    held_out = {t.target_id for t in tiny.targets if t.case_id in set(splits.holdout)}
    extra = tuple(r.model_copy(update={"rater_id": "rater-holdout"}) for r in single.ratings if r.target_id in held_out)
    single = RatingPack(path=None, manifest=tiny.manifest, cases=tiny.cases, targets=tiny.targets,
                        ratings=single.ratings + extra)  # a second rater on held-out targets only
    pack_dir = write_pack(single, tmp_path / "packs" / "single")
    splits_dir = tmp_path / "splits" / "single"
    write_splits(make_splits(load_pack(pack_dir), holdout_fraction=0.2, validation_fraction=0.4, seed=3), splits_dir)
    assert extra and make_splits(load_pack(pack_dir), holdout_fraction=0.2, validation_fraction=0.4, seed=3) == splits
    config = resolve_config(preset="quick", overrides={
        "run_id": "single-rater", "pack": pack_dir, "splits": splits_dir, "archives_dir": tmp_path / "archives",
        "cache_path": tmp_path / "cache.sqlite", "endpoint": {"provider": "fake"},
        "budget": {"accepted": 1, "max_attempts": 2, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2},
    }, environ={})
    run = run_calibration(config, client=fake_client).run_dir
    entry = json.loads((run / "report.json").read_text())["criteria"]["entailment"]
    assert entry["n_raters"] == 1  # the held-out targets' second rater rests no MAE of the report
    ceiling = entry["ceiling"]
    assert ceiling["validation"]["mae"] is None and ceiling["train"]["mae"] is None
    assert ceiling["validation"]["why_none"].startswith("each target was rated by one rater")
    md = (run / "report.md").read_text()
    assert "No physician-vs-physician ceiling can be computed on the training or validation targets: each target " \
           "was rated by one rater" in md
    assert "— (none: each target has one rater)" in md  # Table 5's ceiling cell
