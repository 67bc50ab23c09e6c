"""Any table in: `import_table` / `import_frame` / `RatingPack.from_frame` on small invented tables.

Every table here is invented for the test (synthetic cases, answers and raters).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import (
    TABLE_FIELDS,
    RatingPack,
    import_frame,
    import_table,
    load_pack,
    parse_score_map,
    parse_table_columns,
    validate_pack,
    write_pack,
)
from evolve.errors import DataError, PackError, RubricError
from evolve.rubric import Rubric

from .conftest import TEST_RUBRIC

RUBRIC = Rubric.model_validate(TEST_RUBRIC)  # in memory: 'support' 0-2 on answers, 'errors' 0-3 on rationales

LONG = pd.DataFrame(
    [
        # case, case_text, target, target_text, component, rater, criterion, score, comment
        ("c1", "Invented question one?", "t1", "Invented answer one.", "answer", "r1", "support", "2", ""),
        ("c1", "Invented question one?", "t1", "Invented answer one.", "answer", "r2", "support", "1", "partly"),
        ("c1", "Invented question one?", "t2", "Invented rationale.", "rationale", "r1", "errors", "3", ""),
        ("c2", "Invented question two?", "t3", "Invented answer two.", "answer", "r1", "support", "0", ""),
    ],
    columns=["case", "case_text", "target", "target_text", "component", "rater", "criterion", "score", "comment"],
)


def _write(frame: pd.DataFrame, path: Path) -> Path:
    suffix = path.suffix
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")), encoding="utf-8")
    elif suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        from openpyxl import Workbook

        wb = Workbook()
        ws = wb.active
        ws.append(list(frame.columns))
        for row in frame.itertuples(index=False):
            ws.append([None if v == "" else v for v in row])
        wb.save(path)
    return path


def _problem_lines(exc: pytest.ExceptionInfo) -> list[str]:
    return [line for line in str(exc.value).splitlines() if line.startswith("  - ")]


# --------------------------------------------------------------------------------------------
# Long and wide layouts
# --------------------------------------------------------------------------------------------


def test_long_table_becomes_a_validated_pack_with_counts():
    result = import_frame(LONG, rubric=RUBRIC, name="invented")
    pack, counts = result.pack, result.counts
    assert [c.case_id for c in pack.cases] == ["c1", "c2"]
    assert [(t.target_id, t.component) for t in pack.targets] == [("t1", "answer"), ("t2", "rationale"), ("t3", "answer")]
    assert [(r.target_id, r.rater_id, r.criterion, r.score, r.comment) for r in pack.ratings] == [
        ("t1", "r1", "support", 2, ""), ("t1", "r2", "support", 1, "partly"),
        ("t2", "r1", "errors", 3, ""), ("t3", "r1", "support", 0, ""),
    ]
    assert pack.manifest.rubric.id == "test-rubric" and pack.manifest.rubric.version == "7"
    assert (counts.n_rows, counts.n_cells, counts.n_scored, counts.n_not_evaluable, counts.n_skipped_empty) == (4, 4, 4, 0, 0)
    assert (counts.n_cases, counts.n_targets) == (2, 3)
    validate_pack(pack, rubric=RUBRIC)  # the in-memory rubric is enough


def test_from_frame_with_in_memory_rubric_and_validate_pack_needs_the_rubric():
    pack = RatingPack.from_frame(LONG, rubric=RUBRIC, name="invented")
    assert pack.path is None and len(pack.ratings) == 4
    # no folder holds 'test-rubric': validating by id fails, by object passes
    with pytest.raises(PackError, match="cannot use rubric 'test-rubric'"):
        validate_pack(pack)
    validate_pack(pack, rubric=RUBRIC)
    other = RUBRIC.model_copy(update={"version": "8"})
    with pytest.raises(PackError, match="checked against rubric 'test-rubric' version '8'"):
        validate_pack(pack, rubric=other)


def test_from_frame_by_rubric_id_under_a_prompts_root(prompts_root):
    pack = RatingPack.from_frame(LONG, rubric="test-rubric", name="invented", prompts_root=prompts_root)
    assert len(pack.targets) == 3
    with pytest.raises(RubricError):
        RatingPack.from_frame(LONG, rubric="no-such-rubric", name="invented", prompts_root=prompts_root)


def test_from_frame_by_rubric_folder(prompts_root, tmp_path):
    by_folder = RatingPack.from_frame(LONG, rubric=prompts_root / "test-rubric", name="invented")
    assert by_folder == RatingPack.from_frame(LONG, rubric="test-rubric", name="invented", prompts_root=prompts_root)
    with pytest.raises(DataError, match="no rubric.json in this folder"):
        RatingPack.from_frame(LONG, rubric=tmp_path, name="invented")
    with pytest.raises(DataError, match="a rubric folder"):
        RatingPack.from_frame(LONG, rubric=3, name="invented")  # type: ignore[arg-type]


def test_wide_table_by_default_criterion_columns_and_per_criterion_comments():
    frame = pd.DataFrame({
        "case_id": ["c1", "c1", "c2"], "question": ["Q one?", "Q one?", "Q two?"],
        "text": ["Answer A.", "Answer A.", "Answer B."], "rater_id": ["r1", "r2", "r1"],
        "support": [2, 1.0, None], "why": ["", "hedged", ""],
    })  # 'support' is found by its name; the rubric has two components, so a component column is mapped
    frame["kind"] = "answer"
    result = import_frame(frame, rubric=RUBRIC, name="wide", layout="wide", skip_empty=True,
                          columns={"case_text": "question", "target_text": "text", "component": "kind",
                                   "comment:support": "why"})
    pack, counts = result.pack, result.counts
    assert [(r.rater_id, r.criterion, r.score, r.comment) for r in pack.ratings] == [
        ("r1", "support", 2, ""), ("r2", "support", 1, "hedged")]
    assert (counts.n_rows, counts.n_cells, counts.n_scored, counts.n_skipped_empty) == (3, 3, 2, 1)
    assert counts.skipped_by_criterion == {"support": 1}
    # no target column: one stable derived id per (case, component, text, statement)
    ids = {t.target_id for t in pack.targets}
    assert len(ids) == 2 and all(i.startswith("t-") and len(i) == 14 for i in ids)
    again = import_frame(frame, rubric=RUBRIC, name="wide", layout="wide", skip_empty=True,
                         columns={"case_text": "question", "target_text": "text", "component": "kind",
                                  "comment:support": "why"})
    assert {t.target_id for t in again.pack.targets} == ids


def test_a_wide_column_named_almost_like_a_criterion_is_named_not_dropped():
    """'Errors' beside the matched 'support': the second criterion's scores must not vanish."""
    frame = pd.DataFrame({"case_id": ["c1"], "question": ["Q one?"], "text": ["Answer A."], "rater_id": ["r1"],
                          "kind": ["rationale"], "support": [None], "Errors": [1]})
    columns = {"case_text": "question", "target_text": "text", "component": "kind"}
    with pytest.raises(PackError) as exc:
        import_frame(frame, rubric=RUBRIC, name="wide", layout="wide", columns=columns, skip_empty=True)
    assert _problem_lines(exc) == [
        "  - table, column 'Errors': named almost like criterion 'errors' of rubric 'test-rubric', which has no column of "
        "its own: its scores would be left out. Rename the column to 'errors', or map it with --column "
        "criterion:errors=Errors (Python: columns={'criterion:errors': 'Errors'})."]
    renamed = import_frame(frame.rename(columns={"Errors": "errors"}), rubric=RUBRIC, name="wide", layout="wide",
                           columns=columns, skip_empty=True)
    assert (renamed.counts.n_cells, renamed.counts.n_scored, renamed.counts.n_skipped_empty) == (2, 1, 1)


