"""Report pages built from report dicts with nothing to draw (no row, one row, every value None)
are written whole: a sentence stands where a figure would be, never an empty image or a crash."""

from __future__ import annotations

import pytest

from evolve.outputs import BenchReport, Confusion, CriterionAudit, OtbReport, PairedVerdict, SplitStatistics, Verdicts
from evolve.report import build_report
from evolve.report._html import grid_html
from evolve.report._pages import bench_html, calibration_html, otb_html

BOOTSTRAP = {"method": "case-clustered percentile bootstrap", "n_boot": 10, "seed": 0, "confidence": 0.95, "cluster": "case_id"}


def _otb_row(task: str, model: str, **values) -> dict:
    base = {"task": task, "model": model, "items": 2, "scored": 0, "format_failures": 0, "judge_failures": 2,
            "mean": None, "mean_low": None, "mean_high": None, "critical_error_rate": None, "critical_error_rate_low": None,
            "critical_error_rate_high": None, "unsupported_claim_rate": None, "unsupported_claim_rate_low": None,
            "unsupported_claim_rate_high": None, "rouge_l": None, "bertscore": None, "bertscore_model": "",
            "bertscore_missing": "", "output_tokens": None}
    return {**base, **values}


def _otb(rows: list[dict]) -> OtbReport:
    """An OpenTumorBoard report holding only the main table's ``rows``."""
    return OtbReport.model_validate({"run_dir": "run", "judge_rubric_version": "v", "bootstrap": BOOTSTRAP,
                                     "tables": {"main": rows, "decisions": [], "question_types": []}})


def _bench(pipelines: list[dict]) -> BenchReport:
    """A bench report holding only ``pipelines`` (every table empty)."""
    counts = {"case_artifacts": len(pipelines), "cases": len(pipelines), "models": [], "conditions": [], "topologies": [],
              "failed_pipelines": 0, "judge_rows": 0}
    roles = {"n_panels": 0, "n_assignments": 0, "n_exact_labels": 0, "n_categories": 0, "n_collapsed": 0,
             "categories": [], "labels": []}
    tables = {name: [] for name in ("table3", "table4", "table6", "table7", "table8", "table9")}
    return BenchReport.model_validate({"version": 1, "run_dir": "run", "bootstrap": BOOTSTRAP, "counts": counts,
                                       "judged": False, "notes": [], "tables": tables, "roles": roles,
                                       "pipelines": pipelines})


def test_a_grid_with_no_panel_is_a_note_not_an_empty_image():
    assert grid_html([], "stop reasons") == '<p class="note">stop reasons: nothing to draw.</p>'


def test_an_otb_task_with_no_scored_item_says_so_instead_of_a_figure():
    page = otb_html(_otb([_otb_row("turn", "m<1>")]), "| a |\n|---|\n| 1 |\n")
    assert "<img" not in page and "<table>" in page
    assert "turn: no figure, no model has a scored item - m&lt;1&gt; (no scored item: 2 judge failures of 2 items)" in page


def test_only_the_models_with_a_value_are_drawn_and_the_others_named():
    rows = [_otb_row("board", "a", scored=2, judge_failures=0, mean=3.0, mean_low=2.0, mean_high=4.0),
            _otb_row("board", "b", items=1, judge_failures=1)]
    page = otb_html(_otb(rows), "")
    assert page.count("<img") == 1
    assert "not drawn: b (no scored item: 1 judge failure of 1 item)" in page


def test_malformed_answers_alone_still_give_a_mean_at_the_floor_and_a_figure():
    row = _otb_row("board", "a", format_failures=2, judge_failures=0, mean=1.0, mean_low=1.0, mean_high=1.0)
    assert otb_html(_otb([row]), "").count("<img") == 1


@pytest.mark.parametrize("case", ["no criterion", "nothing scored", "undefined everywhere"])
def test_a_calibration_page_with_nothing_to_draw_is_written(calibration_runs, case):
    real = build_report(calibration_runs[0], n_boot=20)
    entry = real.criteria["entailment"]
    if case == "no criterion":
        report = real.model_copy(update={"criteria": {}})
    else:
        bare = entry.model_copy(update={"candidates": [], "agreement": {}, "confusion": Confusion(labels=[0], matrix=[[0]], n_pairs=0)})
        if case == "undefined everywhere":
            undefined = PairedVerdict(estimate=None, low=None, high=None, n_pairs=0, n_cases=0, verdict="better")
            audit = CriterionAudit(criterion="entailment", name="e", key_terms=(), winner=None, initials=(), flag="no_winner")
            bare = bare.model_copy(update={"verdicts": Verdicts(best_initial=undefined), "audit": audit,
                                           "agreement": {"winner": SplitStatistics()}})
        report = real.model_copy(update={"criteria": {"entailment": bare}})
    page = calibration_html(report, "")
    assert page.startswith("<!DOCTYPE html>") and "Drift audit" in page


@pytest.mark.parametrize("pipelines", [
    [],
    [{"case_id": "c1", "model": "m", "condition": "c", "topology": "t", "rounds_completed": 0, "stop_reason": "failure",
      "consensus": False, "tokens": 0, "quality": None}],
])
def test_a_bench_page_with_nothing_to_draw_is_written(pipelines):
    page = bench_html(_bench(pipelines), "")
    assert page.startswith("<!DOCTYPE html>") and "Quality against tokens" in page
