"""Honest verdicts (issue 22 item 5): too few cases to tell, the training median as a paired
baseline and "no better than a constant", Holm's correction over a report's comparisons, the
documented warning about an evolved winner, QWK "undefined", and `evolve compare` of runs that
share no targets or too few pairs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.outputs import Comparisons, PairedVerdict, SplitStatistics, Table5Row
from evolve.report import (
    MIN_SHARED_PAIRS,
    apply_holm,
    build_comparison,
    build_report,
    calibration_html,
    comparisons_text,
    render_markdown,
    verdict_text,
    verdict_warnings,
)
from evolve.report._compare import HOW_TO_SHARE, NO_SHARED_TARGETS, _guarded
from evolve.report._holm import mark_holm
from evolve.report._report import _criterion_warnings, _stats, render_agreement
from evolve.stats import MIN_CASES


def test_a_report_on_three_validation_cases_says_too_few_cases_to_tell(calibration_runs):
    report = build_report(calibration_runs[0], n_boot=100)
    verdicts = report.criteria["entailment"].verdicts
    assert all(v is not None for v in (verdicts.best_initial, verdicts.no_guidance, verdicts.training_median))
    told = [v for v in (verdicts.best_initial, verdicts.no_guidance, verdicts.training_median)
            if v is not None and v.verdict != "same candidate"]
    assert told and all(v.n_cases == 3 < MIN_CASES for v in told)
    # the guided judge agrees perfectly (estimate -1.0 against no guidance), yet 3 cases cannot carry a verdict
    assert all(v.verdict == "too few cases to tell" and v.low is None for v in told)
    assert all(v.p_value == pytest.approx(0.25) and v.method == "exact sign-flip test over 3 cases" for v in told)
    assert "too few cases to tell (3 cases)" in render_markdown(report)
    row = report.table5[0]
    assert row.vs_median_verdict == "too few cases to tell" and row.vs_median_p == pytest.approx(0.25)


def test_the_training_median_is_a_paired_baseline_and_a_judge_worse_than_it_is_no_better_than_a_constant(
        calibration_runs):
    guided = build_report(calibration_runs[0], n_boot=100)
    lenient = build_report(calibration_runs[1], n_boot=100)  # answers 2 whatever it is told
    g, w = guided.table5[0], lenient.table5[0]
    assert g.evolved_val_mae < g.median_val_mae and g.no_better_than_constant is False
    assert w.evolved_val_mae > w.median_val_mae and w.no_better_than_constant is True
    # the paired difference against the constant is the difference of the two MAEs on the winner's calls
    v = lenient.criteria["entailment"].verdicts.training_median
    assert v is not None and v.estimate == pytest.approx(w.evolved_val_mae - w.median_val_mae)
    md = render_markdown(lenient)
    assert "**no better than a constant**" in md and "vs training median" in md
    assert "No better than a constant: its validation MAE is not below the training median" in calibration_html(lenient, md)
    assert any("no better than a constant" in x for x in verdict_warnings(lenient))
    assert not any("no better than a constant" in x for x in verdict_warnings(guided))
    assert "**no better than a constant**" not in render_markdown(guided)


def test_evolve_report_prints_every_verdict_and_the_warning(calibration_runs, tmp_path):
    run = Path(shutil.copytree(calibration_runs[1], tmp_path / "lenient"))
    res = CliRunner().invoke(app, ["report", str(run), "--n-boot", "50", "--no-html"])
    assert res.exit_code == 0, res.output
    assert "vs training median" in res.output and "no better than a constant" in res.output
    assert "3 paired comparisons in this report" in res.output


def _report(*verdicts: tuple[str, float, str]) -> dict:
    """A report skeleton while it is built: one criterion per (verdict, p-value, winner origin)."""
    criteria, table5 = {}, []
    for i, (verdict, p, origin) in enumerate(verdicts):
        v = {"estimate": -0.2, "low": -0.3, "high": -0.1, "n_pairs": 40, "n_cases": 10, "verdict": verdict, "p_value": p,
             "method": "exact sign-flip test over 10 cases", "holm_p": None, "holm_survives": None}
        criteria[f"c{i}"] = {"verdicts": {"best_initial": v, "no_guidance": None, "training_median": None}}
        table5.append(Table5Row(criterion=f"c{i}", name=f"criterion {i}", evolved=f"c{i}:m001", evolved_origin=origin,
                                selection="robust", attempts=4, accepted=2, rejected=2, judge_calls=40,
                                n_train_targets=20, n_val_targets=20, vs_initial_verdict=verdict, vs_initial_diff=-0.2,
                                evolved_val_mae=0.4, median_val_mae=0.6, no_better_than_constant=False))
    return {"criteria": criteria, "table5": table5}


def test_holm_marks_verdicts_that_do_not_survive_and_counts_the_comparisons():
    report = apply_holm(_report(("better", 0.03, "initial"), ("better", 0.04, "initial"), ("better", 0.001, "initial")))
    assert report["comparisons"] == {"n": 3, "correction": "Holm", "alpha": 0.05, "definitive": 3, "not_surviving": 2}
    v = [PairedVerdict.model_validate(report["criteria"][f"c{i}"]["verdicts"]["best_initial"]) for i in range(3)]
    # Holm: the smallest p times 3, then times 2, then times 1, each at least the previous
    assert [x.holm_p for x in v] == pytest.approx([0.06, 0.06, 0.003])
    assert [x.holm_survives for x in v] == [False, False, True]
    assert verdict_text(v[0]).endswith("better (p = 0.030) - not after Holm's correction")
    assert "not after Holm" not in verdict_text(v[2])
    comparisons = Comparisons.model_validate(report["comparisons"])
    assert comparisons_text(comparisons).startswith("3 paired comparisons in this report")
    assert "2 of 3 better/worse verdicts do not survive" in comparisons_text(comparisons)


def test_an_evolved_winner_not_distinguishable_from_the_best_initial_prompt_is_a_documented_warning():
    report = apply_holm(_report(("no distinguishable difference", 0.4, "mutation"), ("too few cases to tell", 0.25, "mutation"),
                                ("no distinguishable difference", 0.4, "initial")))
    warnings = [w for row in report["table5"] for w in _criterion_warnings(row)]
    phrase = "not distinguishable from the best initial prompt although an evolved prompt was selected"
    assert [w.split(":", 1)[0] for w in warnings if phrase in w] == ["criterion c0 (criterion 0)", "criterion c1 (criterion 1)"]


def test_a_winner_the_drift_audit_flagged_is_a_warning_at_the_end_of_a_run_as_in_python():
    rows = _report(*[("better", 0.01, "mutation")] * 4)["table5"]
    flagged = {f"criterion c{i} (criterion {i})": drift for i, drift in enumerate(("drift", "review", "ok", None))}
    rows = [r.model_copy(update={"drift": drift}) for r, drift in zip(rows, flagged.values(), strict=True)]
    warned = {w.split(":", 1)[0]: w for r in rows for w in _criterion_warnings(r) if "drift audit" in w}
    assert sorted(warned) == ["criterion c0 (criterion 0)", "criterion c1 (criterion 1)"]
    assert "flagged the winning guidance 'drift'; read audit.md" in warned["criterion c0 (criterion 0)"]
    assert "'review'" in warned["criterion c1 (criterion 1)"]


def test_qwk_against_constant_ratings_is_undefined_not_zero(calibration_runs):
    pairs = pd.DataFrame({"case_id": list("abcdefgh"), "judge": [0, 1, 2, 1, 0, 2, 1, 1], "rater": [1] * 8})
    stats = _stats(pairs, [0, 1, 2], seed=0, n_boot=50)
    assert stats["qwk"]["estimate"] is None and stats["mae"]["estimate"] == pytest.approx(0.5)
    real = build_report(calibration_runs[0], n_boot=20)
    entry = real.criteria["entailment"].model_copy(update={
        "name": "c", "agreement": {"winner": SplitStatistics.model_validate({"validation": stats})}})
    report = real.model_copy(update={"criteria": {"c": entry}})
    row = next(line for line in render_agreement(report) if line.startswith("| c | evolved"))
    assert row.split(" | ")[4] == "undefined" and "0.000" not in row.split(" | ")[4]


def _split_validation(run: Path, keep: set[str] | None, drop: set[str] | None) -> None:
    """Keep (or drop) these validation targets in a run's scores.csv."""
    scores = pd.read_csv(run / "scores.csv", dtype={"target_id": str, "case_id": str}, keep_default_na=False)
    val = scores["split"] == "validation"
    inside = scores["target_id"].isin(keep if keep is not None else drop or set())
    scores = scores[~val | (inside if keep is not None else ~inside)]
    scores.to_csv(run / "scores.csv", index=False)