def test_one_column_per_rater_and_criterion_is_named_with_the_reshape_it_needs():
    frame = pd.DataFrame({"case_text": ["Q"], "target_text": ["A"], "kind": ["answer"], "rater": ["-"],
                          "support_dr_a": [1], "support_dr_b": [2]})
    with pytest.raises(PackError, match=r"Columns such as 'support_dr_a', 'support_dr_b' look like one column per "
                                        r"rater and criterion.*reshape the table to one row per rater first"):
        import_frame(frame, rubric=RUBRIC, name="per-rater", layout="wide", columns={"component": "kind"})


def test_wide_table_with_mapped_criterion_columns_and_derived_case_ids():
    rubric = RUBRIC.model_copy(update={"components": {"answer": "an answer"},
                                       "criteria": (RUBRIC.criterion("support"),)})
    frame = pd.DataFrame({"q": ["Q one?", "Q two?"], "a": ["A one.", "A two."], "rater": ["r1", "r1"],
                          "Support (0-2)": ["Yes", "No"]})
    result = import_frame(frame, rubric=rubric, name="wide", layout="wide",
                          columns={"case_text": "q", "target_text": "a", "criterion:support": "Support (0-2)"},
                          score_map={"support": {"Yes": 2, "No": 0}})
    pack = result.pack
    assert [r.score for r in pack.ratings] == [2, 0]
    assert all(c.case_id.startswith("c-") for c in pack.cases)  # derived from the case text
    assert {t.component for t in pack.targets} == {"answer"}  # the rubric's only component


