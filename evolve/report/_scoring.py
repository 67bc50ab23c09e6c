"""The report of a scoring run (``evolve judge``): means with intervals, agreement, anchored means.

Everything is recomputed from the run folder (:class:`~evolve.runs.ScoringFolder`:
``calls.csv``, ``items.csv``, ``ratings.csv``, ``judge.json``), so ``summary.json``,
``report.md`` and ``report.html`` can be rebuilt without a model call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evolve.calibrated import CriterionJudge, JudgeFile, load_judge_file
from evolve.markdown import format_interval, md_code, md_inline
from evolve.outputs import (
    AnchoredMean,
    CalibrationReport,
    MeanInterval,
    PairedVerdict,
    RatedTargets,
    ScoringCriterion,
    ScoringReport,
    read_model,
)
from evolve.report import _figures as fig
from evolve.report._holm import mark_holm
from evolve.report._html import figure_html, page, section, tables, tables_page
from evolve.report._settings import ReportSettings, report_settings
from evolve.report._spend import render_spend, spend_report
from evolve.report._usage import prefix_cached_share, render_prefix_share
from evolve.runs import ScoringFolder, run_warnings
from evolve.stats import (
    MIN_RATED_CASES,
    ClusterMeans,
    agreement_table,
    cluster_bootstrap,
    judge_pairs,
    mae,
    paired_mae_difference,
    ppi_mean,
)

__all__ = ["HOLDOUT_COLUMNS", "LAMBDA_ZERO", "build_scoring_report", "holdout_columns", "holdout_entries", "render_holdout", "scoring_html",
           "scoring_markdown", "write_scoring_report"]

_STATUSES = ("scored", "failed", "not_evaluable", "excluded")


def _num(x: Any) -> float | None:
    """A float, or None where undefined (nan, inf, None)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _iv(interval: Any) -> dict[str, Any]:
    """An :class:`~evolve.stats.Interval` as JSON (None where undefined)."""
    return {"estimate": _num(interval.estimate), "low": _num(interval.low), "high": _num(interval.high),
            "n_pairs": int(interval.n_pairs), "n_cases": int(interval.n_clusters)}


def _fmt(v: MeanInterval | AnchoredMean | PairedVerdict | None, digits: int = 3) -> str:
    """A statistic with its interval (``—`` when not computed, ``undefined`` for one that is undefined)."""
    return "—" if v is None else format_interval(v.estimate, v.low, v.high, digits=digits, missing="undefined")


def _mean_interval(frame: pd.DataFrame, column: str, n_boot: int, seed: int, confidence: float) -> dict[str, Any]:
    """Mean of ``column`` over items (rows) with a case-clustered bootstrap interval."""
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    cases = frame["case_id"].astype(str).to_numpy()
    keep = np.isfinite(values)
    means = ClusterMeans(cases[keep], n_boot=n_boot, seed=seed, confidence=confidence)
    estimate, reps, n = means.mean(cases[keep], values[keep])
    return _iv(means.interval(estimate, reps, n))


def _agreement(calls: pd.DataFrame, ratings: pd.DataFrame, labels: list[int], n_boot: int, seed: int,
               confidence: float) -> dict[str, Any]:
    """MAE, QWK and Krippendorff's alpha of judge calls against every individual rating."""
    pairs = judge_pairs(calls, ratings)
    if pairs.empty:
        return {"mae": None, "qwk": None, "krippendorff_alpha": None, "n_pairs": 0, "n_cases": 0}
    table = agreement_table(pairs, labels, n_boot=n_boot, seed=seed, confidence=confidence)
    return {"mae": _iv(table["mae"]), "qwk": _iv(table["qwk"]), "krippendorff_alpha": _iv(table["krippendorff_alpha"]),
            "n_pairs": int(len(pairs)), "n_cases": int(pairs["case_id"].nunique())}