def test_compare_of_runs_that_share_no_targets_says_so_gives_no_verdict_and_says_how_to_share(calibration_runs, tmp_path):
    a = Path(shutil.copytree(calibration_runs[0], tmp_path / "a"))
    b = Path(shutil.copytree(calibration_runs[1], tmp_path / "b"))
    scores = pd.read_csv(a / "scores.csv", dtype={"target_id": str})
    targets = sorted(set(scores.loc[scores["split"] == "validation", "target_id"]))
    half = set(targets[: len(targets) // 2])
    _split_validation(a, keep=half, drop=None)
    _split_validation(b, keep=None, drop=half)
    comparison = build_comparison([a, b], n_boot=50)
    assert comparison.differences and all(d.verdict == NO_SHARED_TARGETS and d.estimate is None
                                          and d.n_pairs == 0 for d in comparison.differences)
    assert HOW_TO_SHARE in comparison.notes and "--seed" in HOW_TO_SHARE and "--max-validation-targets" in HOW_TO_SHARE
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--reports-dir", str(tmp_path / "reports"), "--n-boot", "50",
                                   "--no-html"])
    assert res.exit_code == 0, res.output
    assert "(the runs share no targets)" in res.output and "no distinguishable difference" not in res.output
    assert "the same --splits folder" in res.output