# --------------------------------------------------------------------------------------------
# Every file format
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet", ".xlsx"])
def test_every_format_gives_the_same_pack(tmp_path, suffix):
    path = _write(LONG, tmp_path / f"my ratings{suffix}")
    result = import_table(path, rubric=RUBRIC)
    expected = import_frame(LONG, rubric=RUBRIC, name="my-ratings").pack
    assert result.pack.manifest.name == "my-ratings"
    assert result.pack.ratings == expected.ratings
    assert [t.model_dump() for t in result.pack.targets] == [t.model_dump() for t in expected.targets]
    assert list(result.pack.manifest.source_sha256) == [path.name]


@pytest.mark.parametrize("suffix, where", [(".csv", "row 4"), (".xlsx", "row 4"), (".jsonl", "line 3"),
                                            (".parquet", "record 3")])
def test_bad_cell_is_named_by_row_and_column_in_every_format(tmp_path, suffix, where):
    frame = LONG.copy()
    frame.loc[2, "score"] = "lots"
    path = _write(frame, tmp_path / f"t{suffix}")
    with pytest.raises(PackError) as exc:
        import_table(path, rubric=RUBRIC)
    assert _problem_lines(exc) == [
        f"  - t{suffix}, {where}, column 'score': 'lots' is not an integer score. Write an integer, map the label with "
        "--score-map 'errors:lots=N' (Python: score_map={'errors': {'lots': N}}), or mark it not evaluable with "
        "--not-evaluable 'lots' (Python: not_evaluable=['lots'])."
    ]


def test_unreadable_or_unknown_files_are_refused(tmp_path):
    with pytest.raises(PackError, match="table not found"):
        import_table(tmp_path / "none.csv", rubric=RUBRIC)
    (tmp_path / "t.txt").write_text("a,b\n", encoding="utf-8")
    with pytest.raises(PackError, match="unsupported table type"):
        import_table(tmp_path / "t.txt", rubric=RUBRIC)
    (tmp_path / "bad.xlsx").write_text("not a workbook", encoding="utf-8")
    with pytest.raises(PackError, match="cannot be read as a xlsx table"):
        import_table(tmp_path / "bad.xlsx", rubric=RUBRIC)
    (tmp_path / "cells.csv").write_text("case_text,target_text,score\na,b,1\nc,d,e,2\n", encoding="utf-8")
    with pytest.raises(PackError, match=r"cells.csv, line 3: 4 cells where the header has 3: usually a comma in a cell "
                                        r"that is not quoted, or a quote opened on an earlier line"):
        import_table(tmp_path / "cells.csv", rubric=RUBRIC)
    (tmp_path / "quote.csv").write_text('case_text,target_text,score\na,b,1\n"c,d,2\n', encoding="utf-8")
    with pytest.raises(PackError, match=r"quote.csv, line 3: a quote is opened and never closed.*Close the quote"):
        import_table(tmp_path / "quote.csv", rubric=RUBRIC)
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n[1]\n', encoding="utf-8")
    with pytest.raises(PackError, match="bad.jsonl, line 2: expected a JSON object"):
        import_table(tmp_path / "bad.jsonl", rubric=RUBRIC)


