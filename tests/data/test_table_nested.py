"""`import_table` on several files, nested JSON records (`rows=`) and row selection (`where=`).

The records here are INVENTED for the test: they copy only the *shape* of ExpertQA's release
(a question, `metadata.field`, `answers` keyed by system name, each answer with its claims and
their labels); every text, system name and annotator id is made up. The last test reads the
real ExpertQA files by path when /work/shared/data is present and skips otherwise.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import import_expertqa, import_table, load_pack, parse_where
from evolve.errors import DataError, PackError
from evolve.rubric import Rubric

from .conftest import SHARED_DATA

CLAIM_RUBRIC = Rubric.model_validate({
    "id": "invented-claims", "version": "1", "title": "Invented claim rubric",
    "components": {"claim": "one claim of an answer"},
    "criteria": [
        {"criterion_id": "correctness", "name": "Correctness", "definition": "Invented.",
         "anchors": {"0": "wrong", "1": "likely wrong", "2": "likely right", "3": "right"},
         "scale_min": 0, "scale_max": 3, "components": ["claim"]},
        {"criterion_id": "worthiness", "name": "Worthiness", "definition": "Invented.",
         "anchors": {"0": "no", "1": "yes"}, "scale_min": 0, "scale_max": 1, "components": ["claim"]},
    ],
})
SCORES = {"correctness": {"Wrong": 0, "Likely wrong": 1, "Likely right": 2, "Right": 3},
          "worthiness": {"No": 0, "Yes": 1}}
ROWS = "answers.*.claims.*"
COLUMNS = {
    "case_text": "question", "target_text": "answers.*.claims.*.claim_string", "statement": "answers.*.answer_string",
    "rater": "answers.*.annotator_id", "model": "answers.*.@key",
    "criterion:correctness": "answers.*.claims.*.correctness", "criterion:worthiness": "answers.*.claims.*.worthiness",
}


def _claim(text: str, correctness: Any = "Right", worthiness: Any = "Yes") -> dict[str, Any]:
    return {"claim_string": text, "correctness": correctness, "worthiness": worthiness, "evidence": ["invented"]}


def _record(question: str, field: str, answers: dict[str, Any]) -> dict[str, Any]:
    return {"question": question, "annotator_id": "q-author", "metadata": {"field": field}, "answers": answers}


# Invented records in the ExpertQA shape (first file: 3 records, second: 2).
FIRST = [
    _record("Invented question one?", "Invented Medicine", {
        "sys_a": {"answer_string": "Invented answer A.", "annotator_id": "rater1",
                  "claims": [_claim("Claim A1."), _claim("Claim A2.", "Unsure", "No")]},
        "sys_b": {"answer_string": "Invented answer B.", "annotator_id": "rater2",
                  "claims": [_claim("Claim B1.", "Likely wrong", None)]},
    }),
    _record("Invented question two?", "Invented Law", {
        "sys_a": {"answer_string": "Invented law answer.", "annotator_id": "rater3", "claims": [_claim("Law claim.")]},
    }),
    _record("Invented question three?", "Invented Medicine", {
        "sys_c": {"answer_string": "An answer nobody split.", "annotator_id": "rater4", "claims": []},
    }),
]
SECOND = [
    _record("Invented question four?", "Invented Medicine", {
        "sys_b": {"answer_string": "Invented answer four.", "annotator_id": "rater1",
                  "claims": [_claim("Claim four.", "Wrong", "No")]},
    }),
    {"question": "Invented question five?", "metadata": {"field": "Invented Medicine"}},  # no answers at all
]


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    return [_jsonl(tmp_path / "first.jsonl", FIRST), _jsonl(tmp_path / "second.jsonl", SECOND)]


def _import(files: list[Path], **kwargs: Any):
    options: dict[str, Any] = dict(rubric=CLAIM_RUBRIC, columns=COLUMNS, layout="wide", rows=ROWS,
                                   not_evaluable=["Unsure"], score_map=SCORES, skip_empty=True)
    return import_table(files, **{**options, **kwargs})


def _problem_lines(exc: pytest.ExceptionInfo) -> list[str]:
    return [line for line in str(exc.value).splitlines() if line.startswith("  - ")]


# --------------------------------------------------------------------------------------------
# Nested records, @key, several files, where
# --------------------------------------------------------------------------------------------


def test_nested_records_become_one_row_per_claim_across_files(files):
    result = _import(files)
    pack, counts = result.pack, result.counts
    targets = {t.text: t for t in pack.targets}
    assert list(targets) == ["Claim A1.", "Claim A2.", "Claim B1.", "Law claim.", "Claim four."]  # files in order
    assert [targets[t].model for t in targets] == ["sys_a", "sys_a", "sys_b", "sys_a", "sys_b"]  # from answers.*.@key
    assert targets["Claim B1."].statement == "Invented answer B."
    cases = {c.case_id: c.text for c in pack.cases}
    assert cases[targets["Claim four."].case_id] == "Invented question four?"
    assert [(targets_by_id(pack)[r.target_id], r.rater_id, r.criterion, r.score, r.not_evaluable) for r in pack.ratings] == [
        ("Claim A1.", "rater1", "correctness", 3, False), ("Claim A1.", "rater1", "worthiness", 1, False),
        ("Claim A2.", "rater1", "correctness", None, True), ("Claim A2.", "rater1", "worthiness", 0, False),
        ("Claim B1.", "rater2", "correctness", 1, False),  # its worthiness is null: skipped and counted
        ("Law claim.", "rater3", "correctness", 3, False), ("Law claim.", "rater3", "worthiness", 1, False),
        ("Claim four.", "rater1", "correctness", 0, False), ("Claim four.", "rater1", "worthiness", 0, False),
    ]
    assert (counts.n_files, counts.n_records, counts.n_records_without_rows) == (2, 5, 2)  # empty claims, no answers
    assert (counts.n_rows_read, counts.n_rows_blank, counts.n_rows_not_selected, counts.n_rows) == (5, 0, 0, 5)
    assert (counts.n_cells, counts.n_scored, counts.n_not_evaluable, counts.n_skipped_empty) == (10, 8, 1, 1)
    assert counts.describe().startswith("2 files, 5 records (2 without rows), 5 rows read, 5 imported; 10 rating cells")
    assert pack.manifest.name == "first-second"
    assert set(pack.manifest.source_sha256) == {"first.jsonl", "second.jsonl"}
    assert pack.manifest.source == "tables first.jsonl, second.jsonl; rows answers.*.claims.*"


def targets_by_id(pack) -> dict[str, str]:
    return {t.target_id: t.text for t in pack.targets}


def test_where_selects_rows_and_the_counts_add_up(files):
    result = _import(files, where={"metadata.field": "Invented Medicine"})
    assert [t.text for t in result.pack.targets] == ["Claim A1.", "Claim A2.", "Claim B1.", "Claim four."]
    c = result.counts
    assert (c.n_rows_read, c.n_rows_not_selected, c.n_rows) == (5, 1, 4)
    assert c.n_rows_read == c.n_rows_blank + c.n_rows_not_selected + c.n_rows
    assert "5 rows read, 1 not matching --where 'metadata.field=Invented Medicine', 4 imported" in c.describe()
    assert result.pack.manifest.source.endswith("; where metadata.field=Invented Medicine")
    # every condition must hold; a dict key named with @key is a column like any other
    both = _import(files, where=[("metadata.field", "Invented Medicine"), "answers.*.@key=sys_b"])
    assert [t.text for t in both.pack.targets] == ["Claim B1.", "Claim four."]
    assert both.counts.n_rows_not_selected == 3
    with pytest.raises(PackError, match=r"no row matches --where metadata\.field=Medicine \(5 rows read\)\. "
                                        r"Values present: \{'metadata\.field': \['Invented Law', 'Invented Medicine'\]\}"):
        _import(files, where={"metadata.field": "Medicine"})


def test_key_of_a_list_is_the_position_from_one(tmp_path):
    path = _jsonl(tmp_path / "lists.jsonl", [{"q": "Invented Q?", "who": "r1", "items": [
        {"text": "First invented item.", "worth": "Yes"}, {"text": "Second invented item.", "worth": "No"}]}])
    result = import_table(path, rubric=CLAIM_RUBRIC, rows="items.*", layout="wide", score_map=SCORES, columns={
        "case_text": "q", "target_text": "items.*.text", "rater": "who", "condition": "items.*.@key",
        "criterion:worthiness": "items.*.worth"})
    assert [(t.text, t.condition) for t in result.pack.targets] == [("First invented item.", "1"),
                                                                     ("Second invented item.", "2")]
    assert [r.score for r in result.pack.ratings] == [1, 0]


def test_errors_name_the_file_the_line_the_element_and_the_path(files, tmp_path):
    bad_second = [SECOND[0] | {"answers": {"sys_b": SECOND[0]["answers"]["sys_b"] | {
        "claims": [_claim("Claim four."), _claim("Claim five.", "Maybe")]}}}]
    paths = [files[0], _jsonl(tmp_path / "bad.jsonl", [{}, *bad_second])]
    with pytest.raises(PackError) as exc:
        _import(paths)
    assert _problem_lines(exc) == [
        "  - bad.jsonl, line 2, answers.sys_b.claims[2], column 'answers.*.claims.*.correctness': 'Maybe' is not an "
        "integer score; labels mapped for 'correctness': ['Likely right', 'Likely wrong', 'Right', 'Wrong']; "
        "not-evaluable values: ['Unsure']. Write an integer, map the label with --score-map 'correctness:Maybe=N' "
        "(Python: score_map={'correctness': {'Maybe': N}}), or mark it not evaluable with --not-evaluable 'Maybe' "
        "(Python: not_evaluable=['Maybe'])."]
    assert str(exc.value).startswith(f"cannot import tables {paths[0]}, {paths[1]} (1 problem")
    # a step into a wrong type, and a path that holds an object rather than a value
    odd = _jsonl(tmp_path / "odd.jsonl", [_record("Q?", "F", {"s": {"answer_string": "A.", "annotator_id": "r",
                                                                    "claims": "not a list"}}),
                                          FIRST[0]])
    with pytest.raises(PackError) as exc:
        _import([odd], columns={**COLUMNS, "comment": "answers.*.claims.*.evidence"})
    lines = _problem_lines(exc)
    assert lines[0] == ("  - odd.jsonl, line 1, answers.s.claims: --rows 'answers.*.claims.*' expects a list or object "
                        "to step into with '*' here, but it holds a text. Correct --rows.")
    assert lines[1] == ("  - odd.jsonl, line 2, answers.sys_a.claims[1], column 'answers.*.claims.*.evidence': holds a "
                        "list, not a value. Point the path at a text or number inside it (keys joined by dots).")


def test_a_column_path_found_in_no_row_and_malformed_paths(files):
    with pytest.raises(PackError) as exc:
        _import(files, columns={**COLUMNS, "rater": "answers.*.annotater_id"}, where={"metadata.feild": "x"})
    text = str(exc.value)
    assert "column 'answers.*.annotater_id': the path is found in no row of --rows 'answers.*.claims.*' (5 rows from " \
           "5 records). Check the spelling" in text
    assert "column 'metadata.feild': the path is found in no row" in text
    with pytest.raises(DataError, match=r"a '\*' in a column stands for the element its row came from"):
        _import(files, columns={**COLUMNS, "rater": "metadata.*"})
    with pytest.raises(DataError, match="none empty"):
        _import(files, rows="answers..claims.*")
    with pytest.raises(DataError, match=r"'@key' may only end a path, right after a '\*' \(not in --rows\)"):
        _import(files, rows="answers.*.@key")
    with pytest.raises(DataError, match=r"'@key' may only end a path, right after a '\*'"):
        _import(files, columns={**COLUMNS, "model": "answers.@key"})
    assert parse_where(["metadata.field=Healthcare / Medicine", "x="]) == [
        ("metadata.field", "Healthcare / Medicine"), ("x", "")]
    with pytest.raises(DataError, match="expected COLUMN=VALUE"):
        parse_where(["metadata.field"])


# --------------------------------------------------------------------------------------------
# Flat tables: unchanged, and several files of one format
# --------------------------------------------------------------------------------------------

FLAT = pd.DataFrame({"question": ["Invented Q1?", "Invented Q1?", "Invented Q2?"],
                     "claim": ["Invented c1.", "Invented c2.", "Invented c3."], "who": ["r1", "r2", "r1"],
                     "label.v1": ["Right", "Wrong", "Right"], "site": ["north", "south", "north"]})
FLAT_COLUMNS = {"case_text": "question", "target_text": "claim", "rater": "who", "criterion:correctness": "label.v1"}


def test_flat_tables_read_dotted_names_as_they_are_and_concatenate(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    FLAT.iloc[:2].to_csv(a, index=False)
    FLAT.iloc[2:].to_csv(b, index=False)
    one = import_table(a, rubric=CLAIM_RUBRIC, layout="wide", columns=FLAT_COLUMNS, score_map=SCORES)
    assert one.counts.describe().startswith("2 rows, 2 rating cells")  # the single-file wording is unchanged
    both = import_table([a, b], rubric=CLAIM_RUBRIC, layout="wide", columns=FLAT_COLUMNS, score_map=SCORES,
                        where={"site": "north"})
    assert [t.text for t in both.pack.targets] == ["Invented c1.", "Invented c3."]
    assert (both.counts.n_files, both.counts.n_rows_read, both.counts.n_rows_not_selected) == (2, 3, 1)
    pd.DataFrame({**FLAT.iloc[2:].to_dict("list"), "label.v1": ["Sure"]}).to_csv(b, index=False)
    with pytest.raises(PackError, match=r"b\.csv, row 2, column 'label\.v1': 'Sure' is not an integer score"):
        import_table([a, b], rubric=CLAIM_RUBRIC, layout="wide", columns=FLAT_COLUMNS, score_map=SCORES)


def test_several_files_must_agree_and_rows_needs_jsonl(tmp_path, files):
    a, b, x = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "x.parquet"
    FLAT.to_csv(a, index=False)
    FLAT.drop(columns=["site"]).rename(columns={"who": "rater"}).to_csv(b, index=False)
    FLAT.to_parquet(x, index=False)
    options: dict[str, Any] = dict(rubric=CLAIM_RUBRIC, layout="wide", columns=FLAT_COLUMNS, score_map=SCORES)
    with pytest.raises(PackError, match=r"b\.csv, header: its columns differ from a\.csv's \(missing: \['site', 'who'\], "
                                        r"extra: \['rater'\]\)"):
        import_table([a, b], **options)
    with pytest.raises(PackError, match=r"the files are of different types \['\.csv', '\.parquet'\]"):
        import_table([a, x], **options)
    with pytest.raises(PackError, match="the file is given twice"):
        import_table([a, a], **options)
    with pytest.raises(PackError, match=r"--rows reads nested JSON records.*a \.csv table is flat"):
        import_table(a, rows="x.*", **options)
    with pytest.raises(PackError, match=r"--where 'place': no such column; the table has columns"):
        import_table(a, where={"place": "north"}, **options)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _cli_args(files: list[Path], prompts: Path, out: Path) -> list[str]:
    args = ["ratings", "import", "table", *map(str, files), "--rubric", "invented-claims", "--prompts-root", str(prompts),
            "--rows", ROWS, "--where", "metadata.field=Invented Medicine", "--layout", "wide", "--not-evaluable", "Unsure",
            "--skip-empty", "--out", str(out)]
    args += [a for k, v in COLUMNS.items() for a in ("--column", f"{k}={v}")]
    return args + [a for c, m in SCORES.items() for label, n in m.items() for a in ("--score-map", f"{c}:{label}={n}")]


def test_cli_imports_nested_files_and_refuses_several_paths_elsewhere(tmp_path, files):
    prompts = tmp_path / "prompts"
    (prompts / "invented-claims").mkdir(parents=True)
    (prompts / "invented-claims" / "rubric.json").write_text(CLAIM_RUBRIC.model_dump_json(), encoding="utf-8")
    out = tmp_path / "pack"
    runner = CliRunner()
    res = runner.invoke(app, _cli_args(files, prompts, out))
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "2 cases, 4 targets, 7 ratings by 2 raters" in said
    assert "5 rows read, 1 not matching --where 'metadata.field=Invented Medicine', 4 imported" in said
    assert len(load_pack(out, prompts_root=prompts).targets) == 4
    res = runner.invoke(app, ["ratings", "import", "kqa", str(tmp_path), str(tmp_path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "`ratings import kqa` reads one path, got 2" in res.output
    res = runner.invoke(app, ["ratings", "import", "expertqa", str(tmp_path), "--rows", "a.*", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "does not take --rows (an option of `import table`)" in res.output


# --------------------------------------------------------------------------------------------
# The real ExpertQA files: `rubric new` + `import table` == `import expertqa`
# --------------------------------------------------------------------------------------------

EXPERTQA_DIR = SHARED_DATA / "expertqa"
EXPERTQA_SCORES = {
    "correctness": {"Definitely incorrect": 0, "Likely incorrect": 1, "Probably correct": 2, "Definitely correct": 3},
    "informativeness": {"Uninformative": 0, "Not too important": 1, "A bit relevant": 2, "Very relevant": 3},
    "worthiness": {"No": 0, "Yes": 1},
}


@pytest.mark.skipif(not (EXPERTQA_DIR / "rand_test.jsonl").is_file(), reason=f"real data not available at {EXPERTQA_DIR}")
def test_real_expertqa_through_rubric_new_and_import_table_matches_the_expertqa_importer(tmp_path):
    runner = CliRunner()
    prompts = tmp_path / "judge_prompts"
    res = runner.invoke(app, ["rubric", "new", "eqa", "--criterion", "correctness", "--scale", "0-3", "--criterion",
                              "informativeness", "--scale", "0-3", "--criterion", "worthiness", "--scale", "0-1",
                              "--component", "claim", "--out", str(prompts)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "packs" / "eqa"
    columns = {"case_text": "question", "target_text": "answers.*.claims.*.claim_string",
               "statement": "answers.*.answer_string", "rater": "answers.*.annotator_id", "model": "answers.*.@key",
               **{f"criterion:{c}": f"answers.*.claims.*.{c}" for c in EXPERTQA_SCORES}}
    args = ["ratings", "import", "table", str(EXPERTQA_DIR / "rand_test.jsonl"), str(EXPERTQA_DIR / "rand_val.jsonl"),
            "--rows", "answers.*.claims.*", "--where", "metadata.field=Healthcare / Medicine", "--rubric", "eqa",
            "--prompts-root", str(prompts), "--layout", "wide", "--not-evaluable", "Unsure", "--skip-empty",
            "--out", str(out)]
    args += [a for k, v in columns.items() for a in ("--column", f"{k}={v}")]
    args += [a for c, m in EXPERTQA_SCORES.items() for label, n in m.items() for a in ("--score-map", f"{c}:{label}={n}")]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "94 cases, 484 targets, 1446 ratings by 71 raters" in said
    assert "1452 rating cells: 1400 scores, 46 not evaluable; 6 empty score cells skipped" in said
    table = load_pack(out, prompts_root=prompts)
    reference = import_expertqa(EXPERTQA_DIR, domain="medicine")
    assert (len(table.cases), len(table.targets), len(table.ratings)) == (94, 484, 1446)
    assert (len(reference.cases), len(reference.targets), len(reference.ratings)) == (94, 484, 1446)

    def ratings(pack) -> Counter:  # per rating: the claim's system and text, rater, criterion, score
        targets = {t.target_id: t for t in pack.targets}
        return Counter((targets[r.target_id].model, targets[r.target_id].text, r.rater_id, r.criterion, r.score,
                        r.not_evaluable) for r in pack.ratings)

    assert ratings(table) == ratings(reference)
    for criterion in EXPERTQA_SCORES:
        def scores(pack, c=criterion) -> Counter:
            return Counter(r.score for r in pack.ratings if r.criterion == c)
        assert scores(table) == scores(reference), criterion