def _constant(calls: pd.DataFrame, value: float) -> pd.DataFrame:
    """The training-median predictor as judge calls: ``value`` wherever the winner was called."""
    out = calls.copy()
    out["outcome"], out["score"] = "score", value
    return out


def _paired(a: pd.DataFrame, b: pd.DataFrame, ratings: pd.DataFrame, n_boot: int, seed: int,
            confidence: float) -> dict[str, Any]:
    d = paired_mae_difference(a, b, ratings, n_boot=n_boot, seed=seed, confidence=confidence)
    return {"estimate": _num(d.estimate), "low": _num(d.low), "high": _num(d.high), "p_value": d.p_value,
            "method": d.method, "n_pairs": d.n_pairs, "n_cases": d.n_cases, "verdict": d.verdict}


def _rated(cid: str, entry: CriterionJudge, calls: pd.DataFrame, items: pd.DataFrame, ratings: pd.DataFrame,
           n_boot: int, seed: int, confidence: float) -> dict[str, Any]:
    """Agreement of the winner, no guidance and the training median with the targets' ratings."""
    mine = ratings[ratings["criterion"] == cid]
    winner = calls[(calls["criterion"] == cid) & (calls["guidance"] == "winner")]
    none = calls[(calls["criterion"] == cid) & (calls["guidance"] == "no-guidance")]
    median = _constant(winner, entry.training_median)
    pairs = judge_pairs(median, mine)
    median_mae = (_iv(cluster_bootstrap(pairs, mae, n_boot=n_boot, seed=seed, confidence=confidence))
                  if len(pairs) else None)
    rated_items = items[pd.to_numeric(items["physician"], errors="coerce").notna()]
    return {
        "winner": _agreement(winner, mine, entry.labels, n_boot, seed, confidence),
        "no_guidance": _agreement(none, mine, entry.labels, n_boot, seed, confidence),
        "training_median": {"value": entry.training_median, "mae": median_mae},
        "verdicts": {"no_guidance": _paired(winner, none, mine, n_boot, seed, confidence),
                     "training_median": _paired(winner, median, mine, n_boot, seed, confidence)},
        "physician_mean": _mean_interval(rated_items, "physician", n_boot, seed, confidence) if len(rated_items) else None,
    }


def _anchored(entry: CriterionJudge, scored: pd.DataFrame, confidence: float, model: str,
              anchor_model: str) -> dict[str, Any]:
    """The physician-anchored (prediction-powered) mean: the judge file's validation targets as
    the rated sample, this run's scored items as the unrated ones (PPI++, Angelopoulos et al. 2023).
    Refused when the run scored with another model than the one that scored the rated sample:
    the estimate rests on one judge's errors on both samples."""
    if scored.empty:
        return {"estimate": None, "low": None, "high": None, "refused": "no target was scored", "assumption": ""}
    if model != anchor_model:
        return {"estimate": None, "low": None, "high": None, "assumption": "",
                "refused": f"scored with model {model!r}, but the rated sample was scored by {anchor_model!r}; the "
                           f"anchor corrects one judge's errors, so score with --model {anchor_model} (or calibrate "
                           f"{model!r} and use its judge file)"}
    rated = pd.DataFrame([a.model_dump() for a in entry.anchor], columns=["case_id", "target_id", "judge", "physician"])
    unrated = pd.DataFrame({"case_id": scored["case_id"].astype(str), "judge": pd.to_numeric(scored["judge"])})
    anchored = ppi_mean(rated[["case_id", "judge", "physician"]], unrated, confidence=confidence).model_dump()
    if anchored["refused"] and anchored["n_rated_cases"] < MIN_RATED_CASES:  # the rated sample is the judge file's
        anchored["refused"] = (f"the judge file's anchor (its validation targets) has {anchored['refused']}; "
                               "calibrate with more validation cases to get one")
    return anchored


