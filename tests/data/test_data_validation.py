"""Every validation error kind: the message names the file, the line/row and the field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evolve.data import MAX_REPORTED_PROBLEMS, load_pack
from evolve.errors import PackError, RubricError


def _error(pack_dir: Path, prompts_root: Path | None, **kwargs) -> str:
    with pytest.raises(PackError) as info:
        load_pack(pack_dir, prompts_root=prompts_root, **kwargs)
    return str(info.value)


def _json_lines(change):
    """Adapter: edit JSONL lines as dicts."""

    def apply(lines: list[str]) -> list[str]:
        return [json.dumps(d) for d in change([json.loads(x) for x in lines])]

    return apply


# -- per-line / per-row parsing ------------------------------------------------------------


def test_malformed_json_line(edit, prompts_root) -> None:
    pack_dir = edit("cases.jsonl", lambda lines: [lines[0], lines[1][:-5]])
    msg = _error(pack_dir, prompts_root)
    assert "cases.jsonl, line 2: malformed JSON" in msg
    assert "one JSON object per line" in msg


def test_json_line_that_is_not_an_object(edit, prompts_root) -> None:
    pack_dir = edit("targets.jsonl", lambda lines: [*lines, "[1, 2]"])
    assert "targets.jsonl, line 4: expected a JSON object" in _error(pack_dir, prompts_root)


def test_missing_field_in_jsonl(edit, prompts_root) -> None:
    def drop_text(rows):
        del rows[0]["text"]
        return rows

    msg = _error(edit("targets.jsonl", _json_lines(drop_text)), prompts_root)
    assert "targets.jsonl, line 1, field 'text': Field required. Add the field." in msg


def test_extra_field_in_jsonl(edit, prompts_root) -> None:
    def add_field(rows):
        rows[1]["colour"] = "blue"
        return rows

    msg = _error(edit("cases.jsonl", _json_lines(add_field)), prompts_root)
    assert "cases.jsonl, line 2, field 'colour'" in msg
    assert "Remove the field" in msg


def test_invalid_id_in_ratings_row(edit_ratings, prompts_root) -> None:
    def bad_id(rows):
        rows[2][0] = "  bad id"
        return rows

    msg = _error(edit_ratings(bad_id), prompts_root)
    assert "ratings.csv, row 3, field 'case_id'" in msg
    assert "rating.schema.json" in msg


def test_score_and_not_evaluable_both_set(edit_ratings, prompts_root) -> None:
    def both(rows):
        rows[1][5] = "true"
        return rows

    msg = _error(edit_ratings(both), prompts_root)
    assert "ratings.csv, row 2, field 'score/not_evaluable': set either score or not_evaluable" in msg


def test_empty_score_without_not_evaluable(edit_ratings, prompts_root) -> None:
    def empty(rows):
        rows[5][4] = ""
        return rows

    assert "ratings.csv, row 6, field 'score/not_evaluable': score is empty" in _error(edit_ratings(empty), prompts_root)


def test_non_integer_score(edit_ratings, prompts_root) -> None:
    def frac(rows):
        rows[1][4] = "1.5"
        return rows

    msg = _error(edit_ratings(frac), prompts_root)
    assert "ratings.csv, row 2, field 'score': '1.5' is not an integer" in msg


def test_bad_not_evaluable_value(edit_ratings, prompts_root) -> None:
    def yes(rows):
        rows[1][5] = "yes"
        return rows

    msg = _error(edit_ratings(yes), prompts_root)
    assert "ratings.csv, row 2, field 'not_evaluable': 'yes' is not a boolean. Write true or false." in msg


def test_wrong_cell_count(edit_ratings, prompts_root) -> None:
    def short(rows):
        rows[3] = rows[3][:4]
        return rows

    assert "ratings.csv, row 4: has 4 cells but the header has 7" in _error(edit_ratings(short), prompts_root)


def test_wrong_ratings_header(edit_ratings, prompts_root) -> None:
    def swap(rows):
        rows[0][4], rows[0][5] = rows[0][5], rows[0][4]
        return rows

    msg = _error(edit_ratings(swap), prompts_root)
    assert "ratings.csv, row 1, field 'header'" in msg
    assert "case_id,target_id,rater_id,criterion,score,not_evaluable,comment" in msg


def test_header_with_byte_order_mark_is_accepted(pack_dir, prompts_root) -> None:
    path = pack_dir / "ratings.csv"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(load_pack(pack_dir, prompts_root=prompts_root).ratings) == 6


# -- cross-record checks -------------------------------------------------------------------


def test_duplicate_case_id(edit, prompts_root) -> None:
    msg = _error(edit("cases.jsonl", lambda lines: [*lines, lines[0]]), prompts_root)
    assert "cases.jsonl, line 3, field 'case_id': duplicate case_id 'c1' (first on line 1)" in msg


def test_duplicate_target_id(edit, prompts_root) -> None:
    msg = _error(edit("targets.jsonl", lambda lines: [lines[0], lines[1], lines[1], lines[2]]), prompts_root)
    assert "targets.jsonl, line 3, field 'target_id': duplicate target_id 't2' (first on line 2)" in msg


def test_duplicate_rating(edit_ratings, prompts_root) -> None:
    msg = _error(edit_ratings(lambda rows: [*rows, rows[1]]), prompts_root)
    assert "ratings.csv, row 8, field 'rater_id': duplicate rating of target 't1' by rater 'r1'" in msg
    assert "(first in row 2)" in msg


def test_target_with_unknown_case(edit, prompts_root) -> None:
    def orphan(rows):
        rows[2]["case_id"] = "c9"
        return rows

    msg = _error(edit("targets.jsonl", _json_lines(orphan)), prompts_root)
    assert "targets.jsonl, line 3, field 'case_id': unknown case_id 'c9' (not in cases.jsonl)" in msg


def test_rating_of_unknown_target(edit_ratings, prompts_root) -> None:
    def unknown(rows):
        rows[6][1] = "t9"
        return rows

    msg = _error(edit_ratings(unknown), prompts_root)
    assert "ratings.csv, row 7, field 'target_id': unknown target_id 't9' (not in targets.jsonl)" in msg


def test_rating_case_differs_from_target_case(edit_ratings, prompts_root) -> None:
    def moved(rows):
        rows[6][0] = "c1"
        return rows

    msg = _error(edit_ratings(moved), prompts_root)
    assert "ratings.csv, row 7, field 'case_id': case_id 'c1' differs from the case of target 't3'" in msg
    assert "Set case_id to the target's case." in msg


# -- checks against the rubric -------------------------------------------------------------


def test_criterion_not_in_rubric(edit_ratings, prompts_root) -> None:
    def rename(rows):
        rows[1][3] = "charm"
        return rows

    msg = _error(edit_ratings(rename), prompts_root)
    assert "ratings.csv, row 2, field 'criterion': criterion 'charm' is not in rubric 'test-rubric'" in msg


def test_score_outside_scale(edit_ratings, prompts_root) -> None:
    def big(rows):
        rows[1][4] = "3"  # support is 0..2
        return rows

    msg = _error(edit_ratings(big), prompts_root)
    assert "ratings.csv, row 2, field 'score': score 3 is outside the scale 0..2 of criterion 'support'" in msg


def test_structurally_inapplicable_rating(edit_ratings, prompts_root) -> None:
    def misplaced(rows):
        rows[1][3] = "errors"  # t1 is an answer; 'errors' applies to rationales only
        return rows

    msg = _error(edit_ratings(misplaced), prompts_root)
    assert "ratings.csv, row 2, field 'criterion'" in msg
    assert "does not apply to component 'answer'" in msg
    assert "structurally inapplicable" in msg


def test_component_unknown_to_rubric(edit, prompts_root) -> None:
    def opinion(rows):
        rows[0]["component"] = "opinion"
        return rows

    msg = _error(edit("targets.jsonl", _json_lines(opinion)), prompts_root)
    assert "targets.jsonl, line 1, field 'component': component 'opinion' is not a component of rubric" in msg
    assert "does not apply to component" not in msg  # reported once, on the target


def test_rubric_checks_can_be_skipped(edit_ratings, prompts_root) -> None:
    def rename(rows):
        rows[1][3] = "charm"
        return rows

    pack = load_pack(edit_ratings(rename), check_rubric=False)
    assert "charm" in pack.criteria


# -- manifest -------------------------------------------------------------------------------


def test_unsupported_version(edit, prompts_root) -> None:
    pack_dir = edit("pack.json", lambda lines: [line.replace('"version": 1', '"version": 2') for line in lines])
    msg = _error(pack_dir, prompts_root)
    assert "pack.json, field 'version': unsupported pack format version 2" in msg
    assert "Re-import" in msg


def test_missing_rubric(prompts_root, pack_dir) -> None:
    (elsewhere := prompts_root.parent / "elsewhere").mkdir()
    with pytest.raises(PackError) as info:
        load_pack(pack_dir, prompts_root=elsewhere)
    msg = str(info.value)
    assert "pack.json, field 'rubric'" in msg
    assert "no rubric 'test-rubric'" in msg and str(elsewhere) in msg
    assert isinstance(info.value.__cause__, RubricError)


def test_rubric_version_mismatch(edit, prompts_root) -> None:
    pack_dir = edit("pack.json", lambda lines: [line.replace('"version": "7"', '"version": "6"') for line in lines])
    msg = _error(pack_dir, prompts_root)
    assert "pack.json, field 'rubric'" in msg
    assert "rubric version is '7' but '6' was requested" in msg


def test_invalid_manifest_field(edit, prompts_root) -> None:
    pack_dir = edit("pack.json", lambda lines: [line.replace('"name": "small"', '"name": "has space"') for line in lines])
    assert "pack.json, field 'name'" in _error(pack_dir, prompts_root)


def test_manifest_not_json(pack_dir, prompts_root) -> None:
    (pack_dir / "pack.json").write_text("{\n  oops\n}\n", encoding="utf-8")
    assert "pack.json, line 2: invalid JSON" in _error(pack_dir, prompts_root)


def test_missing_file(pack_dir, prompts_root) -> None:
    (pack_dir / "targets.jsonl").unlink()
    assert "targets.jsonl: file is missing" in _error(pack_dir, prompts_root)


def test_missing_directory(tmp_path) -> None:
    assert "no such pack directory" in _error(tmp_path / "nowhere", None)


# -- collecting -----------------------------------------------------------------------------


def test_all_problems_are_reported_together(edit, edit_ratings, prompts_root) -> None:
    edit("cases.jsonl", lambda lines: [*lines, lines[0]])

    def several(rows):
        rows[1][4] = "9"
        rows[2][3] = "charm"
        rows[6][1] = "t9"
        return rows

    msg = _error(edit_ratings(several), prompts_root)
    assert msg.splitlines()[0].endswith("is invalid (4 problems):")
    for fragment in ("cases.jsonl, line 3", "ratings.csv, row 2", "ratings.csv, row 3", "ratings.csv, row 7"):
        assert fragment in msg


def test_long_problem_lists_are_truncated_with_a_count(edit_ratings, prompts_root) -> None:
    def many(rows):
        extra = [["c1", "t1", f"rater-{i}", "support", "7", "false", ""] for i in range(30)]
        return rows + extra

    msg = _error(edit_ratings(many), prompts_root)
    listed = [line for line in msg.splitlines() if line.startswith("  - ")]
    assert len(listed) == MAX_REPORTED_PROBLEMS
    assert re.search(r"\.\.\. and 10 more problem\(s\) not shown", msg)
    assert "(30 problems)" in msg