# --------------------------------------------------------------------------------------------
# Labels, not evaluable, empty cells
# --------------------------------------------------------------------------------------------


def test_label_map_and_not_evaluable_values():
    frame = LONG.copy()
    frame["score"] = ["Yes", "Unsure", "3", "No"]
    result = import_frame(frame, rubric=RUBRIC, name="labels", not_evaluable=["Unsure"],
                          score_map={"*": {"No": 0}, "support": {"Yes": 2}})
    assert [(r.score, r.not_evaluable) for r in result.pack.ratings] == [(2, False), (None, True), (3, False), (0, False)]
    assert (result.counts.n_scored, result.counts.n_not_evaluable) == (3, 1)


def test_empty_score_is_an_error_unless_skipped_and_then_counted():
    frame = LONG.copy()
    frame.loc[1, "score"] = ""
    with pytest.raises(PackError) as exc:
        import_frame(frame, rubric=RUBRIC, name="empty")
    assert _problem_lines(exc) == ["  - row 3, column 'score': empty score. Fill in a score, count blank cells as "
                                   "not evaluable with --not-evaluable '' (Python: not_evaluable=['']), or skip them "
                                   "with --skip-empty (Python: skip_empty=True; they are counted)."]
    counts = import_frame(frame, rubric=RUBRIC, name="empty", skip_empty=True).counts
    assert (counts.n_rows, counts.n_cells, counts.n_scored, counts.n_skipped_empty) == (4, 4, 3, 1)
    assert counts.n_cells == counts.n_scored + counts.n_not_evaluable + counts.n_skipped_empty


def test_blank_cells_are_not_evaluable_ratings_when_asked():
    frame = LONG.copy()
    frame.loc[1, "score"] = "  "
    frame.loc[2, "score"] = None
    result = import_frame(frame, rubric=RUBRIC, name="blank", not_evaluable=[""])
    assert [r.not_evaluable for r in result.pack.ratings] == [False, True, True, False]
    counts = result.counts
    assert (counts.n_cells, counts.n_scored, counts.n_not_evaluable, counts.n_skipped_empty) == (4, 2, 2, 0)
    with pytest.raises(PackError, match="cannot be both skipped"):
        import_frame(frame, rubric=RUBRIC, name="blank", not_evaluable=[""], skip_empty=True)
    frame.loc[1, "criterion"] = ""  # a blank rating of no criterion is still an error, named
    with pytest.raises(PackError, match="row 3, column 'criterion': empty criterion"):
        import_frame(frame, rubric=RUBRIC, name="blank", not_evaluable=[""])