def _criterion(cid: str, entry: CriterionJudge, calls: pd.DataFrame, items: pd.DataFrame, ratings: pd.DataFrame | None,
               n_boot: int, seed: int, confidence: float, models: tuple[str, str]) -> dict[str, Any]:
    """One criterion of the report; ``models``: the model that scored this run, the judge file's."""
    its = items[items["criterion"] == cid]
    mine = calls[(calls["criterion"] == cid) & (calls["guidance"] == "winner")]
    counts = {"n_items": int(len(its)), **{f"n_{s}": int((its["status"] == s).sum()) for s in _STATUSES}}
    assert counts["n_items"] == sum(counts[f"n_{s}"] for s in _STATUSES)
    scored = its[its["status"] == "scored"]
    out: dict[str, Any] = {
        "name": entry.name, "counts": counts, "n_calls": int(len(mine)),
        "n_failed_calls": int((mine["outcome"] == "model_failure").sum()),
        "coverage": float((mine["outcome"] == "score").mean()) if len(mine) else None,
        "judge_mean": _mean_interval(scored, "judge", n_boot, seed, confidence),
        "no_better_than_constant": entry.no_better_than_constant,
        "anchored": _anchored(entry, scored, confidence, *models),
        "rated": None,
    }
    if ratings is not None and len(ratings[ratings["criterion"] == cid]):
        out["rated"] = _rated(cid, entry, calls, its, ratings, n_boot, seed, confidence)
    return out


def build_scoring_report(run_dir: Path | str, *, n_boot: int = 2000, seed: int = 0,
                         confidence: float = 0.95) -> ScoringReport:
    """The report of a scoring run (:class:`~evolve.outputs.ScoringReport`, what ``summary.json`` holds).

    Per criterion: the counts (``n_items = n_scored + n_failed + n_not_evaluable + n_excluded``),
    call coverage and failures, the judge's mean score over scored items with a case-clustered
    bootstrap interval, the physician-anchored mean (:func:`evolve.stats.ppi_mean`; rated sample:
    the judge file's validation targets) with its assumption or refusal, and, where the targets
    are rated, agreement (MAE, QWK, Krippendorff's alpha with intervals, against every individual
    rating) of the winner, no guidance and the training median, the paired verdicts and the
    physicians' actual mean.

    Raises:
        RunError: A file of the run is missing or damaged (naming it and the resume command).
    """
    folder = ScoringFolder(run_dir)
    judge: JudgeFile = load_judge_file(folder.require(folder.JUDGE))
    config = folder.read_json(folder.CONFIG)
    calls = folder.read_frame(folder.CALLS, keep_default_na=False, na_values={"score": [""]}, dtype={"case_id": str, "target_id": str})
    items = folder.read_frame(folder.ITEMS, dtype={"case_id": str, "target_id": str})
    ratings = folder.read_frame(folder.RATINGS, optional=True, dtype={"case_id": str, "target_id": str})
    assert calls is not None and items is not None
    criteria = list(dict.fromkeys(items["criterion"]))
    models = (config.get("model") or judge.judge.model, judge.judge.model)
    report = {
        "run_id": folder.path.name, "run_dir": str(folder.path), "targets": config.get("targets"),
        "judge": {"run_id": judge.run_id, "source_run": judge.source_run, "rubric_id": judge.rubric_id,
                  "rubric_version": judge.rubric_version, "model": config.get("model") or judge.judge.model},
        "rated": ratings is not None and len(ratings) > 0, "confidence": confidence, "n_boot": n_boot,
        "criteria": {c: _criterion(c, judge.criteria[c], calls, items, ratings, n_boot, seed, confidence, models)
                     for c in criteria},
        "prefix_cached_share": prefix_cached_share(calls), "warnings": run_warnings(folder.journal()),
    }
    if spend := spend_report(folder.journal()):  # a spending limit or prices: what the run spent against them
        report["spend"] = spend
    return ScoringReport.model_validate(_holm(report, round(1.0 - confidence, 12)))  # 0.05, not 0.050000000000000044


