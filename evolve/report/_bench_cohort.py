"""The bench report's cohort and distribution tables (the paper's Table 2, §4.2, §4.5, Table 8).

- **Table 2** (:data:`TABLE2_COLUMNS`) - the cohort: cases, words per case text (median, IQR,
  range) and the judge-rated case complexity (criterion 10; the mean over each case's panels).
- **Panel sizes** (:data:`PANELS_COLUMNS`) - roles per panel (1-5) per model and topology, over
  distinct panels (a panel is shared by the conditions of a case and model).
- **Score distributions** (:data:`DISTRIBUTION_COLUMNS`) - per criterion 1-8 of the final
  report: the share of outputs at the maximum (3) and at 0 or 1 (repeats averaged, then
  rounded to the nearest score), and the case-level median and IQR (each case's mean over its
  outputs, so each case counts once).
- **Quality by complexity** (:data:`COMPLEXITY_COLUMNS`) - the output-level final-report
  quality (mean over criteria 1-8) by the judged case complexity (0-3, rounded).
- **Format difference** (:data:`FORMAT_COLUMNS`) - per criterion 1-8 of the final report,
  structured minus free-form, paired by (case, model, topology), with case-clustered intervals.

Every interval is a 95% case-clustered percentile bootstrap (:class:`evolve.stats.ClusterMeans`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from evolve.consilium import CaseRun
from evolve.data import Case
from evolve.markdown import format_interval, md_inline
from evolve.outputs import BenchTables
from evolve.stats import ClusterMeans

__all__ = [
    "COMPLEXITY_COLUMNS", "DISTRIBUTION_COLUMNS", "FORMAT_COLUMNS", "PANELS_COLUMNS", "TABLE2_COLUMNS",
    "complexity_table", "distribution_table", "format_table", "panels_table", "table2",
]

CONFIDENCE = 0.95
_QUALITY = range(1, 9)
_COMPLEXITY = 10
_OUTPUT_KEY = ["case_id", "model", "condition", "topology"]

TABLE2_COLUMNS = ["n_cases", "words_median", "words_q1", "words_q3", "words_min", "words_max", "n_complexity",
                  "complexity_mean", "complexity_mean_low", "complexity_mean_high"]
PANELS_COLUMNS = ["model", "topology", "n_panels", *(f"roles_{k}" for k in range(1, 6)), "median_roles"]
DISTRIBUTION_COLUMNS = ["number", "criterion", "n_outputs", "at_max_share", "zero_or_one_share", "n_cases",
                        "case_median", "case_q1", "case_q3"]
COMPLEXITY_COLUMNS = ["complexity", "n_outputs", "n_cases", "quality_mean", "quality_mean_low", "quality_mean_high",
                      "below_2_share"]
FORMAT_COLUMNS = ["number", "criterion", "n_pairs", "structured_mean", "free_form_mean", "difference",
                  "difference_low", "difference_high"]


def _interval(rs: ClusterMeans, case_ids: pd.Series, values: pd.Series) -> tuple[float, float, float]:
    est, reps, n = rs.mean(case_ids.to_numpy(dtype=object), values.to_numpy(dtype=np.float64))
    iv = rs.interval(est, reps, n)
    return iv.estimate, iv.low, iv.high


def table2(cases: Sequence[Case], units: pd.DataFrame | None, n_boot: int, seed: int) -> dict:
    """One row describing the cohort (see the module docstring)."""
    words = np.array([len(re.findall(r"\S+", c.text)) for c in cases], dtype=float)
    row: dict = {"n_cases": len(cases)}
    if words.size:
        q = np.percentile(words, [50, 25, 75])
        row.update(words_median=float(q[0]), words_q1=float(q[1]), words_q3=float(q[2]),
                   words_min=float(words.min()), words_max=float(words.max()))
    per_case = _case_complexity(units)
    row["n_complexity"] = len(per_case)
    rs = ClusterMeans(per_case.index, n_boot, seed, CONFIDENCE)
    est, low, high = _interval(rs, pd.Series(per_case.index), per_case.reset_index(drop=True))
    row.update(complexity_mean=est, complexity_mean_low=low, complexity_mean_high=high)
    return row


def _case_complexity(units: pd.DataFrame | None) -> pd.Series:
    """Criterion-10 score per case: the mean over its judged panels (repeats averaged first)."""
    if units is None:
        return pd.Series(dtype=float)
    c = units[(units["component"] == "case") & (units["number"] == _COMPLEXITY) & units["score"].notna()]
    return c.groupby("case_id")["score"].mean()


def panels_table(runs: Sequence[CaseRun]) -> list[dict]:
    """Roles per distinct panel, per model and topology, and over every model."""
    panels = {(r.case_id, r.model, r.topology): len(r.roles) for r in runs if r.roles}
    frame = pd.DataFrame([{"model": m, "topology": t, "size": n} for (_, m, t), n in panels.items()],
                         columns=["model", "topology", "size"])
    groups = [((m, t), sub) for (m, t), sub in frame.groupby(["model", "topology"], sort=True)]
    if frame["model"].nunique() > 1:
        groups += [(("all", t), sub) for t, sub in frame.groupby("topology", sort=True)]
    out = []
    for (model, topology), sub in groups:
        row = {"model": model, "topology": topology, "n_panels": len(sub),
               **{f"roles_{k}": int((sub["size"] == k).sum()) for k in range(1, 6)},
               "median_roles": float(sub["size"].median())}
        out.append(row)
    return out


def _final(units: pd.DataFrame) -> pd.DataFrame:
    return units[(units["component"] == "final") & units["number"].isin(_QUALITY) & units["score"].notna()]


def distribution_table(units: pd.DataFrame) -> list[dict]:
    """Per criterion 1-8 of the final report: shares at the maximum and at 0/1, case-level spread."""
    final = _final(units)
    names = final.groupby("number")["criterion"].first().to_dict()
    out = []
    for number in sorted(final["number"].unique()):
        sub = final[final["number"] == number]
        rounded = sub["score"].round()
        per_case = sub.groupby("case_id")["score"].mean()
        q = np.percentile(per_case, [50, 25, 75])
        out.append({"number": int(number), "criterion": names.get(number, ""), "n_outputs": len(sub),
                    "at_max_share": float((rounded == 3).mean()), "zero_or_one_share": float((rounded <= 1).mean()),
                    "n_cases": len(per_case), "case_median": float(q[0]), "case_q1": float(q[1]),
                    "case_q3": float(q[2])})
    return out


def complexity_table(quality: pd.DataFrame, n_boot: int, seed: int) -> list[dict]:
    """Output-level final quality by judged case complexity (rounded to 0-3)."""
    q = quality[quality["quality"].notna() & quality["complexity"].notna()]
    q = q.assign(level=q["complexity"].round().astype(int), below=(q["quality"] < 2).astype(float))
    out = []
    for level in sorted(q["level"].unique()):
        sub = q[q["level"] == level]
        rs = ClusterMeans(sub["case_id"], n_boot, seed, CONFIDENCE)
        est, low, high = _interval(rs, sub["case_id"], sub["quality"])
        out.append({"complexity": int(level), "n_outputs": len(sub), "n_cases": int(sub["case_id"].nunique()),
                    "quality_mean": est, "quality_mean_low": low, "quality_mean_high": high,
                    "below_2_share": float(sub["below"].mean())})
    return out


def format_table(units: pd.DataFrame, n_boot: int, seed: int) -> list[dict]:
    """Per criterion 1-8 of the final report: structured minus free-form, paired by
    (case, model, topology); empty unless both conditions were judged."""
    final = _final(units)
    key = ["case_id", "model", "topology", "number"]
    wide = final.pivot_table(index=key, columns="condition", values="score", aggfunc="mean")
    if not {"structured", "free-form"} <= set(wide.columns):
        return []
    pairs = wide[["structured", "free-form"]].dropna().reset_index()
    names = final.groupby("number")["criterion"].first().to_dict()
    out = []
    for number in sorted(pairs["number"].unique()):
        sub = pairs[pairs["number"] == number]
        rs = ClusterMeans(sub["case_id"], n_boot, seed, CONFIDENCE)
        est, low, high = _interval(rs, sub["case_id"], sub["structured"] - sub["free-form"])
        out.append({"number": int(number), "criterion": names.get(number, ""), "n_pairs": len(sub),
                    "structured_mean": float(sub["structured"].mean()), "free_form_mean": float(sub["free-form"].mean()),
                    "difference": est, "difference_low": low, "difference_high": high})
    return out


def _num(x: float | None, digits: int = 3) -> str:
    return format_interval(x, None, None, digits=digits)


def _ci(estimate: float | None, low: float | None, high: float | None, digits: int = 3) -> str:
    return format_interval(estimate, low, high, digits=digits)


def _pct(share: float | None) -> str:
    return format_interval(share, None, None, digits=1, scale=100.0, suffix="%")


def render_cohort(tables: BenchTables, judged: bool) -> list[str]:
    """Markdown sections of the tables above (``judged``: whether the run has judge scores)."""
    t2 = tables.table2[0] if tables.table2 else None
    out = ["## Table 2 — cohort", "",
           "Words per case text (the case as given to the models); case complexity = the judge's criterion 10, "
           "averaged over each case's panels.", "",
           "| cases | words: median (IQR) | range | complexity: cases judged | mean (0–3) |", "|---|---|---|---|---|"]
    if t2 is not None and t2.n_cases:
        out.append(f"| {t2.n_cases} | {_num(t2.words_median, 0)} ({_num(t2.words_q1, 0)}–{_num(t2.words_q3, 0)}) | "
                   f"{_num(t2.words_min, 0)}–{_num(t2.words_max, 0)} | {t2.n_complexity} | "
                   f"{_ci(t2.complexity_mean, t2.complexity_mean_low, t2.complexity_mean_high, 2)} |")
    out += ["", "## Panel sizes", "", "Roles per distinct panel (1–5; a panel serves every condition of its case).", "",
            "| model | topology | panels | 1 | 2 | 3 | 4 | 5 | median |", "|---|---|---|---|---|---|---|---|---|"]
    for p in tables.panels:
        cells = " | ".join(f"{n} ({n / p.n_panels:.0%})" for n in p.by_size)
        out.append(f"| {md_inline(p.model)} | {md_inline(p.topology)} | {p.n_panels} | {cells} | {_num(p.median_roles, 1)} |")
    out.append("")
    if not judged:
        return out + ["## Score distributions, quality by complexity, structured − free-form", "",
                      "Not judged yet: run `evolve bench judge RUN`.", ""]
    out += ["## Score distributions of the final report", "",
            ("Per criterion: share of outputs at 3 and at 0 or 1 (repeats averaged, then rounded); case-level median "
             "(IQR) of each case's mean over its outputs, so each case counts once."), "",
            "| # | criterion | outputs | at 3 | at 0 or 1 | cases | case median (IQR) |", "|---|---|---|---|---|---|---|"]
    for d in tables.distribution:
        out.append(f"| {md_inline(d.number)} | {md_inline(d.criterion)} | {d.n_outputs} | {_pct(d.at_max_share)} | "
                   f"{_pct(d.zero_or_one_share)} | {d.n_cases} | {_num(d.case_median, 2)} "
                   f"({_num(d.case_q1, 2)}–{_num(d.case_q3, 2)}) |")
    out += ["", "## Final-report quality by case complexity", "",
            "Output-level mean over criteria 1–8 of the final report, by the judged complexity of its case (rounded).", "",
            "| complexity | outputs | cases | quality | below 2 |", "|---|---|---|---|---|"]
    for c in tables.complexity:
        out.append(f"| {c.complexity} | {c.n_outputs} | {c.n_cases} | "
                   f"{_ci(c.quality_mean, c.quality_mean_low, c.quality_mean_high, 3)} | {_pct(c.below_2_share)} |")
    out += ["", "## Structured − free-form (final report)", "",
            "Per criterion, paired by case, model and topology; positive = the structured report scored higher.", "",
            "| # | criterion | pairs | structured | free-form | difference |", "|---|---|---|---|---|---|"]
    if not tables.format:
        out.append("| both conditions were not judged on the same outputs | | | | | |")
    for f in tables.format:
        out.append(f"| {md_inline(f.number)} | {md_inline(f.criterion)} | {f.n_pairs} | {_num(f.structured_mean)} | "
                   f"{_num(f.free_form_mean)} | {_ci(f.difference, f.difference_low, f.difference_high, 3)} |")
    return [*out, ""]
