"""`ratings check` on large and empty packs (issue 24 items 5 and 6).

The speed itself is measured in ``bench/ratings_check.py``; these tests pin what makes it fast
(no record per valid row, the garbage collector paused, chunked reading with progress) and that
the column-wise checks word every problem exactly as the row-by-row path does, wherever a row
falls among the chunks.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from typer.testing import CliRunner

import evolve.data._ratings_csv as ratings_csv
from evolve.cli import app
from evolve.data import check_pack, load_pack, validate_pack
from evolve.errors import PackError

from .conftest import small_pack

HEADER = ["case_id", "target_id", "rater_id", "criterion", "score", "not_evaluable", "comment"]


def _error(call, *args, **kwargs) -> str:
    with pytest.raises(PackError) as info:
        call(*args, **kwargs)
    return str(info.value)


# -- empty packs ------------------------------------------------------------------------------


def test_header_only_ratings_are_refused_by_check(edit_ratings, prompts_root) -> None:
    pack_dir = edit_ratings(lambda rows: rows[:1])
    msg = _error(check_pack, pack_dir, prompts_root=prompts_root)
    assert "ratings.csv: holds no ratings (no row after the header)" in msg
    assert "(1 problem)" in msg


def test_blank_rows_only_are_no_ratings(edit_ratings, prompts_root) -> None:
    pack_dir = edit_ratings(lambda rows: [rows[0], [""] * 7, []])
    assert "holds no ratings" in _error(check_pack, pack_dir, prompts_root=prompts_root)


def test_no_cases_and_no_targets_are_refused_by_check(pack_dir, prompts_root) -> None:
    for name in ("cases.jsonl", "targets.jsonl"):
        (pack_dir / name).write_text("", encoding="utf-8")
    (pack_dir / "ratings.csv").write_text(",".join(HEADER) + "\n", encoding="utf-8")
    msg = _error(check_pack, pack_dir, prompts_root=prompts_root)
    assert "cases.jsonl: holds no cases" in msg
    assert "targets.jsonl: holds no targets" in msg
    assert "ratings.csv: holds no ratings" in msg


def test_rows_that_are_all_invalid_are_not_called_empty(edit_ratings, prompts_root) -> None:
    pack_dir = edit_ratings(lambda rows: [rows[0], [*rows[1][:4], "x", "false", ""]])
    msg = _error(check_pack, pack_dir, prompts_root=prompts_root)
    assert "row 2, field 'score': 'x' is not an integer" in msg
    assert "holds no ratings" not in msg


def test_a_pack_of_targets_not_rated_yet_still_loads(edit_ratings, prompts_root) -> None:
    """`evolve bench run` writes such packs to be rated; only checking and calibrating need ratings."""
    pack_dir = edit_ratings(lambda rows: rows[:1])
    assert load_pack(pack_dir, prompts_root=prompts_root).ratings == ()
    msg = _error(load_pack, pack_dir, prompts_root=prompts_root, require_ratings=True)
    assert "ratings.csv: holds no ratings" in msg


def test_cli_refuses_an_empty_pack(edit_ratings, prompts_root) -> None:
    pack_dir = edit_ratings(lambda rows: rows[:1])
    result = CliRunner().invoke(app, ["ratings", "check", str(pack_dir), "--prompts-root", str(prompts_root)])
    assert result.exit_code == 2
    assert "holds no ratings" in result.output
    assert "Traceback" not in result.output


# -- control characters -----------------------------------------------------------------------


def test_control_characters_in_comments_and_rater_ids_are_refused(edit_ratings, prompts_root) -> None:
    def poison(rows):
        rows[2][6] = "fine\u202eenif"
        rows[3][2] = "r\x001"
        return rows

    msg = _error(check_pack, edit_ratings(poison), prompts_root=prompts_root)
    assert "ratings.csv, row 3, field 'comment': the comment holds U+202E RIGHT-TO-LEFT OVERRIDE at character 5" in msg
    assert "ratings.csv, row 4, field 'rater_id': the rater id holds U+0000" in msg
    assert "\u202e" not in msg and "\x00" not in msg


def test_control_characters_are_refused_in_memory_too(prompts_root) -> None:
    pack = small_pack()
    bad = pack.ratings[0].model_copy(update={"comment": "ok\x1b[31m"})
    pack = type(pack)(path=None, manifest=pack.manifest, cases=pack.cases, targets=pack.targets,
                      ratings=(bad, *pack.ratings[1:]))
    msg = _error(validate_pack, pack, prompts_root=prompts_root)
    assert "ratings.csv, row 2, field 'comment': the comment holds U+001B" in msg


# -- every check kept, wherever a row falls -----------------------------------------------------


def _broken(rows: list[list[str]]) -> list[list[str]]:
    """Ten kinds of bad row between good ones, blank rows and a comment spanning lines."""
    good = rows[1:]
    r = good[0]
    return [
        rows[0], *good,
        [*r[:2], "r9", r[3], "x", "false", ""],          # score not an integer
        [*r[:2], "r9", "errors", "1", "maybe", ""],       # flag not a boolean
        [*r[:2], "r8", r[3], "1", "true", ""],            # score and not_evaluable
        [""] * 7, [],                                     # blank rows: skipped
        ["c 1", *r[1:3], r[3], "1", "false", ""],         # bad case id
        [r[0], "t1", "", r[3], "1", "false", ""],         # empty rater
        ["a", "b", "c"],                                  # wrong cell count
        [*r[:2], "r2", r[3], "2", "false", "two\nlines"],  # duplicate of row 3
        [r[0], "t404", "r1", r[3], "1", "false", ""],     # unknown target
        ["c2", "t1", "r7", r[3], "1", "false", ""],       # case differs from the target's
        [r[0], "t1", "r7", "nope", "1", "false", ""],      # criterion not in the rubric
        [r[0], "t1", "r6", "support", "9", "false", ""],  # off the scale
        [r[0], "t1", "r6", "errors", "1", "false", ""],   # criterion not for the component
    ]


EXPECTED = [
    "row 8, field 'score': 'x' is not an integer",
    "row 9, field 'not_evaluable': 'maybe' is not a boolean",
    "row 10, field 'score/not_evaluable': set either score or not_evaluable, not both",
    "row 13, field 'case_id': String should match pattern",
    "row 14, field 'rater_id': String should have at least 1 character",
    "row 15: has 3 cells but the header has 7",
    "row 16, field 'rater_id': duplicate rating of target 't1' by rater 'r2' on criterion 'support' (first in row 3)",
    "row 17, field 'target_id': unknown target_id 't404'",
    "row 18, field 'case_id': case_id 'c2' differs from the case of target 't1'",
    "row 19, field 'criterion': criterion 'nope' is not in rubric 'test-rubric'",
    "row 20, field 'score': score 9 is outside the scale 0..2",
    "row 21, field 'criterion': criterion 'errors' does not apply to component 'answer' of target 't1'",
]


@pytest.mark.parametrize("chunk_rows", [1, 3, 7, ratings_csv.CHUNK_ROWS])
def test_every_problem_is_reported_together_at_any_chunk_size(edit_ratings, prompts_root, monkeypatch,
                                                              chunk_rows) -> None:
    monkeypatch.setattr(ratings_csv, "CHUNK_ROWS", chunk_rows)
    msg = _error(check_pack, edit_ratings(_broken), prompts_root=prompts_root)
    lines = [line for line in msg.splitlines() if line.startswith("  - ")]
    assert len(lines) == len(EXPECTED), msg
    for line, expected in zip(lines, EXPECTED):
        assert expected in line
    assert msg == _error(load_pack, edit_ratings(lambda rows: rows), prompts_root=prompts_root)


def test_rows_are_numbered_as_a_spreadsheet_shows_them_across_chunks(edit_ratings, prompts_root, monkeypatch) -> None:
    """A quoted comment spanning lines is one row; blank rows count (the header is row 1)."""
    monkeypatch.setattr(ratings_csv, "CHUNK_ROWS", 2)
    pack_dir = edit_ratings(lambda rows: [*rows, [], [*rows[1][:4], "7", "false", "a\nb\nc"]])
    assert "ratings.csv, row 9, field 'score': score 7 is outside" in _error(check_pack, pack_dir, prompts_root=prompts_root)


# -- what makes it fast -----------------------------------------------------------------------


def test_valid_rows_are_never_checked_one_by_one(pack_dir, prompts_root, monkeypatch) -> None:
    calls: list[int] = []
    real = ratings_csv._row_rating
    monkeypatch.setattr(ratings_csv, "_row_rating", lambda rowno, *a: calls.append(rowno) or real(rowno, *a))
    summary = check_pack(pack_dir, prompts_root=prompts_root)
    assert summary.n_ratings == 6 and calls == []
    path = pack_dir / "ratings.csv"
    path.write_text(path.read_text(encoding="utf-8") + "c1,t1,r3,support,x,false,\n", encoding="utf-8")
    with pytest.raises(PackError):
        check_pack(pack_dir, prompts_root=prompts_root)
    assert calls == [8]  # only the bad row (the multi-line comment makes it row 8)


def test_the_collector_is_paused_while_reading_and_restored(pack_dir, prompts_root, monkeypatch) -> None:
    monkeypatch.setattr(ratings_csv, "CHUNK_ROWS", 6)
    states: list[bool] = []
    assert gc.isenabled()
    check_pack(pack_dir, prompts_root=prompts_root, progress=lambda *_: states.append(gc.isenabled()))
    assert states == [False] and gc.isenabled()
    (pack_dir / "ratings.csv").write_text("wrong\n", encoding="utf-8")
    with pytest.raises(PackError):
        check_pack(pack_dir, prompts_root=prompts_root)
    assert gc.isenabled()


def test_progress_is_reported_per_chunk(pack_dir, prompts_root, monkeypatch) -> None:
    monkeypatch.setattr(ratings_csv, "CHUNK_ROWS", 4)
    seen: list[tuple[int, int, int]] = []
    check_pack(pack_dir, prompts_root=prompts_root, progress=lambda *step: seen.append(step))
    size = (pack_dir / "ratings.csv").stat().st_size
    assert [rows for rows, _, _ in seen] == [4]  # 6 rows: a full chunk, then the last 2 (not reported)
    assert seen[0][1] <= seen[0][2] == size


def test_cli_prints_progress_lines_only_for_files_larger_than_a_chunk(pack_dir, prompts_root, monkeypatch) -> None:
    args = ["ratings", "check", str(pack_dir), "--prompts-root", str(prompts_root)]
    quiet = CliRunner().invoke(app, args)
    assert quiet.exit_code == 0 and "rows checked" not in quiet.output
    monkeypatch.setattr(ratings_csv, "CHUNK_ROWS", 2)
    loud = CliRunner().invoke(app, args)
    assert loud.exit_code == 0
    assert "ratings.csv: 2 rows checked" in loud.output and "ratings.csv: 6 rows checked" in loud.output


def test_check_counts_equal_the_summary_of_the_loaded_pack(pack_dir, prompts_root) -> None:
    from evolve.data import summarize_pack

    assert check_pack(pack_dir, prompts_root=prompts_root) == summarize_pack(load_pack(pack_dir, prompts_root=prompts_root))


def test_a_large_invented_pack_checks_and_loads_alike(tmp_path) -> None:
    """20,000 rows of the bench's invented pack: every row counted, the loaded pack agrees."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_ratings", Path(__file__).resolve().parents[2] / "bench" / "ratings_check.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    folder = bench.write_invented_pack(tmp_path / "pack", 20_000)
    summary = check_pack(folder)
    pack = load_pack(folder)
    assert summary.n_ratings == len(pack.ratings) == 20_000
    assert sum(summary.ratings_per_rater.values()) == 20_000
    assert summary.n_not_evaluable == sum(r.not_evaluable for r in pack.ratings) > 0


