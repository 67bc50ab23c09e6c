"""``report.html`` of calibration, bench and OpenTumorBoard runs, drawn from the report dicts.

Each page is the run's figures followed by its Markdown report's tables, in one self-contained
file (:mod:`evolve.report._html`). Nothing here reads a model or a file: the report dict (what
``report.json`` holds) is the only input, so a page can be rebuilt from the stored artifacts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from evolve.markdown import count_noun
from evolve.outputs import (
    ArchiveShape,
    BenchReport,
    CalibrationReport,
    CandidateSummary,
    CriterionReport,
    OtbMainRow,
    OtbReport,
    PipelineRecord,
    Table4Row,
)
from evolve.report import _figures as fig
from evolve.report._html import figure_html, grid_html, note_html, page, section, tables, tables_page

AGREEMENT_ROWS = (("no-guidance", "no guidance"), ("best-initial", "best initial"), ("training-median", "training median"),
                  ("winner", "winner"), ("ceiling", "physician vs physician"))
"""Rows of the agreement figure: the report's agreement key and its label."""


def forest_row(label: str, stat: Mapping | None) -> dict:
    """One row of :func:`~evolve.report._figures.interval_plot`: ``label`` and the estimate and
    bounds of ``stat`` (any mapping with ``estimate``/``low``/``high``; None: an empty row)."""
    stat = stat or {}
    return {"label": label, "estimate": stat.get("estimate"), "low": stat.get("low"), "high": stat.get("high")}


def _criterion_section(criterion: str, entry: CriterionReport) -> str:
    cands, grid = entry.candidates, entry.archive
    mae_rows = [forest_row(label, _validation_mae(entry, key)) for key, label in AGREEMENT_ROWS]
    verdicts = entry.verdicts
    diffs = [forest_row(f"winner − {label}", v.model_dump()) for key, label in
             (("best_initial", "best initial"), ("no_guidance", "no guidance"), ("training_median", "training median"))
             if (v := getattr(verdicts, key)) is not None and v.verdict != "same candidate"]
    confusion = entry.confusion
    figures = [
        figure_html(partial(_heatmap, cands, grid), "archive: elites over guidance length and signed bias, coloured by "
                    "training MAE; the star is the winner"),
        figure_html(lambda ax: fig.mae_over_attempts(cands, ax=ax), "training MAE of every candidate and the best so far"),
        figure_html(lambda ax: fig.lineage(cands, ax=ax), "the winner's line of descent from the initial prompts"),
        figure_html(lambda ax: fig.confusion_heatmap(confusion.matrix, confusion.labels, ax=ax),
                    "validation: judge score × physician score of the winner (every judge call against every rating)",
                    size=(4.5, 4.0)),
        figure_html(lambda ax: fig.interval_plot(mae_rows, xlabel="validation MAE (score points)",
                                                 title="agreement with 95% intervals", ax=ax),
                    "validation MAE of each baseline, the winner and physician vs physician, case-clustered 95% intervals",
                    size=(6.0, 3.2)),
    ]
    if diffs:
        figures.append(figure_html(
            lambda ax: fig.interval_plot(diffs, xlabel="paired MAE difference (negative: the winner is better)",
                                         title="winner against the baselines", reference=0.0, ax=ax),
            "paired validation MAE differences with case-clustered 95% intervals", size=(6.0, 2.4)))
    title = f"{entry.number or ''} {entry.name or criterion}".strip()
    constant = " No better than a constant: its validation MAE is not below the training median's." \
        if entry.no_better_than_constant else ""
    return section(f"{title} ({criterion})", figures, intro=f"Winner: {entry.winner.candidate_id}.{constant}")


def _validation_mae(entry: CriterionReport, key: str) -> dict | None:
    """The validation MAE interval of one agreement row (None when the report has none)."""
    by_split = entry.agreement.get(key)
    stat = by_split.validation.get("mae") if by_split is not None else None
    return stat.model_dump() if stat is not None else None


def _heatmap(cands: list[CandidateSummary], grid: ArchiveShape, ax) -> None:
    fig.archive_heatmap(cands, length_bins=grid.length_bins, bias_bins=grid.bias_bins, bias_range=grid.bias_range, ax=ax)


def _drift_rows(report: CalibrationReport) -> list[dict]:
    rows = []
    for criterion, entry in report.criteria.items():
        audit = entry.audit
        if audit is None:
            continue
        flags = [("winner", audit.winner.flag if audit.winner is not None else audit.flag)]
        flags += [(i.candidate_id.split(":", 1)[-1], i.flag) for i in audit.initials]
        rows.append({"criterion": criterion, "flags": flags})
    return rows


def calibration_html(report: CalibrationReport, markdown_text: str, *, figures: bool = True) -> str:
    """The HTML page of a calibration run.

    Per criterion: the archive heatmap, MAE over attempts, the winner's lineage, the validation
    confusion matrix, agreement with intervals for every baseline and the ceiling, and the paired
    differences; then the drift audit of every criterion and the Markdown report's tables.

    Args:
        report: What :func:`~evolve.report.build_report` returns (``report.json``).
        markdown_text: ``report.md`` (its tables close the page).
        figures: Draw the figures (False: the page says they were turned off, then the tables).
    """
    if not figures:
        return tables_page(f"Calibration report: {report.run_id}", markdown_text)
    parts = [_criterion_section(c, e) for c, e in report.criteria.items()]
    drift = _drift_rows(report)
    parts.append(section("Drift audit", [figure_html(lambda ax: fig.drift_flags(drift, ax=ax),
                                                     "audit flags of each criterion's winner and initial prompts",
                                                     size=(7.0, 0.9 + 0.5 * max(len(drift), 1)))]))
    parts.append(tables(markdown_text))
    return page(f"Calibration report: {report.run_id}", parts)