def _holm(report: dict[str, Any], alpha: float) -> dict[str, Any]:
    """Holm's correction over every paired verdict of the report (Holm 1979): each gains
    ``holm_p`` and ``holm_survives`` (better/worse verdicts only); ``comparisons`` counts them."""
    found = [v for c in report["criteria"].values() if c.get("rated") for v in c["rated"]["verdicts"].values()]
    report["comparisons"] = mark_holm(found, alpha)
    return report


LAMBDA_ZERO = ("the judge's scores got no weight (they did not track the physicians' on the rated sample), so this "
               "is the rated sample's physician mean and says nothing about these targets")
"""What an anchored mean with PPI++'s lambda at 0 is, in words (report.md and the command line)."""


def _anchored_text(a: AnchoredMean) -> str:
    if a.refused:
        return f"refused: {md_inline(a.refused)}"
    return _fmt(a)


def _anchor_note(cid: str, a: AnchoredMean) -> list[str]:
    """``<criterion>: anchored on N validation targets of M cases (...)`` (nothing when refused or unanchored)."""
    if not a.n_rated or a.refused:
        return []
    if a.rated_mean is None or a.lam is None:
        return ["", f"{md_inline(cid)}: anchored on {a.n_rated} validation targets of {a.n_rated_cases} cases."]
    worth = f", worth about {a.effective_n:.0f} physician ratings" if a.effective_n else ""
    zero = f" With lambda 0: {LAMBDA_ZERO}." if a.lam == 0 else ""
    return ["", f"{md_inline(cid)}: anchored on {a.n_rated} validation targets of {a.n_rated_cases} cases "
            f"(their physicians' mean {a.rated_mean:.3f}; judge weight lambda {a.lam:.2f}{worth}).{zero}"]


def _scores_table(report: ScoringReport) -> list[str]:
    lines = ["## Judge scores", "",
             "| criterion | items | scored | failed | not evaluable | excluded | call coverage | mean judge score | "
             "physician-anchored mean |",
             "|---|---|---|---|---|---|---|---|---|"]
    for cid, c in report.criteria.items():
        n = c.counts
        cov = "—" if c.coverage is None else f"{c.coverage:.0%}"
        lines.append(f"| {md_inline(c.name or cid)} ({md_inline(cid)}) | {n.n_items} | {n.n_scored} | {n.n_failed} | "
                     f"{n.n_not_evaluable} | {n.n_excluded} | {cov} | {_fmt(c.judge_mean)} | "
                     f"{_anchored_text(c.anchored)} |")
    return lines + ["", "Items = scored + failed + not evaluable + excluded (the criterion does not apply to the target's "
                    "component; never judged). A failure is never a score."]


