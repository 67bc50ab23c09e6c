"""User text may not carry control or bidirectional-override characters into prompts (issue 24 item 5)."""

from __future__ import annotations

import pytest

from evolve.data import TEXT_PROBLEM_FIX, text_problem


@pytest.mark.parametrize("text", ["", "plain", "tab\there", "lines\nand\r\nreturns", "Überweisung – ½ °C", "שלום עולם"])
def test_ordinary_text_passes(text: str) -> None:
    assert text_problem(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ab\x00c", "U+0000 NULL at character 3"),
        ("x\u202eevil", "U+202E RIGHT-TO-LEFT OVERRIDE at character 2"),
        ("\u2066iso", "U+2066 LEFT-TO-RIGHT ISOLATE at character 1"),
        ("esc\x1b[31m", "U+001B ESCAPE at character 4"),
        ("c1\x85", "U+0085 CONTROL CHARACTER at character 3"),
        ("del\x7f", "U+007F DELETE at character 4"),
    ],
)
def test_forbidden_character_is_named_with_its_position(text: str, expected: str) -> None:
    problem = text_problem(text)
    assert problem is not None and expected in problem
    assert not any(ch in problem for ch in "\x00\u202e\u2066\x1b\x85\x7f")  # never echoed raw


def test_count_of_all_forbidden_characters_is_given() -> None:
    assert text_problem("a\x00b\x00c\u202e") == "holds U+0000 NULL at character 2 (3 such characters in all)"


def test_non_strings_are_left_to_the_type_check() -> None:
    assert text_problem(12345) is None and text_problem(None) is None
    assert "Remove the character" in TEXT_PROBLEM_FIX


# --------------------------------------------------------------------------------------------
# Case files: values must be text, without control characters
# --------------------------------------------------------------------------------------------

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402

from evolve.data import Case, Target, load_cases  # noqa: E402
from evolve.errors import DataError  # noqa: E402


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


GOOD = {"doi": "10.0000/v-1", "title": "SYNTHETIC", "case_text": "Invented case.", "answer": "Invented answer."}


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [("case_text", 12345, "a number (12345)"), ("answer", True, "a true/false value (true)"),
     ("title", 2.5, "a number (2.5)"), ("doi", 12, "a number (12)"), ("case_text", ["a"], "a list")],
)
def test_case_file_json_value_that_is_not_a_string_is_refused(tmp_path, field, value, shown) -> None:
    path = _jsonl(tmp_path / "cases.jsonl", [GOOD, {**GOOD, "doi": "10.0000/v-2", field: value}])
    with pytest.raises(DataError) as err:
        load_cases(path)
    assert f"cases.jsonl, line 2, column '{field}'" in str(err.value)
    assert f"holds {shown}, not text" in str(err.value)
    assert "--column" in str(err.value)


def test_case_file_parquet_numeric_text_column_is_refused(tmp_path) -> None:
    path = tmp_path / "cases.parquet"
    pd.DataFrame([{**GOOD, "case_text": 12345}]).to_parquet(path, index=False)
    with pytest.raises(DataError, match=r"row 1, column 'case_text': field 'text' holds a number \(12345\)"):
        load_cases(path)


def test_case_file_csv_digits_stay_text(tmp_path) -> None:
    path = tmp_path / "cases.csv"
    pd.DataFrame([{**GOOD, "case_text": "12345"}]).to_csv(path, index=False)
    assert load_cases(path)[0].text == "12345"  # a CSV cell is text by nature


@pytest.mark.parametrize(("field", "char", "code"), [("case_text", "\x00", "U+0000 NULL"),
                                                   ("answer", "\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"),
                                                   ("title", "\u2067", "U+2067 RIGHT-TO-LEFT ISOLATE")])
def test_case_file_control_character_is_refused_with_its_position(tmp_path, field, char, code) -> None:
    path = _jsonl(tmp_path / "cases.jsonl", [{**GOOD, field: "abc" + char + "def"}])
    with pytest.raises(DataError) as err:
        load_cases(path)
    message = str(err.value)
    assert f"cases.jsonl, line 1, column '{field}'" in message
    assert f"holds {code} at character 4" in message and "Remove the character" in message
    assert char not in message


def test_records_built_by_evolve_may_hold_any_text() -> None:
    """Model-written text (a consilium's opinion, an OTB answer) becomes a Target too: the records
    themselves stay permissive, so one odd reply cannot crash a run; user files are checked by their loaders."""
    assert Target(target_id="t1", case_id="c1", component="answer", text="ok\x0c").text == "ok\x0c"
    assert Case(case_id="c1", text="x\u202e").text == "x\u202e"


def test_pack_cases_jsonl_with_bidi_override_is_refused_by_load_pack(tmp_path) -> None:
    from evolve.data import load_pack
    from evolve.errors import PackError
    from tests.data.conftest import REPO_ROOT

    pack = tmp_path / "pack"
    import shutil

    shutil.copytree(REPO_ROOT / "ratings" / "example", pack)
    lines = (pack / "targets.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["text"] = "Take \u202e2 tablets"
    (pack / "targets.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(PackError, match=r"targets.jsonl, line 1, field 'text': the text holds U\+202E RIGHT-TO-LEFT "
                       r"OVERRIDE at character 6\. Remove the character"):
        load_pack(pack)


def test_rating_table_control_characters_are_refused_with_row_and_column(tmp_path) -> None:
    from evolve.data import import_table
    from evolve.errors import PackError
    from evolve.rubric import Rubric
    from tests.data.conftest import TEST_RUBRIC
    from tests.data.test_table_import import LONG, _write

    frame = LONG.copy()
    frame.loc[1, "comment"] = "part\u202ely"
    frame.loc[3, "target_text"] = "Invented \x00answer two."
    path = _write(frame, tmp_path / "table.csv")
    with pytest.raises(PackError) as err:
        import_table(path, rubric=Rubric.model_validate(TEST_RUBRIC))
    message = str(err.value)
    assert "row 3, column 'comment': the text holds U+202E RIGHT-TO-LEFT OVERRIDE at character 5" in message
    assert "row 5, column 'target_text': the text holds U+0000 NULL at character 10" in message


@pytest.mark.parametrize("suffix", [".jsonl", ".xlsx"])
def test_rating_table_number_in_a_text_column_is_refused(tmp_path, suffix) -> None:
    from evolve.data import import_table
    from evolve.errors import PackError
    from evolve.rubric import Rubric
    from tests.data.conftest import TEST_RUBRIC
    from tests.data.test_table_import import LONG, _write

    frame = LONG.copy().astype(object)
    frame.loc[2, "target_text"] = 12345
    path = _write(frame, tmp_path / f"table{suffix}")
    with pytest.raises(PackError) as err:
        import_table(path, rubric=Rubric.model_validate(TEST_RUBRIC))
    assert "column 'target_text': target_text holds a number (12345), not text" in str(err.value)
    assert "--column target_text=COLUMN" in str(err.value)