def test_compare_gives_no_verdict_on_too_few_shared_pairs_and_marks_holm():
    assert MIN_SHARED_PAIRS == 20
    assert _guarded("better", 19) == "too few shared pairs to tell (19; at least 20 are needed)"
    assert _guarded("worse", 20) == "worse" and _guarded("too few cases to tell", 3) == "too few cases to tell"
    diffs = [{"verdict": "better", "p_value": 0.02}, {"verdict": "worse", "p_value": 0.01},
             {"verdict": "no distinguishable difference", "p_value": 0.5}, {"verdict": NO_SHARED_TARGETS, "p_value": None}]
    counted = mark_holm(diffs, 0.05)
    assert counted == {"n": 3, "correction": "Holm", "alpha": 0.05, "definitive": 2, "not_surviving": 0}
    assert [d["holm_p"] for d in diffs[:3]] == pytest.approx([0.04, 0.03, 0.5]) and "holm_p" not in diffs[3]
    assert [d["holm_survives"] for d in diffs[:3]] == [True, True, None]


def test_table5_has_a_number_column_only_for_a_rubric_that_numbers_its_criteria(calibration_runs) -> None:
    from evolve.outputs import read_run
    from evolve.report._report import render_table5

    report = read_run(calibration_runs[0]).report  # kqa-entailment: criteria without numbers
    assert all(r.number is None for r in report.table5)
    lines = [line for line in render_table5(report) if line.startswith("|")]
    assert lines[0].startswith("| criterion | no guidance |") and lines[1].count("|") == 12
    assert all(line.count("|") - line.count("\\|") == 12 for line in lines)  # 11 columns on every line
    numbered = report.model_copy(update={"table5": [r.model_copy(update={"number": 7}) for r in report.table5]})
    lines = [line for line in render_table5(numbered) if line.startswith("|")]
    assert lines[0].startswith("| # | criterion |") and lines[2].startswith("| 7 | ")
    assert all(line.count("|") - line.count("\\|") == 13 for line in lines)


def test_the_confusion_counts_are_scikit_learns() -> None:
    """The report's judge x physician counts equal sklearn's confusion_matrix, values outside the
    scale left out as sklearn leaves them (random pairs, fractional judge means rounded)."""
    import numpy as np
    from sklearn.metrics import confusion_matrix

    from evolve.report._report import _confusion

    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(0, 40))
        pairs = pd.DataFrame({"rater": rng.integers(0, 5, n).astype(float), "judge": rng.integers(0, 8, n) / 2})
        labels = [0, 1, 2, 3]
        got = _confusion(pairs, labels)
        expected = confusion_matrix(pairs["rater"].astype(int), pairs["judge"].round().astype(int), labels=labels) \
            if n else np.zeros((4, 4), dtype=int)
        assert got["matrix"] == expected.tolist() and got["n_pairs"] == n and got["labels"] == labels