def _agreement_tables(report: ScoringReport, rated: dict[str, RatedTargets]) -> list[str]:
    lines = ["", "## Agreement with the targets' physicians", "",
             "Against every individual rating (MAE in scale points; QWK and Krippendorff's alpha ordinal).", "",
             "| criterion | judge | MAE | QWK | alpha | pairs | cases |", "|---|---|---|---|---|---|---|"]
    for cid, r in rated.items():
        for a, label in ((r.winner, "calibrated (winner)"), (r.no_guidance, "no guidance")):
            lines.append(f"| {md_inline(cid)} | {label} | {_fmt(a.mae)} | {_fmt(a.qwk)} | {_fmt(a.krippendorff_alpha)} | "
                         f"{a.n_pairs} | {a.n_cases} |")
        tm = r.training_median
        lines.append(f"| {md_inline(cid)} | training median ({tm.value:g}) | {_fmt(tm.mae)} | — | — | "
                     f"{tm.mae.n_pairs if tm.mae else 0} | {tm.mae.n_cases if tm.mae else 0} |")
    lines += ["", "| criterion | winner MAE − | difference | verdict | p | pairs | cases |", "|---|---|---|---|---|---|---|"]
    for cid, r in rated.items():
        for v, label in ((r.verdicts.no_guidance, "no guidance"), (r.verdicts.training_median, "training median")):
            p = "—" if v.p_value is None else "< 0.001" if v.p_value < 0.001 else f"{v.p_value:.3f}"
            verdict = v.verdict + (" - not after Holm's correction" if v.holm_survives is False else "")
            lines.append(f"| {md_inline(cid)} | {label} | {_fmt(v)} | {verdict} | {p} | {v.n_pairs} | {v.n_cases} |")
    n = report.comparisons
    lines += ["", f"Paired by target, repeat and physician; sign-flip test over cases. {n.n} paired comparisons "
              f"in this report, Holm-corrected over all of them: {n.not_surviving} of {n.definitive} "
              "better/worse verdicts do not survive."]
    lines += ["", "| criterion | physicians' actual mean | physician-anchored mean | raw judge mean |", "|---|---|---|---|"]
    for cid, r in rated.items():
        c = report.criteria[cid]
        lines.append(f"| {md_inline(cid)} | {_fmt(r.physician_mean)} | {_anchored_text(c.anchored)} | {_fmt(c.judge_mean)} |")
    return lines


def scoring_markdown(report: ScoringReport) -> str:
    """``report.md`` of a scoring run (see :func:`build_scoring_report`)."""
    conf = round(100 * report.confidence)
    judge = report.judge
    lines = [f"# Scoring report: {md_inline(report.run_id)}", "",
             f"Judge: calibration run {md_code(judge.run_id)} (rubric {md_inline(judge.rubric_id)} "
             f"{md_inline(judge.rubric_version)}, model {md_inline(judge.model)}); targets: "
             f"{md_inline(report.targets)}. Intervals are {conf}% and resample whole cases.", ""]
    lines += _scores_table(report)
    for cid, c in report.criteria.items():
        lines += _anchor_note(cid, c.anchored)
    notes = sorted({c.anchored.assumption for c in report.criteria.values()} - {""})
    lines += ["", "The physician-anchored mean (prediction-powered inference, PPI++: Angelopoulos et al., Science 2023; "
              "Angelopoulos, Duchi & Zrnic 2023) corrects the judge's mean by its error on the judge file's rated "
              "validation targets. " + " ".join(md_inline(n) for n in notes)]
    for w in report.warnings:  # the judge file's own (a constant's agreement, a drift flag, another model)
        lines += ["", f"**Warning:** {md_inline(w)}"]
    for cid, c in report.criteria.items():
        if c.no_better_than_constant and not report.warnings:  # a summary written before warnings were kept
            lines += ["", f"Warning: on validation, the {md_inline(cid)} judge was no better than a constant (the training median)."]
    rated = {cid: c.rated for cid, c in report.criteria.items() if c.rated is not None}
    if rated:
        lines += _agreement_tables(report, rated)
    if (share := render_prefix_share(report.prefix_cached_share, "calls.csv")):
        lines += ["", *share[:-1]]
    if (spend := render_spend(report.spend)):
        lines += ["", *spend[:-1]]
    return "\n".join(lines) + "\n"