def _arm(row: PipelineRecord | Table4Row) -> str:
    return " · ".join((row.model, row.condition, row.topology))


def bench_html(report: BenchReport, markdown_text: str, *, figures: bool = True) -> str:
    """The HTML page of a bench run: stop reasons by round and vote transitions per model ×
    condition × topology, quality against tokens per pipeline, then the Markdown tables.

    Args:
        report: What :func:`~evolve.report.build_bench_report` returns (``bench_report.json``).
        markdown_text: ``bench_report.md``.
        figures: Draw the figures (False: the page says they were turned off, then the tables).
    """
    if not figures:
        return tables_page(f"Benchmark report: {report.run_dir}", markdown_text)
    pipes = report.pipelines
    arms = sorted({_arm(p) for p in pipes})
    stops = [partial(_stops, [p for p in pipes if _arm(p) == arm], arm) for arm in arms]
    trans = [partial(_transitions, [r for r in report.tables.table4 if _arm(r) == arm and r.role == "all"
                                    and r.rounds != "all"], arm) for arm in arms]
    parts = [
        section("Consensus and stop reasons by round", [grid_html(stops, "pipelines by rounds completed and stop reason")]
                if stops else []),
        section("Vote transitions", [grid_html(trans, "role votes between consecutive rounds")] if trans else []),
        section("Quality against tokens", [figure_html(lambda ax: fig.quality_vs_tokens(pipes, ax=ax),
                                                       "final-report quality against generation tokens, one point "
                                                       "per pipeline", size=(7.0, 4.5))]),
        tables(markdown_text),
    ]
    return page(f"Benchmark report: {report.run_dir}", parts)


def _stops(pipes: list[PipelineRecord], arm: str, ax) -> None:
    fig.stop_reasons_by_round(pipes, title=arm, ax=ax)


def _transitions(rows: list[Table4Row], arm: str, ax) -> None:
    fig.vote_transitions(rows, title=arm, ax=ax)


Bounds = tuple[float | None, float | None, float | None]
"""An estimate and the bounds of its interval (None where undefined)."""

OTB_METRICS: tuple[tuple[str, Callable[[OtbMainRow], Bounds]], ...] = (
    ("mean judge score (malformed answers at the floor)", lambda r: (r.mean, r.mean_low, r.mean_high)),
    ("critical-error rate", lambda r: (r.critical_error_rate, r.critical_error_rate_low, r.critical_error_rate_high)),
    ("unsupported-claim rate",
     lambda r: (r.unsupported_claim_rate, r.unsupported_claim_rate_low, r.unsupported_claim_rate_high)),
)
"""The OpenTumorBoard figure's panels: axis label, and the row's estimate and bounds it draws."""


def otb_html(report: OtbReport, markdown_text: str, *, figures: bool = True) -> str:
    """The HTML page of an OpenTumorBoard run: per task, each model's mean judge score and flag
    rates with case-clustered 95% intervals, then the Markdown tables.

    A model with nothing to draw in a task (no scored item and no malformed answer: e.g. every
    judge reply failed) gets no row, and the caption names it; a task where no model has
    anything to draw gets a sentence saying so instead of a figure.

    Args:
        report: What :func:`~evolve.report.build_otb_report` returns (``otb_report.json``).
        markdown_text: ``otb_report.md``.
        figures: Draw the figures (False: the page says they were turned off, then the tables).
    """
    if not figures:
        return tables_page(f"OpenTumorBoard report: {report.run_dir}", markdown_text)
    main = report.tables.main
    drawn = [_otb_task_figure(task, [r for r in main if r.task == task]) for task in sorted({r.task for r in main})]
    parts = [section("Scores with intervals", drawn), tables(markdown_text)]
    return page(f"OpenTumorBoard report: {report.run_dir}", parts)


def _no_scored_item(row: OtbMainRow) -> str:
    """``model (no scored item: j judge failures of n items)``."""
    failures = row.judge_failures
    return (f"{row.model} (no scored item: {count_noun(failures, 'judge failure')} of "
            f"{count_noun(row.items, 'item')})")


def _otb_task_figure(task: str, rows: list[OtbMainRow]) -> str:
    """One task's panels (mean, then the flag rates that have a value) over the models with a
    value, or a note when no model has one."""
    drawn = [r for r in rows if any(bounds(r)[0] is not None for _, bounds in OTB_METRICS)]
    empty = "; ".join(_no_scored_item(r) for r in rows if r not in drawn)
    if not drawn:
        return note_html(f"{task}: no figure, no model has a scored item - {empty}. Judge failures and their reasons "
                         "are in judge_scores.jsonl (outcome, error).")
    panels = [partial(_otb_panel, drawn, bounds, label, task) for label, bounds in OTB_METRICS
              if any(bounds(r)[0] is not None for r in drawn)]
    caption = f"{task}: each model's mean score and flag rates, case-clustered 95% intervals"
    return grid_html(panels, caption + (f"; not drawn: {empty}" if empty else ""), cell=(4.5, 2.0 + 0.4 * len(drawn)))


def _otb_panel(rows: list[OtbMainRow], bounds: Callable[[OtbMainRow], Bounds], label: str, task: str, ax) -> None:
    points = [dict(zip(("label", "estimate", "low", "high"), (r.model, *bounds(r)))) for r in rows]
    fig.interval_plot(points, xlabel=label, title=task, ax=ax)
