"""Physician workbooks are read by column position (consilium paper, physician spreadsheets); header text is only checked.

Header cells that name their own column in another form (``R1``, ``Reasoning - criterion 1``,
``Overall``, ``Notes``, the criterion's name ...), empty header cells and a missing header row
are accepted with a warning that names the workbook, sheet and what was assumed. A header cell
that names a different column (swapped or shifted columns) is an error naming the cell, and it
is reported together with the problems of the data cells.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openpyxl.utils import column_index_from_string

from evolve.data import WORKBOOK_HEADERS
from evolve.data._workbooks import _MAX_REPORTED
from evolve.errors import PackError
from tests.data.test_workbooks import C1, C3, EXAMPLE, _edit_csv, _edit_xlsx, _import

NEPHROLOGY = "nephrology.xlsx, sheet 'Nephrology'"
NEUROLOGY = "neurology.csv, sheet 'neurology'"


@pytest.fixture
def ex(tmp_path: Path) -> Path:
    """A private copy of the example workbook set (cases.jsonl, outputs/, workbooks/)."""
    dest = tmp_path / "ex"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _col(letter: str) -> int:
    return column_index_from_string(letter)


def _nephrology(ex: Path, change: Callable[[Any], None]) -> None:
    _edit_xlsx(ex / "workbooks" / "nephrology.xlsx", lambda book: change(book["Nephrology"]))


def _neurology(ex: Path, change: Callable[[list[list[str]]], None]) -> None:
    _edit_csv(ex / "workbooks" / "neurology.csv", change)


def _xlsx_headers(ex: Path, headers: dict[str, Any]) -> None:
    """Set header cells (row 1) of nephrology.xlsx, by column letter."""
    def change(ws: Any) -> None:
        for letter, text in headers.items():
            ws.cell(1, _col(letter)).value = text
    _nephrology(ex, change)


def _csv_headers(ex: Path, headers: dict[str, str]) -> None:
    """Set header cells (row 1) of neurology.csv, by column letter."""
    def change(rows: list[list[str]]) -> None:
        for letter, text in headers.items():
            rows[0][_col(letter) - 1] = text
    _neurology(ex, change)


def _problems(info: pytest.ExceptionInfo[PackError]) -> list[str]:
    return [ln[4:] for ln in str(info.value).splitlines() if ln.startswith("  - ")]


def _line(lines: list[str], where: str) -> str:
    hits = [ln for ln in lines if ln.startswith(where + ":")]
    assert len(hits) == 1, lines
    return hits[0]


def _score(pack: Any, rater: str, target: str, criterion: str) -> int | None:
    hits = [r for r in pack.ratings if r.rater_id == rater and r.target_id == target and r.criterion == criterion]
    assert len(hits) == 1, (rater, target, criterion)
    return hits[0].score


# --------------------------------------------------------------------------------------------
# Header variants: accepted with a warning, scores under the criterion of the position
# --------------------------------------------------------------------------------------------

VARIANTS = [
    # (column, header text) - each names the column it sits in, in a non-standard way
    ("A", "Case"), ("A", "Case no."), ("A", "ID"), ("A", "DOI"), ("A", "Case number"),
    ("B", "Reasoning – criterion 1"), ("B", "R1"), ("B", "Factual accuracy"), ("B", "1. Factual accuracy and sources"),
    ("D", "Reasoning: data use"), ("E", "reasoning_coherence"), ("F", "Differential diagnosis"),
    ("I", "Clinical safety"), ("I", "Criterion 8"), ("I", "8"),
    ("J", "O1"), ("J", "Opinion"), ("L", "O3"), ("Q", "Opinion – clinical safety"), ("Y", "F8"), ("O", "Opinion – Quality of the final clinical conclusion"),
    ("R", "F1"), ("R", "Final report, criterion 1"), ("Y", "Final – clinical safety"),
    ("Z", "Panel"), ("Z", "Adequacy"), ("Z", "Adequacy of the specialist panel"), ("AA", "Complexity"), ("AA", "Clinical complexity"),
    ("AB", "Overall"), ("AB", "Overall quality (0-3)"), ("AC", "Notes"), ("AC", "Remarks"),
]


@pytest.mark.parametrize(("letter", "text"), VARIANTS, ids=[f"{c}-{t}" for c, t in VARIANTS])
def test_a_header_variant_is_accepted_with_a_warning(ex, letter, text):
    before = _import(ex).pack.ratings
    _xlsx_headers(ex, {letter: text})
    result = _import(ex)
    assert result.pack.ratings == before  # read by position: the same scores under the same criteria
    (warning,) = result.summary.warnings
    header = WORKBOOK_HEADERS[_col(letter) - 1]
    assert warning.startswith(f"{NEPHROLOGY}, row 1: 1 header cell(s) are not the standard labels")
    assert f"{letter} {text!r} as {header}" in warning and "(not recognised)" not in warning
    assert "read by position" in warning


def test_an_all_variant_csv_header_reads_every_score_under_its_criterion(ex):
    before = _import(ex).pack
    headers = (["Case no."] + [f"R{k}" for k in range(1, 9)] + [f"Opinion {k}" for k in range(1, 9)]
               + [f"Final – criterion {k}" for k in range(1, 9)] + ["Panel adequacy", "Complexity", "Overall", "Notes"])
    _neurology(ex, lambda rows: rows.__setitem__(0, headers))
    result = _import(ex)
    assert result.pack.ratings == before.ratings
    (warning,) = result.summary.warnings
    # "Opinion k" and "Panel adequacy" are the standard labels in another spelling: not listed
    assert warning.startswith(f"{NEUROLOGY}, row 1: 20 header cell(s)")
    assert "A 'Case no.' as case_id, B 'R1' as reasoning_1" in warning and "and 12 more" in warning
    # neurology.csv row 2 (case 001): opinion_1 = NE, final_1 = 3, final_2 = 2, overall_quality = 2
    rater = "neurology/neurology"
    pack = result.pack
    ne = [r for r in pack.ratings if r.rater_id == rater and r.not_evaluable]
    assert [(r.target_id, r.criterion) for r in ne] == [(f"{C1}:free-form:neurologist:opinion", "factual_accuracy")]
    assert _score(pack, rater, f"{C1}:free-form:final", "factual_accuracy") == 3
    assert _score(pack, rater, f"{C1}:free-form:final", "problem_prioritisation") == 2
    assert _score(pack, rater, f"{C1}:free-form:case", "overall_quality") == 2
    # row 4 (case 003): reasoning_8 (clinical_safety) = 1 and opinion_8 = 1, the rest of those groups 3
    assert _score(pack, rater, f"{C3}:free-form:neurologist:reasoning", "clinical_safety") == 1
    assert _score(pack, rater, f"{C3}:free-form:neurologist:reasoning", "factual_accuracy") == 3


def test_unrecognised_and_empty_header_cells_are_read_by_position(ex):
    before = _import(ex).pack.ratings
    _xlsx_headers(ex, {"F": "Score", "AC": None})
    result = _import(ex)
    assert result.pack.ratings == before
    (warning,) = result.summary.warnings
    assert "F 'Score' (not recognised) as reasoning_5" in warning and "AC (empty) as comment" in warning


def test_a_dropped_comment_column_is_accepted(ex):
    _neurology(ex, lambda rows: [r.pop() for r in rows])  # was an error: "header is empty, expected 'comment'"
    result = _import(ex)
    assert any(w.startswith(f"{NEUROLOGY}, row 1:") and "AC (empty) as comment" in w for w in result.summary.warnings)
    assert {r.comment for r in result.pack.ratings if r.rater_id == "neurology/neurology"} == {""}


# --------------------------------------------------------------------------------------------
# No header row: refused, unless the caller vouches for the layout (headerless=True)
# --------------------------------------------------------------------------------------------


def test_a_sheet_without_header_row_is_refused_naming_the_sheet_and_the_way_out(ex):
    _nephrology(ex, lambda ws: ws.delete_rows(1))
    with pytest.raises(PackError) as info:
        _import(ex)
    line = _line(_problems(info), f"{NEPHROLOGY}, row 1, column A")
    assert "no header row above the ratings (they start in row 1)" in line
    assert "shifted or swapped cannot be told from the consilium paper, physician spreadsheets layout" in line
    assert "Add the header row (case_id, reasoning_1, ..., comment; columns A-AC)" in line
    assert "pass --no-header (library: headerless=True)" in line


def _swap_reasoning_and_opinion(ws: Any) -> None:
    """Columns B-I and J-Q trade places in every row (the header row is gone)."""
    for row in ws.iter_rows(min_row=1, max_row=ws.max_row):
        values = [c.value for c in row[1:17]]
        for cell, value in zip(row[1:17], values[8:] + values[:8]):
            cell.value = value


def test_swapped_columns_without_a_header_are_refused_not_imported(ex):
    """The danger: reasoning and opinion swapped in a sheet without header - every cell is still a valid
    score, so the import cannot tell; before the fix it imported the wrong pack with a warning."""
    before = _import(ex).pack.ratings
    _nephrology(ex, lambda ws: (ws.delete_rows(1), _swap_reasoning_and_opinion(ws)))
    with pytest.raises(PackError, match="no header row above the ratings"):
        _import(ex)
    vouched = _import(ex, headerless=True).pack.ratings  # what a header-less read would have produced
    assert vouched != before and len(vouched) == len(before)  # silently different scores


def test_xlsx_without_header_row_reads_from_row_one(ex):
    before = _import(ex).pack.ratings
    _nephrology(ex, lambda ws: ws.delete_rows(1))
    result = _import(ex, headerless=True)
    assert result.pack.ratings == before
    (warning,) = result.summary.warnings
    assert warning.startswith(f"{NEPHROLOGY}: no header row; read the ratings from row 1 on by position, as "
                              "vouched for by --no-header")
    assert "B-I reasoning criteria 1-8" in warning
    # nephrology row 2 of the original (now row 1): reasoning_3 (data_use) = 1, reasoning_7 (management) = 1
    target = f"{C1}:free-form:nephrologist:reasoning"
    assert _score(result.pack, "nephrology/Nephrology", target, "data_use") == 1
    assert _score(result.pack, "nephrology/Nephrology", target, "management") == 1
    assert _score(result.pack, "nephrology/Nephrology", target, "factual_accuracy") == 2


def test_csv_without_header_row_reads_from_row_one(ex):
    before = _import(ex).pack.ratings
    _neurology(ex, lambda rows: rows.pop(0))
    result = _import(ex, headerless=True)
    assert result.pack.ratings == before
    (warning,) = result.summary.warnings
    assert warning.startswith(f"{NEUROLOGY}: no header row; read the ratings from row 1 on")


def test_an_empty_header_row_and_a_header_row_without_labels(ex):
    before = _import(ex).pack.ratings
    _nephrology(ex, lambda ws: [setattr(c, "value", None) for c in ws[1]])  # row 1 left empty
    _csv_headers(ex, {"A": "Paper", "B": "x"})  # column A unrecognised: the row above the ratings is their header
    result = _import(ex, headerless=True)
    assert result.pack.ratings == before
    warnings = result.summary.warnings
    assert any(w.startswith(f"{NEPHROLOGY}: no header row; read the ratings from row 2 on") for w in warnings)
    assert any(w.startswith(f"{NEUROLOGY}, row 1: 2 header cell(s)") and "A 'Paper' (not recognised) as case_id" in w
               for w in warnings)


def test_template_without_its_header_row_keeps_labels(ex):
    before = _import(ex).pack.ratings
    _edit_xlsx(ex / "workbooks" / "cardiology.xlsx", lambda book: book.active.delete_rows(4))
    result = _import(ex)
    assert result.pack.ratings == before  # rater and specialty still come from the labels in rows 1-2
    (warning,) = result.summary.warnings  # the criterion legend in row 3 is read as the header
    assert warning.startswith("cardiology.xlsx, sheet 'Cardiology', row 3:")
    assert "'criterion' (not recognised) as case_id" in warning


# --------------------------------------------------------------------------------------------
# A header naming a different column is an error
# --------------------------------------------------------------------------------------------


def test_a_swapped_header_names_the_cell_what_it_says_and_where_it_belongs(ex):
    _xlsx_headers(ex, {"D": "opinion_3"})
    with pytest.raises(PackError) as info:
        _import(ex)
    line = _line(_problems(info), f"{NEPHROLOGY}, row 1, column D (reasoning_3)")
    assert "header 'opinion_3' names opinion criterion 3 (data_use), which the consilium paper's workbook layout puts in column L" in line
    assert "column D holds reasoning_3 (data_use)" in line
    assert "this column belongs in L" in line and "rename it 'reasoning_3'" in line


def test_two_swapped_columns_are_both_named(ex):
    _csv_headers(ex, {"B": "Reasoning 2", "C": "Reasoning 1"})
    with pytest.raises(PackError, match=r"\(2 problems\)") as info:
        _import(ex)
    lines = _problems(info)
    assert "which the consilium paper's workbook layout puts in column C" in _line(lines, f"{NEUROLOGY}, row 1, column B (reasoning_1)")
    assert "which the consilium paper's workbook layout puts in column B" in _line(lines, f"{NEUROLOGY}, row 1, column C (reasoning_2)")


@pytest.mark.parametrize(("letter", "text", "says"), [
    ("B", "R2", "reasoning criterion 2"),
    ("J", "Reasoning", "the reasoning columns"),
    ("K", "Criterion 3", "criterion 3 (data_use)"),
    ("Z", "Complexity", "criterion 10 (case_complexity)"),
    ("AB", "Comment", "the comment"),
    ("C", "Case ID", "the case id"),
    ("I", "Final 8", "final criterion 8"),
    ("E", "Management", "criterion 7 (management)"),
])
def test_a_header_naming_another_column_is_an_error(ex, letter, text, says):
    _xlsx_headers(ex, {letter: text})
    with pytest.raises(PackError) as info:
        _import(ex)
    line = _line(_problems(info), f"{NEPHROLOGY}, row 1, column {letter} ({WORKBOOK_HEADERS[_col(letter) - 1]})")
    assert f"header {text!r} names {says}" in line


def test_columns_shifted_by_one_are_an_error(ex):
    _neurology(ex, lambda rows: [r.insert(1, "Patient" if i == 0 else f"patient {i}") for i, r in enumerate(rows)])
    _nephrology(ex, lambda ws: ws.insert_cols(2))  # an empty column B: 27 more misplaced headers
    with pytest.raises(PackError) as info:
        _import(ex)
    lines = _problems(info)
    line = _line(lines, f"{NEUROLOGY}, row 1, column C (reasoning_2)")
    assert "header 'Reasoning 1' names reasoning criterion 1" in line and "this column belongs in B" in line
    assert "empty cell" in _line(lines, f"{NEPHROLOGY}, row 2, column B (reasoning_1)")  # the cells, too
    msg = str(info.value)
    assert msg.count("\n  - ") == _MAX_REPORTED and "more problem(s) not shown" in msg  # the limit still holds


# --------------------------------------------------------------------------------------------
# Header problems and cell problems together
# --------------------------------------------------------------------------------------------


def test_bad_header_and_bad_cells_are_reported_in_one_error(ex):
    def change(ws: Any) -> None:
        ws.cell(1, _col("D")).value = "opinion_3"
        ws.cell(3, _col("C")).value = None
        ws.cell(2, _col("Z")).value = 7
    _nephrology(ex, change)
    _neurology(ex, lambda rows: rows[2].__setitem__(1, "good"))
    with pytest.raises(PackError, match=r"\(4 problems\)") as info:
        _import(ex)
    lines = _problems(info)
    assert "names opinion criterion 3" in _line(lines, f"{NEPHROLOGY}, row 1, column D (reasoning_3)")
    assert "empty cell" in _line(lines, f"{NEPHROLOGY}, row 3, column C (reasoning_2)")
    assert "7 is not one of the scores 0-3" in _line(lines, f"{NEPHROLOGY}, row 2, column Z (panel_adequacy)")
    assert "'good' is not a score" in _line(lines, f"{NEUROLOGY}, row 3, column B (reasoning_1)")
    assert [ln.split(",")[0] for ln in lines][:3] == ["nephrology.xlsx"] * 3  # header first, then its rows


def test_a_sheet_with_neither_header_nor_ratings_is_an_error(ex):
    _nephrology(ex, lambda ws: (ws.delete_rows(1, ws.max_row), ws.append(["Ratings of Dr X", "draft"])))
    with pytest.raises(PackError) as info:
        _import(ex)
    line = _line(_problems(info), f"{NEPHROLOGY}, row 1, column A")
    assert "no header row and no ratings" in line and "workbook-template" in line


def test_standard_labels_in_another_spelling_give_no_warning(ex):
    header = (ex / "workbooks" / "neurology.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("Case ID,Reasoning 1,") and header.endswith(",Comment")
    _xlsx_headers(ex, {"B": "Reasoning 1 - factual accuracy", "AC": "Comments"})
    assert _import(ex).summary.warnings == ()


def test_cli_refuses_a_headerless_sheet_and_reads_it_with_no_header(ex, tmp_path):
    from typer.testing import CliRunner

    from evolve.cli import app

    _nephrology(ex, lambda ws: ws.delete_rows(1))
    argv = ["ratings", "import-workbooks", str(ex / "workbooks"), "--cases", str(ex / "cases.jsonl"),
            "--outputs", str(ex / "outputs"), "--out", str(tmp_path / "pack")]
    refused = CliRunner().invoke(app, argv)
    assert refused.exit_code == 2 and "no header row above the ratings" in refused.output
    assert "Traceback" not in refused.output and not (tmp_path / "pack").exists()
    vouched = CliRunner().invoke(app, [*argv, "--no-header"])
    assert vouched.exit_code == 0, vouched.output
    assert "as vouched for by --no-header" in vouched.output and (tmp_path / "pack" / "ratings.csv").is_file()


def test_a_comment_with_a_control_character_is_refused_with_its_cell(ex):
    _nephrology(ex, lambda ws: setattr(ws["AC2"], "value", "Missed the potassium\u202e of 5.4"))
    with pytest.raises(PackError) as info:
        _import(ex)
    line = _line(_problems(info), f"{NEPHROLOGY}, row 2, column AC (comment)")
    assert "the comment holds U+202E RIGHT-TO-LEFT OVERRIDE at character 21" in line and "Remove the character" in line