def scoring_html(report: ScoringReport, markdown_text: str, *, figures: bool = True) -> str:
    """``report.html``: per criterion the raw and physician-anchored means (and, rated, the
    physicians' mean and the agreement of the calibrated judge, no guidance and the training
    median) with intervals, then the Markdown report's tables (``figures`` False: a note that
    the figures were turned off, then the tables)."""
    title = f"Scoring report: {report.run_id}"
    if not figures:
        return tables_page(title, markdown_text)
    rows = []
    for cid, c in report.criteria.items():
        rows += [_est(f"{cid}: judge", c.judge_mean), _est(f"{cid}: anchored", c.anchored)]
        if c.rated is not None:
            rows.append(_est(f"{cid}: physicians", c.rated.physician_mean))
    figs = [figure_html(lambda ax: fig.interval_plot(rows, xlabel="mean score (scale points)", title="means with intervals",
                                                     ax=ax), "raw judge mean, physician-anchored mean and (rated targets) the "
                        "physicians' mean per criterion, with intervals", size=(6.5, 1.2 + 0.35 * len(rows)))]
    agree = []
    for cid, c in report.criteria.items():
        if (r := c.rated) is not None:
            agree += [_est(f"{cid}: calibrated", r.winner.mae), _est(f"{cid}: no guidance", r.no_guidance.mae),
                      _est(f"{cid}: training median", r.training_median.mae)]
    if agree:
        figs.append(figure_html(lambda ax: fig.interval_plot(agree, xlabel="MAE against every rating (scale points)",
                                                             title="agreement with the targets' physicians", ax=ax),
                                "MAE of the calibrated judge, no guidance and the training median on these targets, "
                                "case-clustered intervals", size=(6.5, 1.2 + 0.35 * len(agree))))
    return page(title, [section("Means", figs), tables(markdown_text)])


def _est(label: str, v: MeanInterval | AnchoredMean | None) -> dict[str, Any]:
    """One row of :func:`~evolve.report._figures.interval_plot`."""
    if v is None:
        return {"label": label, "estimate": None, "low": None, "high": None}
    return {"label": label, "estimate": v.estimate, "low": v.low, "high": v.high}


def write_scoring_report(run_dir: Path | str, *, n_boot: int | None = None, seed: int = 0, html: bool = True,
                         settings: ReportSettings | None = None) -> ScoringReport:
    """Build the report of a scoring run and write ``summary.json``, ``report.md`` and (``html``) ``report.html``.

    ``settings``: bootstrap replicates and figures (default:
    :meth:`~evolve.report.ReportSettings.from_env`); ``n_boot``, when given, replaces its replicates.

    Returns:
        The report (see :func:`build_scoring_report`), as written to ``summary.json``.
    """
    folder = ScoringFolder(run_dir)
    with folder.exclusive():  # before reading: a run still being written is refused, naming its writer
        settings = report_settings(settings, n_boot)
        report = build_scoring_report(folder.path, n_boot=settings.replicates, seed=seed)
        md = scoring_markdown(report)
        folder.write(folder.SUMMARY, report.model_dump_json(indent=2))
        folder.write(folder.REPORT_MD, md)
        if html:
            folder.write(folder.REPORT_HTML, scoring_html(report, md, figures=settings.figures))
    return report


# --------------------------------------------------------------------------------------------
# The held-out evaluation of a calibration run (``evolve calibrate --evaluate-holdout``)
# --------------------------------------------------------------------------------------------

HOLDOUT_COLUMNS = ["holdout_mae", "holdout_mae_low", "holdout_mae_high", "holdout_judge_mean", "holdout_anchored_mean",
                   "holdout_anchored_low", "holdout_anchored_high", "holdout_physician_mean", "holdout_n_targets"]
"""Table 5's held-out columns (``table5.csv``): the winner's MAE against the held-out physicians,
the raw judge mean, the physician-anchored mean (rated sample: validation) and the held-out
physicians' actual mean."""


def holdout_entries(holdout_dir: Path | str) -> dict[str, dict[str, Any]]:
    """Per criterion, the held-out numbers of a calibration run (empty without ``<run>/holdout/summary.json``).

    Each entry: ``mae``, ``mae_low``, ``mae_high`` (winner vs every held-out rating; None when
    the held-out cases are unrated), ``judge_mean``, ``anchored``, ``anchored_low``,
    ``anchored_high``, ``anchored_refused``, ``judge_low``/``judge_high``, ``physician_mean`` (+ ``_low``/``_high``),
    ``n_targets`` (scored), ``n_cases``, ``n_items``, ``run_dir`` (the fields of :class:`~evolve.outputs.HoldoutEntry`).

    Raises:
        RunError: ``summary.json`` exists but is not a scoring report this evolve reads.
    """
    folder = ScoringFolder(holdout_dir)
    path = folder.path / folder.SUMMARY
    if not path.is_file():
        return {}
    summary = read_model(path, ScoringReport, rebuild=f"evolve calibrate --resume {folder.path.parent}")
    return {cid: _holdout_entry(c, folder.path.name) for cid, c in summary.criteria.items()}