def test_calibrate_refuses_a_pack_without_ratings_before_any_call(tmp_path) -> None:
    from evolve.calibration import plan_calibration
    from evolve.config import resolve_config
    from evolve.data import write_pack
    from evolve.splits import make_splits, write_splits
    from tests.conftest import make_tiny_pack

    pack_dir = write_pack(make_tiny_pack(10), tmp_path / "pack")
    write_splits(make_splits(load_pack(pack_dir), holdout_fraction=0.0, validation_fraction=0.5, seed=3), tmp_path / "splits")
    (pack_dir / "ratings.csv").write_text(",".join(HEADER) + "\n", encoding="utf-8")
    config = resolve_config(preset="quick", environ={}, overrides={
        "run_id": "r", "pack": pack_dir, "splits": tmp_path / "splits", "archives_dir": tmp_path / "archives",
        "cache_path": tmp_path / "cache.sqlite", "endpoint": {"provider": "fake"}, "audit": False})
    assert "ratings.csv: holds no ratings" in _error(plan_calibration, config)
    assert not (tmp_path / "archives" / "r").exists()


def test_checking_a_pack_imports_neither_pandas_nor_openpyxl() -> None:
    """Start-up is part of `evolve ratings check`'s time: the two took a second to import."""
    import subprocess
    import sys

    code = ("import sys; from evolve.data import check_pack; check_pack('ratings/example'); "
            "print([m for m in ('pandas', 'openpyxl') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "[]"
