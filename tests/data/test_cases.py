"""Case files (NEJM-MedQA style) and consilium records: loading, validation, targets."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from evolve.data import (
    CaseColumns,
    ConsiliumRecord,
    consilium_targets,
    generation_input,
    load_cases,
    load_consilium_records,
    parse_column_overrides,
    record_file_stem,
    role_slug,
)
from evolve.errors import DataError
from tests.data.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "ratings" / "example-workbooks"
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/\-]*$")

ROWS = [
    {"doi": "10.0000/t-1", "title": "SYNTHETIC one", "case_text": "Invented case one.", "answer": "Answer one.",
     "extra": "x"},
    {"doi": "10.0000/t-2", "title": "SYNTHETIC two", "case_text": "Invented case two.", "answer": "", "extra": "y"},
    {"doi": "10.0000/t-3", "title": "", "case_text": "Invented case three.", "answer": "Answer three.", "extra": "z"},
]


def _write(path: Path, rows: list[dict]) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        pd.DataFrame(rows).to_parquet(path, index=False)
    return path


# --------------------------------------------------------------------------------------------
# load_cases
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("suffix", "locs"), [
    (".jsonl", ["line 1", "line 2", "line 3"]),
    (".csv", ["row 2", "row 3", "row 4"]),
    (".parquet", ["row 1", "row 2", "row 3"]),
])
def test_load_cases_reads_every_format_in_source_order(tmp_path, suffix, locs):
    path = _write(tmp_path / f"cases{suffix}", ROWS)
    cases = load_cases(path)
    assert [c.case_id for c in cases] == ["10.0000/t-1", "10.0000/t-2", "10.0000/t-3"]
    assert [c.source for c in cases] == [f"cases{suffix} {loc}" for loc in locs]
    assert cases[0].title == "SYNTHETIC one" and cases[0].text == "Invented case one."
    assert cases[0].reference_answer == "Answer one."
    assert cases[1].reference_answer is None  # empty answer cell
    assert cases[2].title == ""


def test_mapping_overrides_columns(tmp_path):
    rows = [{"id": f"case-{i}", "vignette": f"Invented text {i}.", "dx": f"Dx {i}", "doi": "bad id with spaces"}
            for i in range(2)]
    path = _write(tmp_path / "c.csv", rows)
    mapping = CaseColumns(case_id="id", text="vignette", answer="dx", title=None)
    cases = load_cases(path, mapping=mapping)
    assert [c.case_id for c in cases] == ["case-0", "case-1"]  # the DOI column is not read
    assert cases[1].text == "Invented text 1." and cases[1].reference_answer == "Dx 1" and cases[1].title == ""


def test_parse_column_overrides():
    m = parse_column_overrides(["text=vignette", "case_id=id", "title="])
    assert (m.text, m.case_id, m.title, m.doi, m.answer) == ("vignette", "id", None, "doi", "answer")
    with pytest.raises(DataError, match="FIELD=COLUMN"):
        parse_column_overrides(["nonsense"])
    with pytest.raises(DataError, match="FIELD=COLUMN"):
        parse_column_overrides(["colour=red"])
    with pytest.raises(DataError, match="needs a column name"):
        parse_column_overrides(["text="])


def test_missing_column_lists_columns_and_fix(tmp_path):
    rows = [{k if k != "case_text" else "body": v for k, v in r.items()} for r in ROWS]
    path = _write(tmp_path / "c.jsonl", rows)
    with pytest.raises(DataError) as info:
        load_cases(path)
    msg = str(info.value)
    assert "c.jsonl" in msg and "'case_text'" in msg and "'body'" in msg and "--column text=<column>" in msg


def test_missing_optional_column_suggests_unmapping(tmp_path):
    path = _write(tmp_path / "c.csv", [{k: v for k, v in r.items() if k != "answer"} for r in ROWS])
    with pytest.raises(DataError, match=r"--column answer="):
        load_cases(path)
    assert all(c.reference_answer is None for c in load_cases(path, mapping=CaseColumns(answer=None)))


def test_empty_text_names_row_and_column(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[1]["case_text"] = "  "
    with pytest.raises(DataError) as info:
        load_cases(_write(tmp_path / "c.csv", rows))
    assert "c.csv, row 3, column 'case_text': empty case text" in str(info.value)


def test_duplicate_ids_name_both_rows(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[2]["doi"] = rows[0]["doi"]
    with pytest.raises(DataError) as info:
        load_cases(_write(tmp_path / "c.jsonl", rows))
    msg = str(info.value)
    assert "line 3" in msg and "duplicate case id '10.0000/t-1' (first in line 1)" in msg


def test_invalid_id_names_pattern_and_fix(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[0]["doi"] = "10.0000/(bad)"
    rows[1]["doi"] = ""
    with pytest.raises(DataError) as info:
        load_cases(_write(tmp_path / "c.parquet", rows))
    msg = str(info.value)
    assert "row 1" in msg and "'10.0000/(bad)' is not a valid id" in msg and "--column case_id=" in msg
    assert "row 2" in msg and "empty case id" in msg
    assert "2 problems" in msg  # all problems at once


def test_file_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_cases(tmp_path / "absent.jsonl")
    (tmp_path / "c.txt").write_text("x")
    with pytest.raises(DataError, match="unsupported case file type"):
        load_cases(tmp_path / "c.txt")
    (tmp_path / "c.jsonl").write_text('{"doi": "a", "case_text": "t"}\n{broken\n')
    with pytest.raises(DataError, match=r"line 2: malformed JSON"):
        load_cases(tmp_path / "c.jsonl", mapping=CaseColumns(title=None, answer=None))


def test_generation_input_never_contains_the_answer(tmp_path):
    case = load_cases(_write(tmp_path / "c.jsonl", ROWS))[0]
    seen = generation_input(case)
    assert seen == {"case_id": "10.0000/t-1", "title": "SYNTHETIC one", "text": "Invented case one."}
    assert "Answer one." not in json.dumps(seen)


def test_example_case_file_loads():
    cases = load_cases(EXAMPLE / "cases.jsonl")
    assert [c.case_id for c in cases] == [f"10.0000/synthetic-00{i}" for i in (1, 2, 3)]
    assert all(c.title.startswith("SYNTHETIC") for c in cases)


# --------------------------------------------------------------------------------------------
# Consilium records
# --------------------------------------------------------------------------------------------


def _record(**changes) -> dict:
    raw = {
        "case_id": "10.0000/t-1",
        "model": "m",
        "condition": "structured",
        "roles": [
            {"name": "Cardiologist", "primary": True, "rationale": "Heart."},
            {"name": "Internal medicine", "rationale": "General view."},
        ],
        "panel_rationale": "Both are needed.",
        "outputs": [
            {"role": "Cardiologist", "reasoning": "R1", "opinion": "O1"},
            {"role": "internal MEDICINE", "reasoning": "R2", "opinion": "O2"},
        ],
        "final": "Final report.",
    }
    raw.update(changes)
    return raw


def test_record_and_targets():
    record = ConsiliumRecord.model_validate(_record())
    targets = consilium_targets(record)
    assert [t.target_id for t in targets] == [
        "10.0000/t-1:structured:cardiologist:reasoning",
        "10.0000/t-1:structured:cardiologist:opinion",
        "10.0000/t-1:structured:internal-medicine:reasoning",
        "10.0000/t-1:structured:internal-medicine:opinion",
        "10.0000/t-1:structured:final",
        "10.0000/t-1:structured:case",
    ]
    assert all(ID_RE.match(t.target_id) for t in targets)
    assert [t.component for t in targets] == ["reasoning", "opinion", "reasoning", "opinion", "final", "case"]
    assert [t.role for t in targets] == ["Cardiologist"] * 2 + ["Internal medicine"] * 2 + ["", ""]
    assert targets[3].text == "O2" and targets[4].text == "Final report."
    assert {(t.model, t.condition) for t in targets} == {("m", "structured")}
    case_text = targets[5].text
    assert "1. Cardiologist (primary): Heart." in case_text
    assert "2. Internal medicine: General view." in case_text
    assert case_text.index("Internal medicine") < case_text.index("Both are needed.")
    assert record.primary_role.name == "Cardiologist"


def test_record_without_condition_uses_c():
    record = ConsiliumRecord.model_validate(_record(condition=""))
    assert consilium_targets(record)[-2].target_id == "10.0000/t-1:c:final"


@pytest.mark.parametrize(("changes", "fragment"), [
    ({"roles": [{"name": "Cardiologist", "primary": True}, {"name": " CARDIOLOGIST "}]}, "duplicate role name"),
    ({"roles": [{"name": "Cardiologist"}, {"name": "Internal medicine"}]}, "exactly one role must have primary=true"),
    ({"roles": [{"name": "Cardiologist", "primary": True}, {"name": "Internal medicine", "primary": True}]},
     "found 2"),
    ({"roles": []}, "at least 1"),
    ({"roles": [{"name": f"R{i}", "primary": i == 0} for i in range(6)]}, "at most 5"),
    ({"roles": [{"name": "Internal medicine", "primary": True}, {"name": "Internal-medicine"}]},
     "same target id segment"),
    ({"outputs": [{"role": "Cardiologist", "reasoning": "R", "opinion": "O"}]}, "no output for role"),
    ({"outputs": [{"role": "Cardiologist", "reasoning": "R", "opinion": "O"},
                  {"role": "Surgeon", "reasoning": "R", "opinion": "O"}]}, "is not on the panel"),
    ({"outputs": [{"role": "Cardiologist", "reasoning": "R", "opinion": "O"},
                  {"role": "cardiologist", "reasoning": "R", "opinion": "O"},
                  {"role": "Internal medicine", "reasoning": "R", "opinion": "O"}]}, "more than one output"),
    ({"final": ""}, "at least 1 character"),
    ({"condition": "free form"}, "should match pattern"),
    ({"case_id": "bad id"}, "should match pattern"),
    ({"version": 2}, "Input should be 1"),
    ({"surprise": 1}, "Extra inputs are not permitted"),
])
def test_record_validation(changes, fragment):
    with pytest.raises(ValidationError, match=re.escape(fragment)):
        ConsiliumRecord.model_validate(_record(**changes))


def test_role_slug_and_file_stem():
    assert role_slug("Neurólogo") == "neurologo"
    assert role_slug("Кардиолог", 3) == "role-3"
    assert role_slug("  Ear, nose & throat  ") == "ear-nose-throat"
    assert record_file_stem("10.1056/NEJMcpc2300900") == "10.1056_NEJMcpc2300900"


def test_load_example_records():
    records = load_consilium_records(EXAMPLE / "outputs")
    assert list(records) == [f"10.0000/synthetic-00{i}" for i in (1, 2, 3)]
    assert [len(r[0].roles) for r in records.values()] == [3, 3, 2]


def _records_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "outputs"
    shutil.copytree(EXAMPLE / "outputs", folder)
    return folder


def test_load_records_collects_file_and_field_problems(tmp_path):
    folder = _records_dir(tmp_path)
    (folder / "broken.json").write_text("{nope")
    raw = json.loads((folder / "10.0000_synthetic-001.json").read_text())
    (folder / "10.0000_synthetic-003.json").write_text(json.dumps(raw))  # misfiled: holds case 001
    raw2 = dict(raw, roles=[{**r, "primary": True} for r in raw["roles"]])
    (folder / "10.0000_synthetic-001.two.json").write_text(json.dumps(raw2))
    with pytest.raises(DataError) as info:
        load_consilium_records(folder)
    msg = str(info.value)
    assert "broken.json, line 1: invalid JSON" in msg
    assert "10.0000_synthetic-003.json, field 'case_id'" in msg and "Rename the file" in msg
    assert "10.0000_synthetic-001.two.json, field 'roles': exactly one role must have primary=true, found 3" in msg
    assert "3 problems" in msg


def test_load_records_rejects_two_records_with_one_condition(tmp_path):
    folder = _records_dir(tmp_path)
    shutil.copy(folder / "10.0000_synthetic-002.json", folder / "10.0000_synthetic-002.copy.json")
    with pytest.raises(DataError, match=r"second record for case '10.0000/synthetic-002' with condition 'free-form'"):
        load_consilium_records(folder)


def test_load_records_prefix_must_end_at_a_separator(tmp_path):
    folder = _records_dir(tmp_path)
    (folder / "10.0000_synthetic-002.json").rename(folder / "10.0000_synthetic-0020.json")
    with pytest.raises(DataError, match="does not match the file name"):
        load_consilium_records(folder)


def test_load_records_folder_errors(tmp_path):
    with pytest.raises(DataError, match="no such folder"):
        load_consilium_records(tmp_path / "absent")
    with pytest.raises(DataError, match=r"no \*\.json"):
        load_consilium_records(tmp_path)


def test_case_id_column_wins_over_doi_like_splits_does(tmp_path):
    """Default mapping: a file's own case_id column is the id (the DOI is then only a group),
    the same rule `evolve splits make --cases` applies, so splits and imports agree."""
    from evolve.splits import read_case_ids

    path = tmp_path / "cases.jsonl"
    rows = [{"case_id": f"c{i}", "doi": "10.1/shared", "title": "t", "case_text": "x", "answer": "a"} for i in range(2)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [c.case_id for c in load_cases(path)] == ["c0", "c1"]
    assert list(read_case_ids(path).ids) == ["c0", "c1"]


def test_evolves_own_case_files_and_folders_load_without_a_mapping(tmp_path: Path) -> None:
    """A pack's / bench run's cases.jsonl (Case fields) loads as is, also given as its folder;
    the NEJM column defaults still apply to everything else."""
    from evolve.data import Case

    own = [Case(case_id="10.1/a", title="T", text="Case a.", reference_answer="Dx a", source="x line 1"),
           Case(case_id="c-2", text="Case b.")]
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "cases.jsonl").write_text("".join(c.model_dump_json() + "\n" for c in own))
    for where in (folder, folder / "cases.jsonl"):
        cases = load_cases(where)
        assert [(c.case_id, c.title, c.text, c.reference_answer) for c in cases] == [
            ("10.1/a", "T", "Case a.", "Dx a"), ("c-2", "", "Case b.", None)]
    # an explicit mapping is obeyed as given (here: wrong for this file, so a clear error)
    with pytest.raises(DataError, match="column 'case_text' for field 'text' is missing"):
        load_cases(folder, mapping=CaseColumns())


def test_a_mapping_read_back_from_a_run_needs_no_doi_column_when_case_id_gives_the_ids(tmp_path: Path) -> None:
    """A bench run stores its case-column mapping whole; read back, every field counts as set,
    so the default DOI column name must not be demanded of a file whose ids come from case_id
    (a resume of ``bench run --column case_id=id`` on a file without a doi column failed)."""
    from evolve.data import CaseColumns

    path = tmp_path / "mapped.csv"
    path.write_text("id,description,dx\nk1,A case.,Dx\n", encoding="utf-8")
    given = CaseColumns(case_id="id", text="description", answer="dx", title=None)
    stored = CaseColumns.model_validate_json(given.model_dump_json())  # as a resume reads it
    assert [c.case_id for c in load_cases(path, mapping=stored)] == ["k1"] == [c.case_id for c in load_cases(path, mapping=given)]
    with pytest.raises(DataError, match="column 'DOI' for field 'doi' is missing"):  # mapped on purpose: still checked
        load_cases(path, mapping=given.model_copy(update={"doi": "DOI"}))


def test_an_empty_case_file_is_named_as_empty(tmp_path: Path) -> None:
    """Not four "column ... is missing; the file has columns []" errors (an empty CSV is named by
    its reader: "No columns to parse")."""
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"the file is empty \(no header, no case\)") as info:
        load_cases(path)
    assert "is missing" not in str(info.value)
