"""User-supplied manifests and case files: every problem reported at once, by file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.errors import SplitError
from evolve.splits import (
    CaseList,
    Manifest,
    SplitWarning,
    check_manifest,
    load_splits,
    make_frame_splits,
    make_splits,
    read_case_ids,
    read_manifest,
)

from .conftest import doi_universe, synthetic_pack

IDS = doi_universe(300)


def _lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_read_manifest_skips_comments_and_blanks(tmp_path: Path) -> None:
    m = read_manifest(_lines(tmp_path / "f.txt", ["# frame of 3", "", f"  {IDS[2]}  ", f"{IDS[0]}  # first case", "\t"]))
    assert m.ids == (IDS[2], IDS[0]) and m.lines == (3, 4)
    assert m.source is not None and len(m.source.sha256) == 64
    check = check_manifest(m, IDS, expected_size=2)
    assert check.ids == (IDS[0], IDS[2])  # source order
    assert check.warnings and "line 4" in check.warnings[0] and "line 3" in check.warnings[0]


def test_check_manifest_reports_every_problem_with_lines(tmp_path: Path) -> None:
    path = _lines(tmp_path / "calib.txt", [IDS[0], "10.1056/NOPE", IDS[1], "", IDS[0], f"{IDS[2]},{IDS[3]}"])
    with pytest.raises(SplitError) as info:
        check_manifest(path, IDS, expected_size=110)
    msg = str(info.value)
    assert f"frame manifest {path} does not fit the case list (4 problems)" in msg
    assert "calib.txt line 2: case id '10.1056/NOPE' is not in the case list" in msg
    assert f"calib.txt line 5: case id {IDS[0]!r} repeats line 1" in msg
    assert "line 6" in msg and "more than one field" in msg
    assert "lists 4 distinct case id(s) but 110 are expected" in msg


def test_check_manifest_whole_groups_and_empty(tmp_path: Path) -> None:
    with pytest.raises(SplitError, match="belongs to DOI group '10.1/x'"):
        check_manifest([IDS[0]], IDS, group_of={IDS[0]: "10.1/x", IDS[9]: "10.1/x"})
    with pytest.raises(SplitError, match="lists no case ids"):
        check_manifest(_lines(tmp_path / "e.txt", ["# nothing yet"]), IDS)
    with pytest.raises(SplitError, match="no such frame manifest file"):
        read_manifest(tmp_path / "missing.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00abc")
    with pytest.raises(SplitError, match="not UTF-8"):
        read_manifest(tmp_path / "bin.txt")


def test_all_manifest_problem_kinds_in_one_error(tmp_path: Path) -> None:
    universe = CaseList.from_ids(IDS, group_of={IDS[4]: "10.9/g", IDS[5]: "10.9/g", IDS[200]: "10.9/h",
                                                IDS[7]: "10.9/h"})
    frame = _lines(tmp_path / "frame.txt", [*IDS[:8], "10.1056/UNKNOWN", IDS[3]])  # 8 known + unknown + repeat
    train = _lines(tmp_path / "train.txt", [IDS[0], IDS[1], IDS[4], IDS[150], IDS[0]])  # held out + repeat
    validation = _lines(tmp_path / "validation.txt", [IDS[1], IDS[5], "10.1056/GONE"])  # overlap, group split
    with pytest.raises(SplitError) as info:
        make_frame_splits(universe, pack_name="nejm", frame=read_manifest(frame), n_train=5, n_validation=5,
                          train=read_manifest(train, name="train"),
                          validation=read_manifest(validation, name="validation"))
    msg = str(info.value)
    expected = [
        "frame.txt line 9: case id '10.1056/UNKNOWN' is not in the case list",          # unknown id
        f"frame.txt line 10: case id {IDS[3]!r} repeats line 4",                       # duplicate, both lines
        "frame.txt: lists 9 distinct case id(s) but 10 are expected (n_train + n_validation = 5 + 5)",  # size
        f"frame.txt line 8: case {IDS[7]!r} belongs to DOI group '10.9/h'",            # group frame/holdout
        f"train.txt line 4: case id {IDS[150]!r} is not in the frame (it is held out)",  # train outside frame
        f"train.txt line 5: case id {IDS[0]!r} repeats line 1",
        "validation.txt line 3: case id '10.1056/GONE' is not in the case list",
        "validation.txt: lists 3 distinct case id(s) but 5 are expected",
        (f"case id {IDS[1]!r} is on both sides: train manifest {train} line 2 and validation manifest "
         f"{validation} line 1"),                                                       # overlap
        "frame case(s) are in neither",                                                # not a partition
        "DOI group '10.9/g' is split across sides",                                    # group across sides
    ]
    for fragment in expected:
        assert fragment in msg, fragment
    assert msg.startswith("cannot make a frame split of the case list (12 problems)")


def test_supplied_partition_is_used_and_recorded(tmp_path: Path) -> None:
    frame = _lines(tmp_path / "frame.txt", IDS[:10])
    validation = _lines(tmp_path / "val.txt", [IDS[8], IDS[2], IDS[5]])
    with pytest.warns(SplitWarning, match="val.txt is not in the source order"):
        s = make_frame_splits(IDS, pack_name="nejm", frame=read_manifest(frame), n_validation=3,
                              validation=read_manifest(validation, name="validation"))
    assert s.validation == (IDS[2], IDS[5], IDS[8])
    assert s.train == tuple(c for c in IDS[:10] if c not in s.validation)
    origin = s.frame_origin
    assert origin.partition == "manifest" and origin.validation_manifest.path == str(validation)
    assert origin.train_manifest is None
    with pytest.raises(SplitError, match="the rest of the frame \\(the train side\\) has 7 case\\(s\\) but 6"):
        make_frame_splits(IDS, pack_name="nejm", frame=IDS[:10], n_train=6, validation=[IDS[2], IDS[5], IDS[8]])
    with pytest.raises(SplitError, match="takes the whole frame"):
        make_frame_splits(IDS, pack_name="nejm", frame=IDS[:3], train=IDS[:3])


def test_in_memory_lists_are_reported_by_item() -> None:
    m = Manifest.from_ids([IDS[1], IDS[1]], name="frame")
    with pytest.raises(SplitError, match=r"frame list item 2: case id .* repeats item 1"):
        check_manifest(m, IDS)


def test_read_case_ids_formats(tmp_path: Path) -> None:
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text(
        json.dumps({"case_id": "c1", "doi": "10.1/a", "text": "x"}) + "\n\n"
        + json.dumps({"case_id": "c2", "doi": "10.1/a"}) + "\n"
        + json.dumps({"doi": "10.1/b", "title": "t"}) + "\n"
    )
    cl = read_case_ids(jsonl)
    assert cl.ids == ("c1", "c2", "10.1/b") and cl.group_of == {"c1": "10.1/a", "c2": "10.1/a"}
    assert cl.kind == "file" and cl.source.path == str(jsonl)
    csv_file = tmp_path / "cases.csv"
    csv_file.write_text("doi,title,case_text\n10.1/x,T,text\n10.1/y,U,\"multi\nline\"\n")
    assert read_case_ids(csv_file).ids == ("10.1/x", "10.1/y")
    txt = _lines(tmp_path / "ids.txt", ["# universe", "a", "b"])
    assert read_case_ids(txt).ids == ("a", "b")
    pack_dir = tmp_path / "pack"
    pack_dir.mkdir()
    (pack_dir / "cases.jsonl").write_text(json.dumps({"case_id": "p1", "text": "x"}) + "\n")
    assert read_case_ids(pack_dir).ids == ("p1",)


def test_read_case_ids_with_named_columns(tmp_path: Path) -> None:
    """A case file whose id and DOI columns have other names (as load_cases' --column maps them)."""
    csv_file = tmp_path / "cases.csv"
    csv_file.write_text("Case ID,DOI,title\nk1,10.1/a,T\nk2,10.1/a,U\nk3,10.1/b,V\n")
    cl = read_case_ids(csv_file, id_column="Case ID", doi_column="DOI")
    assert cl.ids == ("k1", "k2", "k3") and cl.group_of == {"k1": "10.1/a", "k2": "10.1/a", "k3": "10.1/b"}
    # only the DOI column renamed: it is the id (no case_id column), as in load_cases
    by_doi = tmp_path / "by_doi.jsonl"
    by_doi.write_text(json.dumps({"DOI": "10.1/x"}) + "\n" + json.dumps({"DOI": "10.1/y"}) + "\n")
    assert read_case_ids(by_doi, doi_column="DOI").ids == ("10.1/x", "10.1/y")
    with pytest.raises(SplitError, match=r"row 1: no 'ID' column among \['Case ID', 'DOI', 'title'\]"):
        read_case_ids(csv_file, id_column="ID")
    with pytest.raises(SplitError, match=r"line 1: no 'Case ID' string field"):
        read_case_ids(by_doi, id_column="Case ID")


def test_read_case_ids_collects_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"case_id": "a"}\n{oops\n{"title": "no id"}\n{"case_id": "a"}\n')
    with pytest.raises(SplitError) as info:
        read_case_ids(bad)
    msg = str(info.value)
    assert "(3 problems)" in msg
    assert "line 2: malformed JSON" in msg and "line 3: no 'case_id'" in msg and "line 4: case id 'a' repeats line 1" in msg
    nocol = tmp_path / "x.csv"
    nocol.write_text("name,text\nA,b\n")
    with pytest.raises(SplitError, match="no 'case_id' \\(or 'doi'/'id'\\) column"):
        read_case_ids(nocol)
    with pytest.raises(SplitError, match="no such case file"):
        read_case_ids(tmp_path / "nothing.jsonl")


def test_old_split_folders_still_load(tmp_path: Path) -> None:
    """A split folder as written before frame splits existed (no frame_origin) loads unchanged."""
    pack = synthetic_pack()
    s = make_splits(pack)
    out = tmp_path / "old"
    out.mkdir()
    meta = {"version": 1, "pack": "synthetic", "seed": 42, "holdout_fraction": 0.2, "validation_fraction": 0.3,
            "counts": s.counts(), "files": {"frame": "frame.txt", "holdout": "holdout.txt", "train": "train.txt",
                                            "validation": "validation.txt"}}
    (out / "split.json").write_text(json.dumps(meta, indent=2) + "\n")
    for name in ("frame", "holdout", "train", "validation"):
        (out / f"{name}.txt").write_text("".join(f"{c}\n" for c in getattr(s, name)))
    loaded = load_splits(out)
    assert loaded == s and loaded.frame_origin is None
    # ... and fraction splits still write exactly that file (no new key), so re-running is a no-op.
    from evolve.splits import write_splits

    write_splits(s, out)
    assert json.loads((out / "split.json").read_text()) == meta


def test_bad_frame_origin_in_split_json(tmp_path: Path) -> None:
    from evolve.splits import write_splits

    out = write_splits(make_frame_splits(IDS, pack_name="nejm", preset="paper"), tmp_path / "sp")
    meta = json.loads((out / "split.json").read_text())
    meta["frame_origin"]["n_cases"] = 299
    (out / "split.json").write_text(json.dumps(meta))
    with pytest.raises(SplitError, match="frame_origin.n_cases says the universe has 299 cases but frame \\+ holdout list 300"):
        load_splits(out)
    meta["frame_origin"]["frame"] = "manifest"
    (out / "split.json").write_text(json.dumps(meta))
    with pytest.raises(SplitError, match="split.json, field 'frame_origin'"):
        load_splits(out)