@pytest.mark.parametrize("suffix", [".csv", ".xlsx"])
def test_text_that_looks_missing_stays_text_in_a_spreadsheet_as_in_a_csv(tmp_path, suffix):
    """'N/A', 'NA' and 'null' are what the rater wrote: pandas' default would read them (in an
    .xlsx) as empty cells, losing a not-evaluable mark without a word."""
    frame = LONG.copy()
    frame["score"] = ["N/A", "", "3", "0"]
    frame.loc[3, "rater"] = "NA"  # a rater's initials
    path = _write(frame, tmp_path / f"t{suffix}")
    result = import_table(path, rubric=RUBRIC, not_evaluable=["N/A"], skip_empty=True)
    assert [(r.rater_id, r.score, r.not_evaluable) for r in result.pack.ratings] == [
        ("r1", None, True), ("r1", 3, False), ("NA", 0, False)]
    counts = result.counts
    assert (counts.n_cells, counts.n_scored, counts.n_not_evaluable, counts.n_skipped_empty) == (4, 2, 1, 1)
    assert counts.unused_not_evaluable == () and "matched no cell" not in counts.describe()
    # a mark no cell holds is named: the table writes it otherwise, or a reader emptied it
    other = import_table(path, rubric=RUBRIC, not_evaluable=["N/A", "Unsure"], skip_empty=True).counts
    assert other.unused_not_evaluable == ("Unsure",)
    assert other.describe().endswith("3 targets; not-evaluable value 'Unsure' matched no cell")


def test_texts_differing_only_in_spacing_are_named_not_made_into_two_targets():
    """Without id columns, a case or target is known by its texts: a trailing space would make a
    second target and split one answer's ratings between two."""
    frame = LONG.drop(columns=["case", "target"])
    frame.loc[1, "target_text"] = "Invented answer one. "
    frame.loc[3, "case_text"] = "Invented  question two?"  # the only text of its case: its spacing is its own
    frame.loc[2, "case_text"] = "Invented question one?\n"
    with pytest.raises(PackError) as exc:
        import_frame(frame, rubric=RUBRIC, name="spaced")
    assert _problem_lines(exc) == [
        "  - row 3, column 'target_text': the target text differs from the one in row 2 only in spaces or line breaks, "
        "so it would be read as another target. Make the two texts the same, or give each target an id with --column "
        "target=COLUMN (Python: columns={'target': 'COLUMN'}).",
        "  - row 4, column 'case_text': the case text differs from the one in row 2 only in spaces or line breaks, so "
        "it would be read as another case. Make the two texts the same, or give each case an id with --column "
        "case=COLUMN (Python: columns={'case': 'COLUMN'}).",
    ]
    with_ids = LONG.copy()
    with_ids.loc[1, "target_text"] = "Invented answer one. "  # ids given: the rows of one target must agree
    with pytest.raises(PackError, match="target 't1' has a different target_text here than in row 2"):
        import_frame(with_ids, rubric=RUBRIC, name="spaced")


def test_blank_rows_are_skipped_but_keep_row_numbers(tmp_path):
    path = tmp_path / "t.csv"
    LONG.to_csv(path, index=False)
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([lines[0], lines[1], ",,,,,,,,", lines[2], lines[3].replace(",3,", ",9,"), lines[4]]) + "\n",
                    encoding="utf-8")
    with pytest.raises(PackError, match=r"t\.csv, row 5, column 'score': score 9 \('9'\) is outside the scale 0\.\.3"):
        import_table(path, rubric=RUBRIC)


# --------------------------------------------------------------------------------------------
# Every error path: named by row and column, all at once, nothing returned
# --------------------------------------------------------------------------------------------


def test_all_row_problems_are_collected_into_one_error():
    frame = LONG.copy()
    frame.loc[0, "criterion"] = "nonsense"           # unknown criterion
    frame.loc[1, "case_text"] = "Another text?"      # case c1 with a different text
    frame.loc[2, "component"] = "summary"            # component not in the rubric
    frame.loc[3, "criterion"] = "errors"             # errors does not apply to answers
    extra = pd.DataFrame([("c1", "Invented question one?", "t1", "Invented answer one.", "answer", "r2", "support",
                           "1", "")], columns=LONG.columns)  # second rating of (t1, r2, support)
    extra2 = pd.DataFrame([("bad id!", "Q?", "t9", "A.", "answer", "", "support", "1", "")], columns=LONG.columns)
    with pytest.raises(PackError) as exc:
        import_frame(pd.concat([frame, extra, extra2], ignore_index=True), rubric=RUBRIC, name="bad")
    lines = _problem_lines(exc)
    assert str(exc.value).startswith("cannot import the table of pack 'bad' (7 problems):")
    assert lines[0].startswith("  - row 2, column 'criterion': criterion 'nonsense' is not in rubric 'test-rubric'")
    assert lines[1].startswith("  - row 3, column 'case_text': case 'c1' has a different case_text here than in row 2")
    assert lines[2].startswith("  - row 4, column 'component': component 'summary' is not a component of rubric")
    assert lines[3].startswith("  - row 5, column 'score': criterion 'errors' does not apply to component 'answer'")
    joined = "\n".join(lines)
    assert "row 6, column 'score': a second rating of target 't1' by rater 'r2' on 'support' (first in row 3)" in joined
    assert "row 7, column 'case': case id 'bad id!' is not a valid id" in joined
    assert "row 7, column 'rater': empty rater id" in joined


