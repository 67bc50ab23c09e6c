"""The OpenTumorBoard report: the paper's Table A2/A3 layouts from a run's stored files.

Per model, for each task: items, scored, malformed (format failures), judge failures, the
task's mean score with a 95% case-clustered bootstrap interval (malformed answers at the floor
1, as released; judge failures left out), the flag rates (Specialist Turn: critical error and
unsupported claim, over scored items, with intervals), ROUGE-L, a BERTScore-style F1 on the
offline stand-in encoder it names (the paper's BERTScore model is not available here) and the
mean output tokens. Then the four decisions per model (Board: in scope, out of scope, judge
failures and malformed answers counted per decision) and the mean by question type (Turn:
items, scored, malformed and judge failures per type; "no scored item" instead of a mean). No model call: everything comes from ``responses.jsonl``,
``judge_scores.jsonl``, ``metrics.csv`` and the journal.

A run judged with a judge file (``otb judge --guidance RUN_OR_JUDGE_JSON``) names it (path,
sha256, from ``judge_file.json``) and says why no physician-anchored mean is given
(:data:`NOT_ANCHORED`: the anchor was scored by another judge prompt than these answers).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from evolve.calibrated import load_judge_file
from evolve.errors import RunError
from evolve.markdown import format_interval, md_code, md_inline
from evolve.otb import DECISIONS, JudgedItem, load_judged_items, load_otb_config, summarize
from evolve.outputs import OTB_REPORT_VERSION, OtbAnchored, OtbDecisionRow, OtbMainRow, OtbQuestionTypeRow, OtbReport
from evolve.report._bench import _clean
from evolve.report._pages import otb_html
from evolve.report._settings import ReportSettings, report_settings
from evolve.report._usage import prefix_cached_share, render_prefix_share, render_usage, usage_report
from evolve.runs import OtbFolder
from evolve.stats import ClusterMeans

__all__ = ["OTB_TABLE_COLUMNS", "build_otb_report", "render_otb_markdown", "write_otb_report"]

CONFIDENCE = 0.95
OTB_TABLE_COLUMNS = [
    "task", "model", "items", "scored", "format_failures", "judge_failures",
    "mean", "mean_low", "mean_high", "critical_error_rate", "critical_error_rate_low", "critical_error_rate_high",
    "unsupported_claim_rate", "unsupported_claim_rate_low", "unsupported_claim_rate_high",
    "rouge_l", "bertscore", "bertscore_model", "bertscore_missing", "output_tokens",
]


def _interval(case_ids: Sequence[str], values: Sequence[float], n_boot: int, seed: int) -> tuple[float, float, float]:
    if not values:
        return math.nan, math.nan, math.nan
    rs = ClusterMeans(case_ids, n_boot, seed, CONFIDENCE)
    est, reps, n = rs.mean(np.asarray(case_ids, dtype=object), np.asarray(values, dtype=np.float64))
    iv = rs.interval(est, reps, n)
    return iv.estimate, iv.low, iv.high


def _row(task: str, model: str, items: list[JudgedItem], metrics: pd.DataFrame, n_boot: int, seed: int) -> dict:
    s = summarize(items)
    scored = [i for i in items if not i.malformed and not i.judge_failed and i.score is not None]
    floor = [i for i in items if i.malformed]
    row = {"task": task, "model": model, **{k: s[k] for k in ("items", "scored", "format_failures", "judge_failures")}}
    est, low, high = _interval([i.case_id for i in scored + floor], [float(i.score or 0) for i in scored] + [1.0] * len(floor),
                               n_boot, seed)
    row.update(mean=est, mean_low=low, mean_high=high)
    for flag in ("critical_error", "unsupported_claim"):
        flagged = [i for i in scored if getattr(i, flag) is not None]
        est, low, high = _interval([i.case_id for i in flagged], [float(bool(getattr(i, flag))) for i in flagged], n_boot, seed)
        row.update({f"{flag}_rate": est, f"{flag}_rate_low": low, f"{flag}_rate_high": high})
    m = metrics[(metrics["task"] == task) & (metrics["model"] == model)]
    rouge = pd.to_numeric(m["rouge_l"], errors="coerce").dropna()
    bert = pd.to_numeric(m["bertscore"], errors="coerce").dropna()
    missing = sorted(set(m["bertscore_missing"].dropna().astype(str)) - {""})
    encoders = sorted(set(m["bertscore_model"].dropna().astype(str)) - {""})
    row.update(rouge_l=float(rouge.mean()) if len(rouge) else math.nan, bertscore=float(bert.mean()) if len(bert) else math.nan,
               bertscore_model="; ".join(encoders), bertscore_missing="; ".join(missing),
               output_tokens=float(m["output_tokens"].mean()) if len(m) else math.nan)
    return row


def build_otb_report(run_dir: Path | str, *, n_boot: int = 2000, seed: int = 0) -> OtbReport:
    """Every OpenTumorBoard table of a judged run (no model calls).

    Returns:
        The report (:class:`~evolve.outputs.OtbReport`, what ``otb_report.json`` holds):
        ``version``, ``run_dir``, ``judge_rubric_version``, ``bootstrap``, ``tables``
        (``main``: rows of :data:`OTB_TABLE_COLUMNS`; ``decisions``; ``question_types``),
        ``anchored`` (None unless judged with a judge file: ``judge_file`` - path, sha256,
        run_id, judge_model, copy_name -, ``available`` (always False here), ``criteria`` (the
        judge file's anchored criteria with ``n_rated`` and ``n_rated_cases``) and ``reason``:
        :data:`NOT_ANCHORED`, why no physician-anchored mean is given) and ``usage`` (every call
        of every process, from the journal).

    Raises:
        RunError: Not an OpenTumorBoard run folder, or not judged yet.
    """
    folder = OtbFolder(run_dir)
    config = load_otb_config(run_dir)
    items = load_judged_items(run_dir)
    metrics = folder.read_frame(folder.METRICS, keep_default_na=True)
    assert metrics is not None  # read_frame raises when the file is absent
    main, decisions, types = [], [], []
    for task, _ in config.tasks():
        for model in config.models:
            mine = [i for i in items if i.task == task and i.model == model]
            main.append(_row(task, model, mine, metrics, n_boot, seed))
            s = summarize(mine, four_decisions=task == "board" and config.judge.four_decisions)
            for d, v in (s.get("four_decisions") or {}).items():
                decisions.append({"model": model, "decision": d, **v})
            for t, v in (s.get("by_question_type") or {}).items():
                types.append({"model": model, "qa_type": t, **v})
    report = {
        "version": OTB_REPORT_VERSION,
        "run_dir": str(folder.path), "judge_rubric_version": "evolve-otb-judge-1",
        "bootstrap": {"method": "case-clustered percentile bootstrap", "n_boot": n_boot, "seed": seed,
                      "confidence": CONFIDENCE, "cluster": "case_id"},
        "tables": {"main": main, "decisions": decisions, "question_types": types},
        "anchored": _anchored(folder),
        "usage": usage_report(folder.journal()),
        "prefix_cached_share": _prefix_share(folder),
    }
    return OtbReport.model_validate(_clean(report))  # the file always matches its schema


def _prefix_share(folder: OtbFolder) -> float | None:
    """:func:`~evolve.report.prefix_cached_share` over the judge calls of ``judge_scores.jsonl``
    (read whole already by :func:`~evolve.otb.load_judged_items`, so well formed here)."""
    text = folder.require(folder.JUDGE_SCORES).read_text(encoding="utf-8")
    return prefix_cached_share([json.loads(line) for line in text.splitlines() if line.strip()])


NOT_ANCHORED = (
    "no physician-anchored means: the judge file's anchor (its rated validation targets) was scored by evolve's "
    "own judge prompt, one criterion per call, while OpenTumorBoard answers are judged with the released-style prompt "
    "(several criteria in one call, guidance added to it). A prediction-powered estimate needs the rated sample "
    "scored by the very judge that scored the outputs, so the judge-physician gap measured on the anchor does not "
    "carry over to these scores (physician ratings of a sample of this run's own answers would be a valid anchor; this "
    "report does not use them yet)."
)
"""Why the OpenTumorBoard report gives no physician-anchored means for a judge file's anchors."""


def _anchored(folder: OtbFolder) -> dict | None:
    """The judge file a run was judged with and, per criterion of it with an anchor, why the
    report gives no physician-anchored mean (None when judged without a judge file)."""
    record = folder.read_json(folder.JUDGE_FILE_RECORD, optional=True)
    if not isinstance(record, dict):
        return None
    try:
        judge = load_judge_file(folder / str(record.get("copy_name") or folder.CALIBRATED_JUDGE))
    except RunError as exc:
        return {"judge_file": record, "available": False, "criteria": [], "reason": f"no physician-anchored means: {exc}"}
    anchored = [{"criterion": c.criterion_id, "n_rated": len(c.anchor),
                 "n_rated_cases": len({t.case_id for t in c.anchor})} for c in judge.criteria.values() if c.anchor]
    reason = NOT_ANCHORED if anchored else "no physician-anchored means: the judge file holds no rated validation targets."
    return {"judge_file": record, "available": False, "criteria": anchored, "reason": reason}


def _num(x: float | None, digits: int = 2) -> str:
    return format_interval(x, None, None, digits=digits)


def _share(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def _decision_cell(cell: OtbDecisionRow) -> str:
    """``mean (n=in scope, k out of scope)``, or ``no case in scope`` when none was."""
    mean = _num(cell.mean) if cell.cases else "no case in scope"
    return f"{mean} (n={cell.cases}, {cell.out_of_scope} out of scope)"


def _ci(estimate: float | None, low: float | None, high: float | None, digits: int = 2, pct: bool = False) -> str:
    """``estimate [low, high]`` (a percentage with one decimal when ``pct``)."""
    return format_interval(estimate, low, high, digits=1 if pct else digits, scale=100.0 if pct else 1.0,
                           suffix="%" if pct else "")


def _main_cells(r: OtbMainRow) -> str:
    """Model, counts and the mean: the first six cells of both task tables."""
    return (f"| {md_inline(r.model)} | {r.items} | {r.scored} | {_ci(r.mean, r.mean_low, r.mean_high)} | "
            f"{r.format_failures} | {r.judge_failures} | ")


def _text_cells(r: OtbMainRow) -> str:
    """ROUGE-L, BERTScore and output tokens: the last three cells of both task tables."""
    return f"{_num(r.rouge_l, 3)} | {_num(r.bertscore, 3)} | {_num(r.output_tokens, 0)} |"


def render_otb_markdown(report: OtbReport) -> str:
    """The report as Markdown: one table per task, then decisions and question types."""
    t = report.tables
    out = ["# OpenTumorBoard report", "",
           (f"Run {md_code(report.run_dir)}; judge rubric {md_code(report.judge_rubric_version)}. Brackets: 95% intervals from a "
            f"case-clustered bootstrap ({report.bootstrap.n_boot} replicates). Malformed answers count 1 in the "
            "mean (released rule); judge failures (an endpoint failure, a cut reply or a reply outside its schema) are "
            "left out and counted; items = scored + malformed + judge failures; flag rates are over scored items."), ""]
    missing = sorted({r.bertscore_missing for r in t.main if r.bertscore_missing})
    encoders = sorted({r.bertscore_model for r in t.main if r.bertscore_model})
    board = [r for r in t.main if r.task == "board"]
    if board:
        out += ["## Board Simulation (Table A3 layout)", "",
                "| model | items | scored | conclusion alignment (1–5) | malformed | judge failures | ROUGE-L | BERTScore* | output tokens |",
                "|---|---|---|---|---|---|---|---|---|"]
        out += [_main_cells(r) + _text_cells(r) for r in board]
        out.append("")
    turn = [r for r in t.main if r.task == "turn"]
    if turn:
        out += ["## Specialist Turn (Table A2 layout)", "",
                "| model | items | scored | clinical equivalence (1–5) | malformed | judge failures | critical error | "
                "unsupported claim | ROUGE-L | BERTScore* | output tokens |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        out += [_main_cells(r)
                + f"{_ci(r.critical_error_rate, r.critical_error_rate_low, r.critical_error_rate_high, pct=True)} | "
                + f"{_ci(r.unsupported_claim_rate, r.unsupported_claim_rate_low, r.unsupported_claim_rate_high, pct=True)} | "
                + _text_cells(r) for r in turn]
        out.append("")
    if encoders:
        out += [f"- \\*BERTScore: the paper's model (microsoft/deberta-xlarge-mnli, layer 40) is not available offline; "
                f"these values are computed with {md_inline(e)}, so they are not comparable with the paper's." for e in encoders]
    out += [f"- \\*BERTScore missing for some rows: {md_inline(m)}." for m in missing] + ([""] if encoders or missing else [])
    out += _render_decisions(t.decisions) + _render_question_types(t.question_types) + _render_anchored(report.anchored)
    out += render_usage(report.usage)
    out += render_prefix_share(report.prefix_cached_share, "judge_scores.jsonl")
    return "\n".join(out)


def _render_decisions(rows: list[OtbDecisionRow]) -> list[str]:
    if not rows:
        return []
    out = ["## Four decisions (Board Simulation)", "",
           ("Mean over the cases whose reference took the decision (n); out of scope (-1: the reference never "
            "took it) is left out and counted; judge failures (the four-decision call gave nothing usable) and "
            "malformed answers are never scored, and counted. Items = n + out of scope + judge failures + "
            "malformed, per decision."), "",
           "| model | items | " + " | ".join(DECISIONS) + " | judge failures | malformed |",
           "|---|---|" + "---|" * len(DECISIONS) + "---|---|"]
    for model in dict.fromkeys(r.model for r in rows):
        cells = {r.decision: r for r in rows if r.model == model}
        first = cells[DECISIONS[0]]
        out.append(f"| {md_inline(model)} | {first.items} | " + " | ".join(_decision_cell(cells[d]) for d in DECISIONS)
                   + f" | {first.judge_failures} | {first.format_failures} |")
    return [*out, ""]


def _render_question_types(rows: list[OtbQuestionTypeRow]) -> list[str]:
    if not rows:
        return []
    out = ["## Specialist Turn by question type", "",
           "Mean and rates over scored items only (no floor), as released; items = scored + malformed + judge failures.", "",
           "| model | question type | items | scored | malformed | judge failures | mean | critical error | unsupported claim |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mean = _num(r.mean) if r.scored else "no scored item"
        out.append(f"| {md_inline(r.model)} | {md_inline(r.qa_type)} | {r.items} | {r.scored} | {r.format_failures} | "
                   f"{r.judge_failures} | {mean} | {_share(r.critical_error_rate)} | {_share(r.unsupported_claim_rate)} |")
    return [*out, ""]


def _render_anchored(anchored: OtbAnchored | None) -> list[str]:
    if anchored is None:
        return []
    rec = anchored.judge_file
    rated = "; ".join(f"{md_inline(c.criterion)} {c.n_rated} targets in {c.n_rated_cases} cases" for c in anchored.criteria)
    return ["## Physician-anchored means", "",
            (f"Judged with judge file {md_code(rec.path)} (calibration {md_code(rec.run_id)}, sha256 "
             f"{rec.sha256[:16]}…){'; anchors: ' + rated if rated else ''}. Raw judge means only: "
             f"{md_inline(anchored.reason)}"), ""]


def write_otb_report(run_dir: Path | str, *, n_boot: int | None = None, seed: int = 0, html: bool = True,
                     settings: ReportSettings | None = None) -> OtbReport:
    """Build the report and write ``otb_report.md``, ``otb_report.json``, ``otb_table.csv``
    (:data:`OTB_TABLE_COLUMNS`) and, unless ``html`` is False, ``report.html`` (figures, then
    the same tables: :func:`~evolve.report.otb_html`).

    ``settings``: bootstrap replicates and figures (default:
    :meth:`~evolve.report.ReportSettings.from_env`); ``n_boot``, when given, replaces its replicates.

    Raises:
        RunError: As :func:`build_otb_report`.
    """
    folder = OtbFolder(run_dir)
    with folder.exclusive():  # before reading: a run still being written is refused, naming its writer
        settings = report_settings(settings, n_boot)
        report = build_otb_report(run_dir, n_boot=settings.replicates, seed=seed)
        folder.write(folder.REPORT_JSON, report.model_dump_json(indent=2) + "\n")
        markdown = render_otb_markdown(report)
        folder.write(folder.REPORT_MD, markdown)
        if html:
            folder.write(folder.REPORT_HTML, otb_html(report, markdown, figures=settings.figures))
        main = [r.model_dump() for r in report.tables.main]
        folder.write(folder.TABLE, pd.DataFrame(main, columns=OTB_TABLE_COLUMNS).to_csv(index=False))
    return report
