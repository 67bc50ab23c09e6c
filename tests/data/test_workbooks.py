"""Physician workbook import (consilium paper, physician spreadsheets): the synthetic example, every error kind, warnings, CLI."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openpyxl import Workbook, load_workbook
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import (
    RATINGS_COLUMNS,
    STRUCTURAL_EXCLUSIONS_FILE,
    WORKBOOK_HEADERS,
    check_pack,
    import_workbooks,
    load_pack,
    load_structural_exclusions,
    write_pack,
    write_workbook_import,
    write_workbook_template,
)
from evolve.errors import PackError
from evolve.rubric import load_rubric
from tests.data.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "ratings" / "example-workbooks"
C1, C2, C3 = (f"10.0000/synthetic-00{i}" for i in (1, 2, 3))
runner = CliRunner()


@pytest.fixture
def ex(tmp_path: Path) -> Path:
    """A private copy of the example set (cases.jsonl, outputs/, workbooks/)."""
    dest = tmp_path / "ex"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _import(ex: Path, **kwargs: Any):
    return import_workbooks(ex / "workbooks", cases=ex / "cases.jsonl", outputs=ex / "outputs", **kwargs)


def _edit_xlsx(path: Path, change: Callable[[Any], None]) -> None:
    book = load_workbook(path)
    change(book)
    book.save(path)


def _edit_csv(path: Path, change: Callable[[list[list[str]]], None]) -> None:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    change(rows)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)


def _cli_import(ex: Path, out: Path, *extra: str):
    return runner.invoke(app, ["ratings", "import-workbooks", str(ex / "workbooks"), "--cases", str(ex / "cases.jsonl"),
                               "--outputs", str(ex / "outputs"), "--out", str(out), *extra])


# --------------------------------------------------------------------------------------------
# Happy path on the shipped example
# --------------------------------------------------------------------------------------------


def test_example_imports_with_expected_counts(ex):
    result = _import(ex)
    s = result.summary
    assert (s.n_workbooks, s.n_sheets, s.n_rows, s.n_cases, s.n_targets) == (3, 3, 8, 3, 22)
    # per row: 7 reasoning + 5 opinion + 8 final + 3 case ratings; 1 + 3 structurally inapplicable cells
    assert (s.n_ratings, s.n_structural_exclusions, s.n_not_evaluable, s.n_warnings) == (184, 32, 1, 0)
    assert s.raters == ("nephrology/Nephrology", "neurology/neurology", "synthetic-cardiologist-1")
    assert s.specialties_per_case == {C1: 3, C2: 3, C3: 2}
    pack = result.pack
    assert pack.case_ids == (C1, C2, C3)
    assert pack.manifest.name == "workbooks" and pack.manifest.importer == "workbooks/1"
    assert pack.manifest.rubric.id == "consilium"
    assert pack.manifest.rubric.version == load_rubric("consilium").version
    assert {"cardiology.xlsx", "nephrology.xlsx", "neurology.csv"} <= set(pack.manifest.source_sha256)


def test_a_cell_lands_on_the_right_target_rater_criterion_and_score(ex):
    pack = _import(ex).pack
    # cardiology.xlsx: template layout, header in row 4; case 002 is row 6; column F = reasoning_5.
    sheet = load_workbook(ex / "workbooks" / "cardiology.xlsx").active
    assert sheet["A6"].value == C2 and sheet["F4"].value == "reasoning_5" and sheet["F6"].value == 1
    hits = [r for r in pack.ratings
            if r.target_id == f"{C2}:free-form:cardiologist:reasoning" and r.criterion == "differential_diagnosis"]
    assert len(hits) == 1
    rating = hits[0]
    assert (rating.case_id, rating.rater_id, rating.score, rating.not_evaluable) == (
        C2, "synthetic-cardiologist-1", 1, False)
    assert rating.comment == sheet["AC6"].value  # the row comment
    # Every rating of that row carries the same comment; final and case targets are rated too.
    row = [r for r in pack.ratings if r.case_id == C2 and r.rater_id == "synthetic-cardiologist-1"]
    assert len(row) == 23 and {r.comment for r in row} == {sheet["AC6"].value}
    by_target = {r.target_id for r in row}
    assert by_target == {f"{C2}:free-form:cardiologist:reasoning", f"{C2}:free-form:cardiologist:opinion",
                         f"{C2}:free-form:final", f"{C2}:free-form:case"}
    case_level = {r.criterion: r.score for r in row if r.target_id.endswith(":case")}
    assert case_level == {"panel_adequacy": sheet["Z6"].value, "case_complexity": sheet["AA6"].value,
                          "overall_quality": sheet["AB6"].value}


def test_csv_specialty_from_file_stem_and_not_evaluable(ex):
    pack = _import(ex).pack
    ne = [r for r in pack.ratings if r.not_evaluable]
    assert len(ne) == 1
    assert (ne[0].target_id, ne[0].rater_id, ne[0].criterion, ne[0].score) == (
        f"{C1}:free-form:neurologist:opinion", "neurology/neurology", "factual_accuracy", None)
    assert "NE" in ne[0].comment
    # nephrology.xlsx has no labels: the specialty is the sheet name and rates the Nephrologist role.
    assert any(r.rater_id == "nephrology/Nephrology" and r.target_id == f"{C1}:free-form:nephrologist:reasoning"
               for r in pack.ratings)


def test_written_pack_passes_check_and_keeps_structural_exclusions(ex, tmp_path):
    result = _import(ex)
    out = write_workbook_import(result, tmp_path / "pack")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["pack.json", "cases.jsonl", "targets.jsonl", "ratings.csv", STRUCTURAL_EXCLUSIONS_FILE])
    summary = check_pack(out)
    assert (summary.n_cases, summary.n_targets, summary.n_ratings) == (3, 22, 184)
    assert load_pack(out).ratings == result.pack.ratings  # the extra file is tolerated, never loaded

    with open(out / STRUCTURAL_EXCLUSIONS_FILE, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == RATINGS_COLUMNS and len(rows) == 32
    rubric = load_rubric("consilium")
    targets = {t.target_id: t for t in result.pack.targets}
    for row in rows:  # every excluded cell is an inapplicable pair, on a real target
        assert not rubric.applies(row["criterion"], targets[row["target_id"]].component)
    assert {(targets[r["target_id"]].component, r["criterion"]) for r in rows} == {
        ("reasoning", "final_conclusion"), ("opinion", "data_use"), ("opinion", "differential_diagnosis"),
        ("opinion", "management")}
    first = rows[0]
    assert first == {"case_id": C1, "target_id": f"{C1}:free-form:cardiologist:reasoning",
                     "rater_id": "synthetic-cardiologist-1", "criterion": "final_conclusion", "score": "2",
                     "not_evaluable": "false", "comment": first["comment"]}
    assert first["comment"].startswith("Panel:")
    assert load_structural_exclusions(out) == result.structural_exclusions


def test_cli_import_then_check(ex, tmp_path):
    out = tmp_path / "pack"
    result = _cli_import(ex, out, "--name", "example-workbooks")
    assert result.exit_code == 0, result.output
    assert "184 ratings" in result.output and "32 cells" in result.output
    assert json.loads(runner.invoke(app, ["ratings", "check", str(out)]).stdout)["name"] == "example-workbooks"


# --------------------------------------------------------------------------------------------
# Errors: each names workbook, sheet, row and column, and nothing is written
# --------------------------------------------------------------------------------------------


def _nephrology(change: Callable[[Any], None]) -> Callable[[Path], None]:
    return lambda ex: _edit_xlsx(ex / "workbooks" / "nephrology.xlsx", lambda book: change(book["Nephrology"]))


def _neurology(change: Callable[[list[list[str]]], None]) -> Callable[[Path], None]:
    return lambda ex: _edit_csv(ex / "workbooks" / "neurology.csv", change)


def _clear(ws: Any, row: int, col: int) -> None:
    ws.cell(row, col).value = None  # ws.cell(r, c, None) would leave the value as it is


def _set(row: int, col: int, value: str) -> Callable[[list[list[str]]], None]:
    def change(rows: list[list[str]]) -> None:
        rows[row - 1][col - 1] = value
    return change


ERRORS = [
    # (id, edit, location, message fragment)
    ("xlsx-empty-cell", _nephrology(lambda ws: _clear(ws, 3, 3)),
     "nephrology.xlsx, sheet 'Nephrology', row 3, column C (reasoning_2)", "empty cell"),
    ("xlsx-formula-without-saved-value", _nephrology(lambda ws: ws.cell(3, 3, "=1+2")),  # openpyxl saves no value
     "nephrology.xlsx, sheet 'Nephrology', row 3, column C (reasoning_2)", "A formula whose value was never saved"),
    ("csv-empty-cell", _neurology(_set(2, 20, "")),
     "neurology.csv, sheet 'neurology', row 2, column T (final_3)", "empty cell"),
    ("xlsx-out-of-range", _nephrology(lambda ws: ws.cell(2, 4, 4)),
     "nephrology.xlsx, sheet 'Nephrology', row 2, column D (reasoning_3)", "4 is not one of the scores 0-3"),
    ("xlsx-fraction", _nephrology(lambda ws: ws.cell(2, 4, 2.5)),
     "nephrology.xlsx, sheet 'Nephrology', row 2, column D (reasoning_3)", "2.5 is not one of the scores 0-3"),
    ("csv-out-of-range", _neurology(_set(3, 2, "-1")),
     "neurology.csv, sheet 'neurology', row 3, column B (reasoning_1)", "'-1' is not one of the scores 0-3"),
    ("csv-not-a-number", _neurology(_set(3, 2, "good")),
     "neurology.csv, sheet 'neurology', row 3, column B (reasoning_1)", "'good' is not a score"),
    ("xlsx-ne-not-allowed", _nephrology(lambda ws: ws.cell(2, 26, "N/E")),
     "nephrology.xlsx, sheet 'Nephrology', row 2, column Z (panel_adequacy)",
     "'N/E' (not evaluable) is not allowed for criterion 9"),
    ("csv-ne-not-allowed", _neurology(_set(4, 27, "not evaluable")),
     "neurology.csv, sheet 'neurology', row 4, column AA (case_complexity)", "is not allowed for criterion 10"),
    ("xlsx-unknown-case", _nephrology(lambda ws: ws.cell(3, 1, "10.0000/synthetic-999")),
     "nephrology.xlsx, sheet 'Nephrology', row 3, column A (case_id)", "unknown case id '10.0000/synthetic-999'"),
    ("csv-case-without-record", None,  # set up below: a case with no consilium record
     "neurology.csv, sheet 'neurology', row 2, column A (case_id)", "has no consilium record"),
    ("xlsx-duplicate-row", _nephrology(lambda ws: ws.append([c.value for c in ws[2]])),
     "nephrology.xlsx, sheet 'Nephrology', row 4, column A (case_id)", "duplicate row"),
    ("csv-duplicate-row", _neurology(lambda rows: rows.append(list(rows[1]))),
     "neurology.csv, sheet 'neurology', row 5, column A (case_id)", "duplicate row"),
    ("xlsx-wrong-header", _nephrology(lambda ws: ws.cell(1, 11, "opinion 9")),
     "nephrology.xlsx, sheet 'Nephrology', row 1, column K (opinion_2)",
     "header 'opinion 9' names opinion criterion 9, which no column of the workbook holds"),
    ("csv-misplaced-header", _neurology(_set(1, 29, "Overall quality")),
     "neurology.csv, sheet 'neurology', row 1, column AC (comment)",
     "header 'Overall quality' names criterion 11 (overall_quality), which the consilium paper's workbook layout puts in column AB"),
    ("xlsx-no-header", _nephrology(lambda ws: (ws.delete_rows(2, ws.max_row), ws.cell(1, 1, "Ratings"))),
     "nephrology.xlsx, sheet 'Nephrology', row 1, column A", "no header row and no ratings"),
    ("xlsx-unmatched-specialty", _nephrology(lambda ws: setattr(ws, "title", "Hepatology")),
     "nephrology.xlsx, sheet 'Hepatology', row 2, column A (case_id)", "specialty 'Hepatology'"),
]


@pytest.mark.parametrize(("edit", "where", "fragment"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_each_error_names_location_and_nothing_is_written(ex, tmp_path, edit, where, fragment):
    if edit is None:  # a case in the case file whose consilium record is missing
        (ex / "outputs" / "10.0000_synthetic-001.json").unlink()
    else:
        edit(ex)
    out = tmp_path / "never"
    with pytest.raises(PackError) as info:
        _import(ex)
    msg = str(info.value)
    line = next((ln for ln in msg.splitlines() if where in ln), None)
    assert line is not None, msg
    assert fragment in line, line
    result = _cli_import(ex, out)
    assert result.exit_code == 2, result.output
    assert where in result.output
    assert not out.exists()
    assert not any(p.name.startswith(".never") for p in tmp_path.iterdir())


def test_unmatched_specialty_lists_roles_and_role_map_fix(ex):
    _nephrology(lambda ws: setattr(ws, "title", "Kidney"))(ex)
    with pytest.raises(PackError) as info:
        _import(ex)
    msg = str(info.value)
    assert "['Cardiologist', 'Nephrologist', 'Neurologist']" in msg and "--role-map" in msg
    assert "sheet name 'Kidney'" in msg


def test_role_map_resolves_a_specialty(ex, tmp_path):
    _nephrology(lambda ws: setattr(ws, "title", "Kidney"))(ex)
    role_map = tmp_path / "roles.csv"
    role_map.write_text("specialty,role\nKidney,Renal physician\nkidney,Nephrologist\n", encoding="utf-8")
    result = _import(ex, role_map=role_map)
    assert "nephrology/Kidney" in result.summary.raters
    assert any(r.rater_id == "nephrology/Kidney" and ":nephrologist:" in r.target_id for r in result.pack.ratings)
    assert "roles.csv" in result.pack.manifest.source_sha256


def test_all_problems_are_collected_into_one_error(ex):
    _nephrology(lambda ws: (_clear(ws, 2, 2), ws.cell(3, 27, 9)))(ex)
    _neurology(_set(3, 1, "10.0000/unknown"))(ex)
    with pytest.raises(PackError, match=r"\(3 problems\)") as info:
        _import(ex)
    msg = str(info.value)
    assert "nephrology.xlsx" in msg and "neurology.csv" in msg


def test_several_records_need_a_condition(ex):
    raw = json.loads((ex / "outputs" / "10.0000_synthetic-002.json").read_text())
    raw["condition"] = "structured"
    raw["final"] = "A different, structured final report."
    (ex / "outputs" / "10.0000_synthetic-002.structured.json").write_text(json.dumps(raw))
    with pytest.raises(PackError) as info:
        _import(ex)
    msg = str(info.value)
    assert "conditions: ['free-form', 'structured']" in msg and "--condition" in msg
    with pytest.raises(PackError, match="no consilium record with condition 'structured'"):
        _import(ex, condition="structured")  # cases 001 and 003 exist only as free-form
    pack = _import(ex, condition="free-form").pack
    assert {t.condition for t in pack.targets} == {"free-form"}


# --------------------------------------------------------------------------------------------
# Warnings, tolerated variations
# --------------------------------------------------------------------------------------------


def test_low_score_without_comment_is_a_warning(ex, tmp_path):
    _neurology(_set(3, 2, "0"))(ex)  # case 002 has no comment
    result = _import(ex)
    assert result.summary.n_warnings == 1
    warning = result.summary.warnings[0]
    assert warning.startswith("neurology.csv, sheet 'neurology', row 3:") and "column(s) B" in warning
    assert "AC" in warning
    cli = _cli_import(ex, tmp_path / "pack")
    assert cli.exit_code == 0 and "warning" in cli.output and "1 warning(s)" in cli.output


def test_variants_excel_floats_marks_and_case_id_forms(ex):
    def change(ws):
        ws.cell(2, 1, "10.0000_SYNTHETIC-001")  # record file name form, other letter case
        ws.cell(2, 2, 2.0)  # Excel float
        ws.cell(2, 3, " n/e ")  # not-evaluable mark, allowed for criterion 2
        ws.cell(1, 2, "Reasoning 1 - factual accuracy")  # descriptive header
    _nephrology(change)(ex)
    pack = _import(ex).pack
    row = {r.criterion: r for r in pack.ratings
           if r.rater_id == "nephrology/Nephrology" and r.target_id == f"{C1}:free-form:nephrologist:reasoning"}
    assert row["factual_accuracy"].score == 2
    assert row["problem_prioritisation"].not_evaluable


def test_multi_sheet_workbook_and_default_sheet_name(ex):
    book = load_workbook(ex / "workbooks" / "nephrology.xlsx")
    extra = book.create_sheet("Neurology")
    for row in load_workbook(ex / "workbooks" / "nephrology.xlsx")["Nephrology"].iter_rows(values_only=True):
        extra.append(row)
    book.create_sheet("Empty")
    book.save(ex / "workbooks" / "nephrology.xlsx")
    (ex / "workbooks" / "neurology.csv").unlink()
    result = _import(ex)
    assert "nephrology/Neurology" in result.summary.raters
    assert any("sheet 'Empty'" in w and "empty sheet" in w for w in result.summary.warnings)

    book = Workbook()
    book.active.append(list(WORKBOOK_HEADERS))
    book.active.append([C1] + [2] * 27 + [""])
    (ex / "workbooks" / "nephrology.xlsx").unlink()
    book.save(ex / "workbooks" / "nephrology.xlsx")  # sheet "Sheet": the file stem is the specialty
    assert "nephrology/nephrology" in _import(ex).summary.raters


def test_template_round_trip(ex, tmp_path):
    for path in (ex / "workbooks").iterdir():
        path.unlink()
    path = write_workbook_template(ex / "workbooks" / "heart.xlsx", specialty="Cardiology", case_ids=[C1, C3])
    sheet = load_workbook(path).active
    assert [c.value for c in sheet[4]] == list(WORKBOOK_HEADERS)
    assert (sheet["A1"].value, sheet["B1"].value, sheet["A5"].value, sheet["A6"].value) == ("Specialty", "Cardiology", C1, C3)
    with pytest.raises(PackError, match="empty cell"):  # the template is empty: every score cell is missing
        _import(ex)
    book = load_workbook(path)
    for r in (5, 6):
        for c in range(2, 29):
            book.active.cell(r, c, 3)
    book.save(path)
    result = _import(ex)
    assert result.summary.raters == ("heart/Cardiology",) and result.summary.n_ratings == 46
    with pytest.raises(PackError, match="exists"):
        write_workbook_template(path, specialty="Cardiology")
    cli = runner.invoke(app, ["ratings", "workbook-template", str(tmp_path / "t.xlsx"), "--specialty", "Nephrology",
                              "--case-id", C2])
    assert cli.exit_code == 0, cli.output
    assert load_workbook(tmp_path / "t.xlsx").active["A5"].value == C2


def test_write_pack_extra_files_refuses_pack_names(ex, tmp_path):
    pack = _import(ex).pack
    with pytest.raises(PackError, match="plain, visible file name"):
        write_pack(pack, tmp_path / "p", extra_files={"ratings.csv": ""})
    with pytest.raises(PackError, match="plain, visible file name"):
        write_pack(pack, tmp_path / "p", extra_files={"../x.csv": ""})


def test_make_example_is_deterministic(tmp_path):
    spec = importlib.util.spec_from_file_location("make_example", EXAMPLE / "make_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.build(tmp_path / "regen")
    for path in written:
        committed = EXAMPLE / path.relative_to(tmp_path / "regen")
        if path.suffix == ".xlsx":
            def cells(p: Path) -> list:
                book = load_workbook(p)
                return [(ws.title, list(ws.iter_rows(values_only=True))) for ws in book.worksheets]
            assert cells(path) == cells(committed), path.name
        else:
            assert path.read_bytes() == committed.read_bytes(), path.name


def test_values_right_of_the_comment_column_are_warned_about_not_dropped_in_silence(ex):
    _nephrology(lambda ws: (ws.cell(1, 30, "Reviewer initials"), ws.cell(2, 30, "JD")))(ex)  # column AD
    result = _import(ex)
    assert result.summary.n_ratings == 184  # what the workbook rates is read as before
    (warning,) = [w for w in result.summary.warnings if "right of" in w]
    assert "nephrology.xlsx, sheet 'Nephrology': column(s) AD right of AC hold values that are not read" in warning