def test_mapping_problems_name_the_field_and_the_columns():
    with pytest.raises(PackError) as exc:
        import_frame(LONG.drop(columns=["rater"]), rubric=RUBRIC, name="m",
                     columns={"case_text": "question", "colour": "x", "criterion:support": "s"})
    text = str(exc.value)
    assert "column 'question' for field 'case_text' is missing; the table has columns" in text
    assert "mapping 'colour': unknown field" in text
    assert "mapping 'criterion:support': per-criterion columns apply to the wide layout only" in text
    assert "no column for field 'rater'" in text and "--column rater=COLUMN" in text
    with pytest.raises(PackError, match="a wide table has one score column per criterion"):
        import_frame(LONG, rubric=RUBRIC, name="m", layout="wide", columns={"score": "score"})
    with pytest.raises(PackError, match="no column is named like a criterion of rubric 'test-rubric'"):
        import_frame(LONG.drop(columns=["criterion", "score"]), rubric=RUBRIC, name="m", layout="wide")
    with pytest.raises(PackError, match="rubric 'test-rubric' has several components"):
        import_frame(LONG.drop(columns=["component"]), rubric=RUBRIC, name="m")
    with pytest.raises(PackError, match="pack name 'no good' is not a valid name"):
        import_frame(LONG, rubric=RUBRIC, name="no good")


def test_not_evaluable_is_refused_where_the_rubric_forbids_it():
    strict = RUBRIC.model_copy(update={"criteria": (RUBRIC.criterion("support").model_copy(
        update={"allow_not_evaluable": False}), RUBRIC.criterion("errors"))})
    frame = LONG.copy()
    frame.loc[0, "score"] = "n/a"
    with pytest.raises(PackError, match=r"row 2, column 'score': 'n/a' marks the rating not evaluable"):
        import_frame(frame, rubric=strict, name="strict", not_evaluable=["n/a"])


