"""write_splits / load_splits: file format, round trip and file-level errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.data import RatingPack
from evolve.errors import SplitError
from evolve.splits import check_splits, holds_splits, load_splits, make_splits, write_splits

from .conftest import SHARED_DATA


def test_round_trip_and_format(pack: RatingPack, tmp_path: Path) -> None:
    s = make_splits(pack)
    out = write_splits(s, tmp_path / "sp")
    assert sorted(p.name for p in out.iterdir()) == [
        "frame.txt", "holdout.txt", "split.json", "train.txt", "validation.txt"]
    assert (out / "train.txt").read_text() == "".join(f"{c}\n" for c in s.train)
    meta = json.loads((out / "split.json").read_text())
    assert meta["counts"] == s.counts()
    assert (meta["seed"], meta["pack"], meta["version"]) == (42, "synthetic", 1)
    loaded = load_splits(out)
    assert loaded == s
    check_splits(loaded, pack)


def test_rewriting_identical_splits_is_fine_but_different_needs_overwrite(pack: RatingPack, tmp_path: Path) -> None:
    out = write_splits(make_splits(pack), tmp_path / "sp")
    assert holds_splits(out, make_splits(pack)) and not holds_splits(out, make_splits(pack, seed=1))
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    write_splits(make_splits(pack), out)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps  # left as they were
    with pytest.raises(SplitError, match="overwrite=True"):
        write_splits(make_splits(pack, seed=1), out)
    write_splits(make_splits(pack, seed=1), out, overwrite=True)
    assert load_splits(out).seed == 1
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def _written(pack: RatingPack, tmp_path: Path) -> Path:
    return write_splits(make_splits(pack), tmp_path / "sp")


def _load_error(path: Path) -> str:
    with pytest.raises(SplitError) as info:
        load_splits(path)
    return str(info.value)


def test_duplicate_id_names_file_and_line(pack: RatingPack, tmp_path: Path) -> None:
    out = _written(pack, tmp_path)
    lines = (out / "train.txt").read_text().splitlines()
    (out / "train.txt").write_text("\n".join([*lines, lines[1]]) + "\n")
    msg = _load_error(out)
    assert f"train.txt line {len(lines) + 1}: case id {lines[1]!r} duplicates line 2" in msg


def test_counts_out_of_sync(pack: RatingPack, tmp_path: Path) -> None:
    out = _written(pack, tmp_path)
    lines = (out / "train.txt").read_text().splitlines()
    (out / "train.txt").write_text("\n".join(lines[:-1]) + "\n")
    msg = _load_error(out)
    assert f"split.json, field 'counts.train': says {len(lines)} but train.txt lists {len(lines) - 1}" in msg
    assert "neither train nor validation" in msg


def test_blank_line_names_file_and_line(pack: RatingPack, tmp_path: Path) -> None:
    out = _written(pack, tmp_path)
    lines = (out / "holdout.txt").read_text().splitlines()
    (out / "holdout.txt").write_text("\n".join([lines[0], "", *lines[1:]]) + "\n")
    assert "holdout.txt line 2: blank line" in _load_error(out)


def test_overlap_found_on_load(pack: RatingPack, tmp_path: Path) -> None:
    out = _written(pack, tmp_path)
    holdout = (out / "holdout.txt").read_text()
    (out / "frame.txt").write_text((out / "frame.txt").read_text() + holdout)
    assert "frame and holdout overlap" in _load_error(out)


def test_missing_file_and_bad_json(pack: RatingPack, tmp_path: Path) -> None:
    out = _written(pack, tmp_path)
    (out / "split.json").write_text("{\n nope")
    assert "split.json line 2: invalid JSON" in _load_error(out)
    (out / "validation.txt").unlink()
    assert "validation.txt: file is missing" in _load_error(out)


def test_bad_metadata_field(pack: RatingPack, tmp_path: Path) -> None:
    out = _written(pack, tmp_path)
    meta = json.loads((out / "split.json").read_text())
    meta["holdout_fraction"] = 1.5
    (out / "split.json").write_text(json.dumps(meta))
    assert "split.json, field 'holdout_fraction'" in _load_error(out)
    meta["version"] = 2
    (out / "split.json").write_text(json.dumps(meta))
    assert "unsupported split format 2" in _load_error(out)


@pytest.mark.skipif(not (SHARED_DATA / "kqa-physician-nli").is_dir(), reason=f"real data not available at {SHARED_DATA}")
def test_kqa_default_split(tmp_path: Path) -> None:
    from evolve.data import import_kqa

    pack = import_kqa(SHARED_DATA / "kqa-physician-nli")
    s = make_splits(pack)
    assert s.counts() == {"frame": 40, "holdout": 10, "train": 28, "validation": 12}
    check_splits(load_splits(write_splits(s, tmp_path / "kqa")), pack)