def _holdout_entry(c: ScoringCriterion, run_dir: str) -> dict[str, Any]:
    mae_iv = c.rated.winner.mae if c.rated is not None else None
    phys = c.rated.physician_mean if c.rated is not None else None
    anch, judge = c.anchored, c.judge_mean
    return {"mae": mae_iv.estimate if mae_iv else None, "mae_low": mae_iv.low if mae_iv else None,
            "mae_high": mae_iv.high if mae_iv else None, "judge_mean": judge.estimate, "judge_low": judge.low,
            "judge_high": judge.high, "anchored": anch.estimate, "anchored_low": anch.low, "anchored_high": anch.high,
            "anchored_refused": anch.refused, "physician_mean": phys.estimate if phys else None,
            "physician_low": phys.low if phys else None, "physician_high": phys.high if phys else None,
            "n_targets": c.counts.n_scored, "n_items": c.counts.n_items, "n_cases": judge.n_cases, "run_dir": run_dir}


def holdout_columns(entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :data:`HOLDOUT_COLUMNS` of one Table 5 row (None values without a held-out evaluation)."""
    e = entry or {}
    return {"holdout_mae": e.get("mae"), "holdout_mae_low": e.get("mae_low"), "holdout_mae_high": e.get("mae_high"),
            "holdout_judge_mean": e.get("judge_mean"), "holdout_anchored_mean": e.get("anchored"),
            "holdout_anchored_low": e.get("anchored_low"), "holdout_anchored_high": e.get("anchored_high"),
            "holdout_physician_mean": e.get("physician_mean"), "holdout_n_targets": e.get("n_targets")}


def render_holdout(report: CalibrationReport) -> list[str]:
    """Markdown lines of Table 5's held-out part (nothing when the run evaluated no held-out case)."""
    rows = [(c, e.holdout) for c, e in report.criteria.items() if e.holdout is not None]
    if not rows:
        return []
    out = ["### Table 5, held-out cases (the final, untouched estimate)", "",
           "The split's held-out cases, never seen by evolution or selection, scored by each criterion's winner "
           "(`holdout/`, as `evolve judge` scores). MAE against every individual held-out rating; the physician-anchored "
           "mean combines the judge's held-out scores with its error on the validation targets (PPI++; it assumes the "
           "validation targets are drawn like the held-out ones) - beside it, the held-out physicians' actual mean, "
           "a check of the method.", "",
           "| criterion | held-out MAE | raw judge mean | physician-anchored mean | physicians' actual mean | targets / cases |",
           "|---|---|---|---|---|---|"]
    for cid, h in rows:
        anchored = (f"refused: {md_inline(h.anchored_refused)}" if h.anchored_refused else
                    format_interval(h.anchored, h.anchored_low, h.anchored_high, missing="undefined"))
        mae_text = "— (unrated)" if h.mae is None else format_interval(h.mae, h.mae_low, h.mae_high, missing="undefined")
        phys = "— (unrated)" if h.physician_mean is None else format_interval(h.physician_mean, h.physician_low, h.physician_high, missing="undefined")
        judge = format_interval(h.judge_mean, h.judge_low, h.judge_high, missing="undefined")
        out.append(f"| {md_inline(cid)} | {mae_text} | {judge} | {anchored} | {phys} | {h.n_targets} / {h.n_cases} |")
    return out + [""]