def test_option_parsers():
    assert parse_table_columns(["case_text=Question", "criterion:support=S = 1"]) == {
        "case_text": "Question", "criterion:support": "S = 1"}
    for bad in (["case_text"], ["colour=x"], ["case_text="], ["rater:x=y"], ["rater=a", "rater=b"]):
        with pytest.raises(DataError):
            parse_table_columns(bad)
    assert parse_score_map(["correctness:Definitely correct=3", "*:Yes=1", "c:a=b=-1"]) == {
        "correctness": {"Definitely correct": 3}, "*": {"Yes": 1}, "c": {"a=b": -1}}
    for bad in (["x=1"], ["c:label=one"], ["c:=1"], ["c:a=1", "c:a=2"]):
        with pytest.raises(DataError):
            parse_score_map(bad)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def test_cli_import_table_writes_a_pack_and_refuses_bad_input_without_writing(tmp_path, prompts_root):
    runner = CliRunner()
    table = tmp_path / "export.csv"
    pd.DataFrame({"question": ["Q1?", "Q1?", "Q2?"], "answer": ["A1.", "A1.", "A2."], "who": ["r1", "r2", "r1"],
                  "kind": ["answer"] * 3, "Support": ["Yes", "Unsure", ""]}).to_csv(table, index=False)
    out = tmp_path / "packs" / "wide"
    args = ["ratings", "import", "table", str(table), "--rubric", "test-rubric", "--prompts-root", str(prompts_root),
            "--layout", "wide", "--column", "case_text=question", "--column", "target_text=answer",
            "--column", "rater=who", "--column", "component=kind", "--column", "criterion:support=Support",
            "--score-map", "support:Yes=2", "--not-evaluable", "Unsure", "--out", str(out)]
    bad = runner.invoke(app, args)
    assert bad.exit_code == 2 and "row 4, column 'Support': empty score" in bad.output
    assert not out.exists()  # nothing written
    blank = runner.invoke(app, [*args, "--not-evaluable", "", "--out", str(tmp_path / "packs" / "blank")])
    assert blank.exit_code == 0, blank.output  # the blank cell is a not-evaluable rating
    assert "3 rows, 3 rating cells: 1 score, 2 not evaluable" in blank.output
    ok = runner.invoke(app, [*args, "--skip-empty", "--name", "my-pack"])
    assert ok.exit_code == 0, ok.output
    assert "2 cases, 2 targets, 2 ratings by 2 raters" in ok.output
    assert "3 rows, 3 rating cells: 1 score, 1 not evaluable; 1 empty score cell skipped" in ok.output
    pack = load_pack(out, prompts_root=prompts_root)
    assert pack.manifest.name == "my-pack" and [r.not_evaluable for r in pack.ratings] == [False, True]
    unnamed = runner.invoke(app, [*args, "--skip-empty", "--overwrite"])
    assert unnamed.exit_code == 0, unnamed.output
    assert load_pack(out, prompts_root=prompts_root).manifest.name == "wide"  # the --out folder's name, not the file's


def test_cli_refuses_options_that_do_not_apply_and_lists_the_fields(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["ratings", "import", "kqa", str(tmp_path), "--rubric", "x", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "`ratings import kqa` does not take --rubric (an option of `import table`)" in res.output
    res = runner.invoke(app, ["ratings", "import", "table", str(tmp_path / "t.csv"), "--domain", "medicine",
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--domain (an option of `import expertqa`)" in res.output
    res = runner.invoke(app, ["ratings", "import", "table", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "needs --rubric ID" in res.output
    res = runner.invoke(app, ["ratings", "import", "--help"], env={"COLUMNS": "200"})
    assert all(f in res.output for f in TABLE_FIELDS)


def test_written_pack_round_trips(tmp_path, prompts_root):
    pack = RatingPack.from_frame(LONG, rubric=RUBRIC, name="invented")
    loaded = load_pack(write_pack(pack, tmp_path / "p"), prompts_root=prompts_root)
    assert loaded.ratings == pack.ratings and loaded.cases == pack.cases


def test_a_column_error_from_python_says_how_to_map_it_in_python_too():
    """The fix of a missing column names the CLI option and the Python argument."""
    renamed = LONG.rename(columns={"case_text": "question"})
    with pytest.raises(DataError) as caught:
        RatingPack.from_frame(renamed, rubric=RUBRIC, name="invented")
    message = str(caught.value)
    assert "--column case_text=COLUMN" in message and "columns={'case_text': 'COLUMN'}" in message
    pack = RatingPack.from_frame(renamed, rubric=RUBRIC, name="invented", columns={"case_text": "question"})
    assert pack.cases[0].text == "Invented question one?"


def test_an_empty_table_file_is_named_as_empty(tmp_path: Path) -> None:
    """Not one "no column for field ..." per field of a table with no columns at all."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    result = CliRunner().invoke(app, ["ratings", "import", "table", str(empty), "--rubric", "kqa-entailment",
                                      "--out", str(tmp_path / "pack")])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "empty.jsonl: the table is empty (no column, no row)" in said, said
    assert "no column for field" not in said and not (tmp_path / "pack").exists()
