"""Rating packs: round trip, helpers, summary and the write semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve.data import (
    RATINGS_COLUMNS,
    RatingPack,
    check_pack,
    load_pack,
    summarize_pack,
    validate_pack,
    write_pack,
)
from evolve.errors import DataError, PackError

from .conftest import small_pack


def test_round_trip_is_lossless(tmp_path: Path, prompts_root: Path) -> None:
    pack = small_pack()
    out = write_pack(pack, tmp_path / "p")
    loaded = load_pack(out, prompts_root=prompts_root)
    assert loaded == pack
    assert loaded.path == out
    # Writing the loaded pack again gives byte-identical files.
    again = write_pack(loaded, tmp_path / "q")
    for name in ("pack.json", "cases.jsonl", "targets.jsonl", "ratings.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes()


def test_a_pack_prints_as_one_line_of_counts_whatever_its_size(pack_dir: Path, prompts_root: Path) -> None:
    pack = load_pack(pack_dir, prompts_root=prompts_root)
    big = RatingPack(None, pack.manifest, pack.cases * 500, pack.targets, pack.ratings * 500)
    for shown, where in ((repr(pack), str(pack_dir)), (str(big), "in memory")):
        assert "\n" not in shown and len(shown) < 120 + len(where) and shown.endswith(f"; {where})")
    assert f"{len(pack.cases) * 500} cases, {len(pack.targets)} targets, {len(pack.ratings) * 500} ratings" in repr(big)
    assert f"rubric {pack.manifest.rubric.id} v{pack.manifest.rubric.version}" in repr(pack)
    assert pack.cases[0].case_id not in repr(big)  # no record is listed


def test_files_have_the_documented_shape(pack_dir: Path) -> None:
    csv_text = (pack_dir / "ratings.csv").read_text(encoding="utf-8")
    assert csv_text.splitlines()[0] == ",".join(RATINGS_COLUMNS)
    assert "c1,t2,r2,errors,,true," in csv_text  # not evaluable: empty score
    assert "c1,t1,r1,support,2,false," in csv_text
    manifest = (pack_dir / "pack.json").read_text(encoding="utf-8")
    assert manifest.startswith('{\n  "version": 1,')
    assert len((pack_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines()) == 2


def test_load_accepts_pack_json_path(pack_dir: Path, prompts_root: Path) -> None:
    assert load_pack(pack_dir / "pack.json", prompts_root=prompts_root) == small_pack()


def test_helpers(pack_dir: Path, prompts_root: Path) -> None:
    pack = load_pack(pack_dir, prompts_root=prompts_root)
    assert pack.case("c2").title == "Case two"
    assert pack.target("t2").component == "rationale"
    assert [t.target_id for t in pack.targets_of_case("c1")] == ["t1", "t2"]
    assert [r.score for r in pack.ratings_of("support")] == [2, 1, 0, 0]
    assert pack.ratings_of("nobody-rated-this") == ()
    assert pack.raters == ("r1", "r2")
    assert pack.criteria == ("support", "errors")
    assert pack.case_ids == ("c1", "c2")
    assert len(pack.ratings_of_target("t2")) == 2
    with pytest.raises(KeyError):
        pack.case("nope")
    with pytest.raises(KeyError):
        pack.target("nope")
    with pytest.raises(KeyError):
        pack.targets_of_case("nope")


def test_ratings_frame(pack_dir: Path, prompts_root: Path) -> None:
    frame = load_pack(pack_dir, prompts_root=prompts_root).ratings_frame()
    assert list(frame.columns) == list(RATINGS_COLUMNS)
    assert len(frame) == 6
    assert str(frame["score"].dtype) == "Int64"
    assert frame["score"].isna().sum() == 1
    assert frame["not_evaluable"].dtype == bool
    assert frame.loc[3, "comment"] == "unreadable,\nsecond line"


def test_subset_keeps_order_and_children() -> None:
    sub = small_pack().subset(["c2"])
    assert sub.case_ids == ("c2",)
    assert [t.target_id for t in sub.targets] == ["t3"]
    assert {r.case_id for r in sub.ratings} == {"c2"}
    with pytest.raises(KeyError):
        small_pack().subset(["zzz"])


def test_check_pack_summary(pack_dir: Path, prompts_root: Path) -> None:
    summary = check_pack(pack_dir, prompts_root=prompts_root)
    assert (summary.n_cases, summary.n_targets, summary.n_ratings, summary.n_not_evaluable) == (2, 3, 6, 1)
    assert summary.targets_per_component == {"answer": 2, "rationale": 1}
    assert summary.ratings_per_criterion == {"support": 4, "errors": 2}
    assert summary.ratings_per_rater == {"r1": 3, "r2": 3}
    assert summary.score_counts["errors"] == {"r1": {"3": 1}, "r2": {"not_evaluable": 1}}
    assert summary.score_counts["support"]["r1"] == {"0": 1, "2": 1}
    assert summary.path == str(pack_dir)
    assert summarize_pack(small_pack()).path is None


def test_validate_in_memory_pack_names_future_locations(prompts_root: Path) -> None:
    pack = small_pack()
    broken = RatingPack(path=None, manifest=pack.manifest, cases=pack.cases + (pack.cases[0],),
                        targets=pack.targets, ratings=pack.ratings)
    validate_pack(pack, prompts_root=prompts_root)
    with pytest.raises(PackError, match=r"cases.jsonl, line 3, field 'case_id'"):
        validate_pack(broken, prompts_root=prompts_root)


def test_write_refuses_non_empty_directory(tmp_path: Path, pack_dir: Path) -> None:
    with pytest.raises(PackError, match="overwrite=True"):
        write_pack(small_pack(), pack_dir)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(PackError, match="not a directory"):
        write_pack(small_pack(), tmp_path / "afile")
    # an existing empty directory is fine
    (tmp_path / "empty").mkdir()
    write_pack(small_pack(), tmp_path / "empty")
    assert (tmp_path / "empty" / "pack.json").is_file()


def test_overwrite_replaces_and_leaves_no_temporaries(tmp_path: Path, pack_dir: Path, prompts_root: Path) -> None:
    (pack_dir / "stale.txt").write_text("old")
    small = small_pack().subset(["c2"])
    write_pack(small, pack_dir, overwrite=True)
    assert not (pack_dir / "stale.txt").exists()
    assert load_pack(pack_dir, prompts_root=prompts_root).case_ids == ("c2",)
    assert sorted(p.name for p in pack_dir.parent.iterdir()) == ["prompts", "small"]


def test_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import evolve.data._pack as pack_module

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pack_module, "_ratings_csv", boom)
    with pytest.raises(OSError):
        write_pack(small_pack(), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_pack_error_is_a_data_error() -> None:
    assert issubclass(PackError, DataError)
