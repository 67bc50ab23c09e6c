"""Bad input ends in one named error - never a traceback, never a half-written run."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app

runner = CliRunner()
CORPUS = Path(__file__).with_name("corpus")

CONFIG_DEFECTS = {
    "list.json": "holds one JSON object of settings",
    "null.json": "holds one JSON object of settings",
    "section-as-string.json": "'budget' must be an object of settings",
    "bad-number.json": "'budget.accepted'",
    "broken.json": "cannot read config JSON",
    "not-utf8.json": "cannot read config JSON",
}


@pytest.mark.parametrize("name", sorted(CONFIG_DEFECTS))
def test_calibrate_refuses_a_bad_config_file(name: str, tmp_path: Path, tiny_pack_dir: Path, tiny_splits_dir: Path) -> None:
    archives = tmp_path / "archives"
    args = ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir), "--archives-dir", str(archives),
            "--config", str(CORPUS / "config" / name)]
    args += ["--run-id", "r"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert CONFIG_DEFECTS[name] in result.output
    assert "Traceback" not in result.output
    assert not archives.exists()  # nothing written


@pytest.mark.parametrize("run_id", ["..", ".", "..."])
def test_a_run_id_never_leaves_the_archives_folder(run_id: str, tmp_path: Path, tiny_pack_dir: Path,
                                                   tiny_splits_dir: Path) -> None:
    archives = tmp_path / "deep" / "archives"
    result = runner.invoke(app, ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir),
                                 "--archives-dir", str(archives), "--run-id", run_id])
    assert result.exit_code == 2 and "a run id is a folder name" in result.output
    assert not (tmp_path / "deep").exists()
    result = runner.invoke(app, ["bench", "run", "--cases", str(tiny_pack_dir), "--archives-dir", str(archives),
                                 "--run-id", run_id])
    assert result.exit_code == 2 and "a run id is a folder name" in result.output
    assert not (tmp_path / "deep").exists()


def _ratings_lines(pack: Path) -> list[str]:
    return (pack / "ratings.csv").read_text(encoding="utf-8").splitlines(keepends=True)


def test_an_unclosed_quote_in_ratings_is_named_not_swallowed(tiny_pack_dir: Path) -> None:
    lines = _ratings_lines(tiny_pack_dir)
    n = len(lines) - 1
    cells = lines[2].rstrip("\n").split(",")
    lines[2] = ",".join([*cells[:-1], '"a comment whose quote is never closed']) + "\n"
    (tiny_pack_dir / "ratings.csv").write_text("".join(lines), encoding="utf-8")
    result = runner.invoke(app, ["ratings", "check", str(tiny_pack_dir)])
    assert result.exit_code == 2, result.output  # not "n-k ratings", exit 0
    assert "never closed" in result.output and "ratings.csv, line" in result.output
    assert n > 2


def test_a_very_long_comment_is_read(tiny_pack_dir: Path) -> None:
    import csv
    import io

    rows = list(csv.reader(io.StringIO((tiny_pack_dir / "ratings.csv").read_text(encoding="utf-8"))))
    comment = rows[0].index("comment")
    rows[1][comment] = "x" * 200_000
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    (tiny_pack_dir / "ratings.csv").write_text(out.getvalue(), encoding="utf-8")
    result = runner.invoke(app, ["ratings", "check", str(tiny_pack_dir)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("content", "words"), [
    (b"", "the file is empty"),
    (b",Question,answer\n0,caf\xe9,x\n", "not UTF-8 text"),
    (None, "holds a header but no rows"),
])
def test_kqa_files_that_are_not_the_data_set(tmp_path: Path, content: bytes | None, words: str) -> None:
    src = tmp_path / "kqa"
    src.mkdir()
    if content is None:  # the real header, no rows
        content = (b",Question,answer,claim,llm_x,category_x,label_1,label_2,label_3\n")
    (src / "NLI_medical_annotator.csv").write_bytes(content)
    out = tmp_path / "out"
    result = runner.invoke(app, ["ratings", "import", "kqa", str(src), "--out", str(out)])
    assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_a_savage_file_that_is_not_a_spreadsheet(tmp_path: Path) -> None:
    path = tmp_path / "savage.xlsx"
    path.write_text("not a workbook")
    result = runner.invoke(app, ["ratings", "import", "savage", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "cannot be read as a table" in result.output
    assert not (tmp_path / "out").exists()


def test_a_byte_order_mark_is_read_the_same_way_in_every_file(tiny_pack_dir: Path, tiny_splits_dir: Path) -> None:
    """Editors on Windows write a BOM; every text file of a pack and a split accepts it."""
    from evolve.data import load_pack
    from evolve.splits import check_splits, load_splits

    for path in [*tiny_pack_dir.glob("*.jsonl"), tiny_pack_dir / "pack.json", *tiny_splits_dir.glob("*.txt"),
                 tiny_splits_dir / "split.json"]:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    pack = load_pack(tiny_pack_dir)
    check_splits(load_splits(tiny_splits_dir), pack)


def test_a_mapped_column_that_the_case_file_lacks_is_refused(tmp_path: Path) -> None:
    from evolve.data import load_cases
    from evolve.data._cases import parse_column_overrides
    from evolve.errors import DataError

    cases = tmp_path / "cases.csv"
    cases.write_text("case_id,title,case_text,answer\nc1,T,some text,A\n", encoding="utf-8")
    with pytest.raises(DataError, match="column 'NO_SUCH_COLUMN' for field 'doi' is missing"):
        load_cases(cases, mapping=parse_column_overrides(["doi=NO_SUCH_COLUMN"]))


def test_splits_make_refuses_a_mapped_doi_column_the_case_file_lacks(tmp_path: Path, tiny_pack_dir: Path) -> None:
    from evolve.data import load_pack

    ids = [c.case_id for c in load_pack(tiny_pack_dir).cases]
    cases = tmp_path / "cases.csv"
    cases.write_text("case_id,doi,case_text\n" + "".join(f"{i},10.1/{i},text\n" for i in ids), encoding="utf-8")
    out = tmp_path / "splits"
    result = runner.invoke(app, ["splits", "make", str(tiny_pack_dir), "--cases", str(cases), "--column", "doi=NO_SUCH",
                                 "--frame-size", str(len(ids) - 2), "--out", str(out)])
    assert result.exit_code == 2 and "no 'NO_SUCH' column" in result.output
    assert not out.exists()
