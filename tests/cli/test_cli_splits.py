"""`evolve splits make/check` with a case file, a frame manifest, exact sizes and the paper preset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import write_pack
from evolve.splits import load_splits
from tests.splits.conftest import doi_universe, rated_pack

runner = CliRunner()
IDS = doi_universe(300)


@pytest.fixture
def paper_setting(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A 300-case case file and a pack of 110 rated cases (a spread-out subset, in source order)."""
    rated = IDS[::3][:100] + IDS[1::3][:10]
    rated = [c for c in IDS if c in set(rated)]
    cases = tmp_path / "nejm_cases.jsonl"
    cases.write_text("".join(json.dumps({"doi": c, "title": "t", "case_text": "x"}) + "\n" for c in IDS))
    pack = write_pack(rated_pack(rated), tmp_path / "ratings" / "nejm")
    return Path(pack), cases, rated


def _ok(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result


def test_paper_preset_round_trip(tmp_path: Path, paper_setting) -> None:
    pack, cases, rated = paper_setting
    out = tmp_path / "splits" / "nejm"
    result = _ok(["splits", "make", str(pack), "--cases", str(cases), "--preset", "paper", "--out", str(out)])
    assert "frame 110 (train 80, validation 30), held-out 190 cases" in result.stdout
    s = load_splits(out)
    assert list(s.frame) == rated and s.holdout == tuple(c for c in IDS if c not in set(rated))
    assert s.frame_origin.preset == "paper" and s.frame_origin.cases.path == str(cases)
    assert "ok" in _ok(["splits", "check", str(out), "--pack", str(pack), "--cases", str(cases)]).stdout
    assert "ok" in _ok(["splits", "check", str(out), "--pack", str(pack)]).stdout
    # the same command again is a no-op; another seed needs --overwrite
    _ok(["splits", "make", str(pack), "--cases", str(cases), "--preset", "paper", "--out", str(out)])
    again = runner.invoke(app, ["splits", "make", str(pack), "--cases", str(cases), "--preset", "paper",
                                "--out", str(out), "--seed", "1"])
    assert again.exit_code == 2 and "overwrite" in again.output


def test_frame_manifest_and_exact_sizes(tmp_path: Path, paper_setting) -> None:
    pack, cases, rated = paper_setting
    manifest = tmp_path / "calibration.txt"
    manifest.write_text("# the 110 rated cases\n" + "".join(f"{c}\n" for c in reversed(rated)))
    out = tmp_path / "s"
    result = _ok(["splits", "make", str(pack), "--cases", str(cases), "--frame-manifest", str(manifest),
                  "--train-size", "80", "--validation-size", "30", "--out", str(out)])
    assert "not in the source order" in result.output  # warned, accepted
    assert (out / "frame.txt").read_text() == "".join(f"{c}\n" for c in rated)  # written in source order
    origin = json.loads((out / "split.json").read_text())["frame_origin"]
    assert origin["frame_manifest"]["path"] == str(manifest) and origin["frame"] == "manifest"


def test_case_file_with_renamed_columns(tmp_path: Path, paper_setting) -> None:
    """--column maps a case file whose DOI column has another name; without it, one clear error."""
    pack, _, rated = paper_setting
    cases = tmp_path / "renamed.csv"
    cases.write_text("Article DOI,title\n" + "".join(f"{c},t\n" for c in IDS))
    out = tmp_path / "s"
    result = _ok(["splits", "make", str(pack), "--cases", str(cases), "--column", "doi=Article DOI",
                  "--preset", "paper", "--out", str(out)])
    assert "frame 110 (train 80, validation 30), held-out 190 cases" in result.stdout
    assert list(load_splits(out).frame) == rated
    assert "ok" in _ok(["splits", "check", str(out), "--pack", str(pack), "--cases", str(cases),
                        "--column", "doi=Article DOI"]).stdout
    bad = runner.invoke(app, ["splits", "make", str(pack), "--cases", str(cases), "--preset", "paper",
                              "--out", str(tmp_path / "t")])
    assert bad.exit_code == 2 and "--column case_id=COLUMN" in bad.output
    lone = runner.invoke(app, ["splits", "make", str(pack), "--column", "doi=X", "--out", str(tmp_path / "u")])
    assert lone.exit_code == 2 and "give --cases FILE too" in lone.output


def test_bad_manifest_is_one_error_with_lines(tmp_path: Path, paper_setting) -> None:
    pack, cases, rated = paper_setting
    manifest = tmp_path / "calibration.txt"
    manifest.write_text("".join(f"{c}\n" for c in rated[:108]) + "10.1056/TYPO\n" + f"{rated[0]}\n")
    result = runner.invoke(app, ["splits", "make", str(pack), "--cases", str(cases), "--frame-manifest",
                                 str(manifest), "--preset", "paper", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "line 109: case id '10.1056/TYPO' is not in case file" in text
    assert f"line 110: case id {rated[0]!r} repeats line 1" in text
    assert "lists 109 distinct case id(s) but 110 are expected (preset 'paper')" in text
    assert not (tmp_path / "s").exists()


def test_drawn_frame_from_the_pack(tmp_path: Path) -> None:
    pack = write_pack(rated_pack(IDS[:40]), tmp_path / "p")
    out = tmp_path / "s"
    result = _ok(["splits", "make", str(pack), "--frame-size", "30", "--validation-size", "9", "--seed", "5",
                  "--out", str(out)])
    assert "frame 30 (train 21, validation 9), held-out 10 cases" in result.stdout
    assert load_splits(out).frame_origin.frame_seed == 5
    _ok(["splits", "check", str(out), "--pack", str(pack)])


def test_conflicting_options_are_explained(tmp_path: Path, paper_setting) -> None:
    pack, _, _ = paper_setting
    result = runner.invoke(app, ["splits", "make", str(pack), "--frame-size", "20", "--holdout-fraction", "0.2",
                                 "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "--holdout-fraction" in result.output
    result = runner.invoke(app, ["splits", "make", str(pack), "--preset", "paper", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "expects 300" in " ".join(result.output.split())
    result = runner.invoke(app, ["splits", "make", str(pack), "--validation-size", "5", "--out", str(tmp_path / "s")])
    assert result.exit_code == 2 and "no frame" in result.output


def test_check_with_the_wrong_case_file(tmp_path: Path, paper_setting) -> None:
    pack, cases, _ = paper_setting
    out = tmp_path / "s"
    _ok(["splits", "make", str(pack), "--cases", str(cases), "--preset", "paper", "--out", str(out)])
    shorter = tmp_path / "short.jsonl"
    shorter.write_text("".join(json.dumps({"doi": c}) + "\n" for c in IDS[:-1]))
    result = runner.invoke(app, ["splits", "check", str(out), "--pack", str(pack), "--cases", str(shorter)])
    assert result.exit_code == 2 and "not in case file" in " ".join(result.output.split())


def test_fraction_splits_unchanged(tmp_path: Path) -> None:
    pack = write_pack(rated_pack(IDS[:20]), tmp_path / "p")
    out = tmp_path / "s"
    _ok(["splits", "make", str(pack), "--out", str(out)])
    meta = json.loads((out / "split.json").read_text())
    assert "frame_origin" not in meta and meta["counts"] == {"frame": 16, "holdout": 4, "train": 11, "validation": 5}
    again = _ok(["splits", "make", str(pack), "--out", str(out)])  # the same splits again: nothing to write
    assert again.stdout.startswith(f"unchanged (already written) {out}: frame 16 (train 11, validation 5)")


def test_a_fraction_out_of_range_names_the_option(tmp_path: Path) -> None:
    pack = write_pack(rated_pack(IDS[:20]), tmp_path / "p")
    for option, value, words in (("--holdout-fraction", "1.5", "at least 0 and below 1"),
                                 ("--validation-fraction", "0", "above 0 and below 1")):
        done = runner.invoke(app, ["splits", "make", str(pack), "--out", str(tmp_path / "s"), option, value])
        assert done.exit_code == 2 and f"({option}; Python: " in done.output and words in done.output, done.output
        assert not (tmp_path / "s").exists()


def test_a_message_stays_on_one_line_in_a_narrow_terminal(tmp_path: Path) -> None:
    """Messages name paths that scripts and readers look for: rich must not break them at the
    terminal's width (here 40 columns, with a path twice as long)."""
    pack = write_pack(rated_pack(IDS[:40]), tmp_path / "p")
    out = tmp_path / "a-folder-name-long-enough-to-pass-any-terminal-width" / "splits"
    result = CliRunner(env={"COLUMNS": "40"}).invoke(app, ["splits", "make", str(pack), "--frame-size", "30",
                                                           "--validation-size", "9", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}: frame 30 (train 21, validation 9), held-out 10 cases\n" in result.stdout
