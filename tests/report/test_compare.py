"""``evolve compare``: paired differences on shared targets, checked by plain recomputation, and
refusals of runs that do not share a pack and split (or a case file)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import load_pack
from evolve.errors import RunError
from evolve.markdown import md_inline
from evolve.outputs import ComparisonRun, read_run
from evolve.report import DIFFERENCE_COLUMNS, build_comparison, render_comparison_markdown, write_comparison
from evolve.splits import load_splits, make_splits, write_splits
from evolve.stats import MIN_CASES
from tests.report.conftest import LENIENT_MODEL, bench_folder, calibrate_tiny
from tests.report.test_html_reports import decoded_images, parse


def _validation_calls(run: Path, candidate_id: str) -> pd.DataFrame:
    s = pd.read_csv(run / "scores.csv", dtype={"target_id": str, "case_id": str})
    return s[(s["phase"] == "reeval") & (s["split"] == "validation") & (s["candidate_id"] == candidate_id)
             & (s["outcome"] == "score")]


def _mean_abs_error(calls: pd.DataFrame, ratings: pd.DataFrame) -> float:
    errors = [abs(c["score"] - r["score"]) for _, c in calls.iterrows()
              for _, r in ratings[ratings["target_id"] == c["target_id"]].iterrows()]
    return sum(errors) / len(errors)


def test_two_judge_models_are_compared_pairwise_on_shared_targets(calibration_runs, tmp_path):
    guided, lenient = calibration_runs
    out = tmp_path / "reports" / "models"
    comparison = write_comparison([guided, lenient], out, n_boot=200)
    labels = [r.label for r in comparison.runs]
    assert labels == ["guided (judge-guided)", f"lenient ({LENIENT_MODEL})"]
    ratings = pd.read_csv(Path(json.loads((guided / "config.json").read_text())["pack"]) / "ratings.csv",
                          dtype={"target_id": str})
    ratings = ratings[ratings["criterion"] == "entailment"]
    winner = next(d for d in comparison.differences if d.what == "winner")
    ids = [json.loads((r / "report.json").read_text())["criteria"]["entailment"]["winner"]["candidate_id"] for r in (guided, lenient)]
    a, b = _validation_calls(lenient, ids[1]), _validation_calls(guided, ids[0])
    # every target has the same number of calls and ratings on both sides, so the paired mean is the difference of MAEs
    assert winner.estimate == pytest.approx(_mean_abs_error(a, ratings) - _mean_abs_error(b, ratings))
    assert winner.estimate > 0
    assert winner.n_targets == a["target_id"].nunique() and winner.n_pairs > 0
    # the tiny pack's validation split has 3 cases: no sign-flip test over 3 cases can reject at 5% (the smallest
    # p is 2/8), so there is no interval and no verdict, only the words
    assert winner.n_cases == a["case_id"].nunique() == 3
    assert winner.low is None and winner.high is None and winner.p_value == pytest.approx(0.25)
    assert winner.verdict == "too few cases to tell"
    # the same lenient answer without guidance: no guidance is identical for both judges only if the guided
    # judge is lenient too without guidance, which the fake is (always 2)
    none = next(d for d in comparison.differences if d.what == "no guidance")
    assert none.estimate == 0.0
    assert list(pd.read_csv(out / "differences.csv").columns) == DIFFERENCE_COLUMNS
    stored = read_run(out)  # the written report, typed, as `evolve compare` printed it
    assert isinstance(stored, ComparisonRun) and stored.report == comparison
    md = (out / "report.md").read_text()
    assert "guided (judge-guided)" in md and "Paired differences" in md
    assert len(decoded_images(parse(out / "report.html"))) == 1


def test_runs_that_rescored_different_targets_say_so(calibration_runs, tmp_path):
    """Side-by-side MAEs over different targets would read as a comparison: the note says which."""
    guided, lenient = calibration_runs
    fewer = Path(shutil.copytree(lenient, tmp_path / "fewer"))
    scores = pd.read_csv(fewer / "scores.csv", dtype=str, keep_default_na=False)
    validation = scores[(scores["phase"] == "reeval") & (scores["split"] == "validation")]
    dropped = validation["target_id"].iloc[0]
    scores[~((scores["phase"] == "reeval") & (scores["target_id"] == dropped))].to_csv(fewer / "scores.csv", index=False)
    n = validation["target_id"].nunique()
    notes = build_comparison([guided, fewer], n_boot=50).notes
    assert any(f"criterion entailment: the runs re-scored different validation targets (guided (judge-guided) {n}, "
               f"fewer ({LENIENT_MODEL}) {n - 1}; {n - 1} shared)" in note and "the same --seed" in note for note in notes)
    assert not any("different validation targets" in note for note in build_comparison([guided, lenient], n_boot=50).notes)


def test_criteria_that_not_every_run_calibrated_are_named_as_left_out() -> None:
    from types import SimpleNamespace

    from evolve.report._compare import _not_shared

    reports = [SimpleNamespace(criteria={"correctness": 1, "worthiness": 1, "informativeness": 1}),
               SimpleNamespace(criteria={"correctness": 1})]
    assert _not_shared(["correctness"], ["eq3 (m)", "eq (m)"], reports) == [
        "Compared on the criteria every run calibrated (correctness); left out, because not every run has a winner "
        "for them: eq3 (m): worthiness, informativeness."]
    assert _not_shared(["correctness"], ["a", "b"], reports[1:] * 2) == []


def test_runs_on_another_split_are_refused_in_words_and_nothing_is_written(calibration_runs, tiny_frame, tmp_path):
    pack, splits = tiny_frame
    other = make_splits(load_pack(pack), holdout_fraction=0.2, validation_fraction=0.4, seed=4)
    assert other.validation != load_splits(splits).validation
    other_dir = tmp_path / "splits" / "other"
    write_splits(other, other_dir)
    third = calibrate_tiny(tmp_path, "other-split", "judge-guided", pack, other_dir)
    out = tmp_path / "reports" / "x"
    with pytest.raises(RunError, match="do not share a split"):
        write_comparison([calibration_runs[0], third], out)
    assert not out.exists()


def test_runs_on_another_pack_are_refused(calibration_runs, tmp_path):
    copy = Path(shutil.copytree(calibration_runs[1], tmp_path / "copy"))
    config = json.loads((copy / "config.json").read_text())
    pack = Path(shutil.copytree(config["pack"], tmp_path / "pack"))
    manifest = json.loads((pack / "pack.json").read_text())
    manifest["name"] = "another-pack"
    (pack / "pack.json").write_text(json.dumps(manifest))
    config["pack"] = str(pack)
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunError, match="do not share a pack"):
        build_comparison([calibration_runs[0], copy])


def test_compare_refuses_one_run_other_kinds_and_folders_that_are_no_run(calibration_runs, bench_run, tmp_path):
    with pytest.raises(RunError, match="at least two"):
        build_comparison([calibration_runs[0]])
    with pytest.raises(RunError, match="different kinds"):
        build_comparison([calibration_runs[0], bench_run])
    with pytest.raises(RunError, match="neither a calibration run"):
        build_comparison([calibration_runs[0], tmp_path])
    with pytest.raises(RunError, match="no such folder"):
        build_comparison([calibration_runs[0], tmp_path / "missing"])
    with pytest.raises(RunError, match="given twice"):
        build_comparison([calibration_runs[0], calibration_runs[0].parent / ".." / calibration_runs[0].parent.name / calibration_runs[0].name])
    unfinished = Path(shutil.copytree(calibration_runs[1], tmp_path / "unfinished"))
    (unfinished / "scores.csv").unlink()
    with pytest.raises(RunError, match="evolve calibrate --resume"):
        build_comparison([calibration_runs[0], unfinished])


def test_cli_writes_under_reports_and_fails_cleanly(calibration_runs, bench_run, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["compare", str(calibration_runs[0]), str(calibration_runs[1]), "--reports-dir",
                              str(tmp_path / "reports"), "--n-boot", "100"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "reports" / "guided-vs-lenient" / "report.html").is_file()
    assert "winner lenient (judge-lenient) − guided (judge-guided)" in res.output
    res = runner.invoke(app, ["compare", str(calibration_runs[0]), str(bench_run), "--name", "bad",
                              "--reports-dir", str(tmp_path / "reports")])
    assert res.exit_code == 2 and "different kinds" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "reports" / "bad").exists()
    res = runner.invoke(app, ["compare", str(calibration_runs[0]), str(calibration_runs[1]), "--name", "../elsewhere",
                              "--reports-dir", str(tmp_path / "reports")])
    assert res.exit_code == 2 and "plain folder name" in res.output and not (tmp_path / "elsewhere").exists()


def test_bench_runs_pair_final_report_quality_by_case(tmp_path):
    a = bench_folder(tmp_path / "a")
    b = bench_folder(tmp_path / "b")
    comparison = build_comparison([a, b], n_boot=100)
    assert comparison.kind == "bench"
    same = [d for d in comparison.differences if d.run.split(": ", 1)[1] == comparison.arms[0].arm.split(": ", 1)[1]
            and d.run.startswith("b:")]
    # the synthetic bench run has fewer than MIN_CASES cases: no verdict, whatever the numbers
    assert same and same[0].estimate == 0.0 and same[0].n_cases < MIN_CASES
    assert same[0].verdict == "too few cases to tell" and same[0].p_value == 1.0
    c = bench_folder(tmp_path / "c", cases_text="other cases\n")
    with pytest.raises(RunError, match="do not share a case file"):
        build_comparison([a, c])




def test_bench_runs_judged_differently_are_labelled_by_judge_and_noted(tmp_path):
    """Quality differences between runs judged by different judges mix the systems with the
    judges: each run is labelled by its judge model, and a note says so (in report.md too)."""
    a = bench_folder(tmp_path / "a")
    b = bench_folder(tmp_path / "b")
    (a / "judge.json").write_text(json.dumps({"judge": {"model": "judge-1"}, "calibration_run": None}), "utf-8")
    (b / "judge.json").write_text(json.dumps({"judge": {"model": "judge-2"}, "calibration_run": "archives/cal"}), "utf-8")
    comparison = build_comparison([a, b], n_boot=50)
    assert [r.label for r in comparison.runs] == ["a (judge judge-1)", "b (judge judge-2)"]
    assert [r.judge_model for r in comparison.runs] == ["judge-1", "judge-2"]
    assert all(arm.arm.startswith(("a (judge judge-1): ", "b (judge judge-2): ")) for arm in comparison.arms)
    (note,) = comparison.notes
    assert "judged differently" in note and "b (judge judge-2): judge-2, guidance of archives/cal" in note
    assert f"- Note: {md_inline(note)}" in render_comparison_markdown(comparison)
    (b / "judge.json").write_text((a / "judge.json").read_text("utf-8"), "utf-8")
    assert build_comparison([a, b], n_boot=50).notes == []  # judged alike: nothing to say
