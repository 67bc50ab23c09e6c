"""Physician-anchored means in the bench report: the judge's raw mean beside an estimate of
the physicians' mean, per criterion, for each system and for differences between systems.

A judge calibrated against physicians is still biased: the mean of its scores over a
benchmark's outputs describes the judge, and a bootstrap interval around it need not cover the
mean physicians would give. When the bench was judged with a judge file (``bench judge
--guidance RUN_OR_JUDGE_JSON``), the judge file's *anchor* - the calibration's validation
targets, each with the winner's mean score and the physicians' mean rating - is a rated
sample judged the same way. Prediction-powered inference (Angelopoulos et al., Science 2023;
with the power tuning of PPI++, Angelopoulos, Duchi & Zrnic 2023) combines the many judge
scores of the bench with that rated sample into an estimate of the physicians' mean with a
valid 95% interval (:func:`evolve.stats.ppi_mean`, case-clustered).

Per criterion of the judge file and per system (model x condition x topology, and models
pooled as ``all`` when there are several) a row of :data:`ANCHORED_COLUMNS`: the raw judge
mean of the system's judged items of that criterion (one item = one judged output component,
its score the mean over repeats; failed items left out and counted) with the report's
case-clustered bootstrap interval, and the physician-anchored mean with its interval, the
power-tuning weight and the effective number of physician ratings it is worth. Differences
(:data:`DIFFERENCE_COLUMNS`) are those the report compares: structured minus free-form,
``n+1`` minus single, and each pair of models, within the other two keys, over the output
components both systems have (a note names those left out); the raw difference
has a joint case-clustered interval (both systems' cases drawn together), the anchored one
comes from :func:`evolve.stats.ppi_mean_difference` with the shared anchor.

Every anchored figure rests on one assumption, stated wherever it appears: the rated sample
is drawn like the judged outputs (same kind of outputs, same judge, same prompts). Figures are
refused, in words, when the anchor has too few rated cases (:data:`evolve.stats.MIN_RATED_CASES`),
when the judge file has no anchor for the criterion, when the bench's scores were not made with
the judge file's guidance, rubric version or rubric and protocol texts (sha256 of the run's
rubric copy), or with another judge model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from evolve.calibrated import CriterionJudge, JudgeFile, load_judge_file
from evolve.errors import RunError
from evolve.markdown import format_interval, md_code, md_inline
from evolve.outputs import AnchoredSection
from evolve.runs import BenchFolder
from evolve.stats import MIN_RATED_CASES, ClusterMeans, PPIEstimate, ppi_mean, ppi_mean_difference

__all__ = ["ANCHORED_COLUMNS", "ASSUMPTION", "DIFFERENCE_COLUMNS", "anchored_means", "render_anchored"]

CONFIDENCE = 0.95
ALL = "all"
_GROUP_KEY = ["model", "condition", "topology"]

ASSUMPTION = ("Physician-anchored means assume that the judge file's rated validation targets are drawn like the "
              "bench's judged outputs (the same kind of outputs, scored by the same judge with the same prompts); "
              "where they are not, the anchored figures carry the difference as bias.")
"""The assumption sentence printed with every physician-anchored figure."""

ANCHORED_COLUMNS = [
    *_GROUP_KEY, "number", "criterion", "n_items", "n_unscored", "n_cases",
    "judge_mean", "judge_mean_low", "judge_mean_high",
    "anchored_mean", "anchored_mean_low", "anchored_mean_high", "lam", "effective_n", "n_rated", "n_rated_cases",
    "refused",
]
"""Columns of ``anchored.csv`` (one row per system and criterion of the judge file).

``n_items``: judged items with a numeric score (repeats averaged); ``n_unscored``: items whose
every repeat failed or was not evaluable (left out); ``judge_mean*``: raw judge mean with the
report's case-clustered bootstrap interval; ``anchored_mean*``: prediction-powered estimate of
the physicians' mean and its interval (None when refused); ``lam``: PPI++ weight (0 = the judge
is ignored, 1 = plain PPI); ``effective_n``: physician ratings the estimate is worth;
``n_rated``/``n_rated_cases``: the anchor's targets and cases; ``refused``: why there is no
anchored figure (empty otherwise)."""

DIFFERENCE_COLUMNS = [
    "between", "a_model", "a_condition", "a_topology", "b_model", "b_condition", "b_topology", "number", "criterion",
    "n_items_a", "n_items_b", "judge_difference", "judge_difference_low", "judge_difference_high",
    "anchored_difference", "anchored_difference_low", "anchored_difference_high", "lam", "effective_n", "refused",
]
"""Columns of ``anchored_differences.csv`` (system A minus system B per criterion).

``between``: ``conditions`` (structured - free-form), ``topologies`` (n+1 - single) or ``models``
(each pair, in name order); the ``a_*``/``b_*`` keys name both systems. ``judge_difference*``:
raw difference of judge means with a joint case-clustered bootstrap interval;
``anchored_difference*``: :func:`evolve.stats.ppi_mean_difference` with the shared anchor."""


# -- the judge file behind the bench ---------------------------------------------------------------


def _judge_record(folder: BenchFolder) -> tuple[dict | None, dict]:
    """``(judge_file record, judge.json)`` of a judged bench (record None without a judge file)."""
    try:
        meta = json.loads((folder / folder.JUDGE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, {}
    record = meta.get("judge_file") if isinstance(meta, dict) else None
    return (record if isinstance(record, dict) else None), (meta if isinstance(meta, dict) else {})


def _load_copy(folder: BenchFolder, record: dict) -> tuple[JudgeFile | None, str | None]:
    """The judge file's copy in the run, checked against the recorded sha256; or why not."""
    copy = folder / str(record.get("copy_name") or folder.CALIBRATED_JUDGE)
    try:
        data = copy.read_bytes()
    except OSError:
        return None, (f"{copy} is missing (the judged run keeps a copy of its judge file); judge the run again "
                      f"with `evolve bench judge {folder.path} --guidance {record.get('path', 'RUN')}`")
    if hashlib.sha256(data).hexdigest() != record.get("sha256"):
        return None, (f"{copy} is not the judge file the run was judged with (its sha256 differs from the one "
                      f"recorded in {folder.JUDGE}); restore it or judge the run again")
    try:
        return load_judge_file(copy), None
    except RunError as exc:
        return None, str(exc)


def _prompt_mismatch(folder: BenchFolder, judge: JudgeFile) -> str | None:
    """Why the bench's judge prompts are not the validated ones: its rubric copy's
    ``rubric.json`` or ``protocol.md`` differs from the judge file's (None when equal, or when
    the run keeps no copy; the rubric version is checked on the scores then)."""
    copy = folder.prompts_root / judge.rubric_id
    for name, expected in (("rubric.json", judge.rubric_sha256), ("protocol.md", judge.protocol_sha256)):
        try:
            found = hashlib.sha256((copy / name).read_bytes()).hexdigest()
        except OSError:
            return None
        if found != expected:
            return (f"the bench was judged with a {name} (sha256 {found[:12]}…, {copy / name}) other than the one the "
                    f"judge file validated ({expected[:12]}…): its prompts are not the validated ones")
    return None


def _criterion_refusal(crit: CriterionJudge, judge: JudgeFile, scores: pd.DataFrame, meta: dict) -> str | None:
    """Why a criterion gets no anchored figure before any estimate is tried (None: try)."""
    if not crit.anchor:
        return "the judge file holds no rated validation targets for this criterion (no anchor)"
    judge_model = str((meta.get("judge") or {}).get("model") or "")
    if judge_model and judge.judge.model and judge_model != judge.judge.model:
        return (f"the anchor was scored by judge model {judge.judge.model!r}, this bench by {judge_model!r}: the "
                "judge-physician gap measured on one judge does not carry over to another")
    rows = scores[scores["criterion"] == crit.criterion_id]
    if "guidance_id" in rows.columns:
        used = sorted(set(rows["guidance_id"].astype(str)) - {""})
        if used != [crit.winner.candidate_id]:
            return (f"the bench's scores of this criterion were made with guidance {', '.join(used) or 'none'}, "
                    f"not the judge file's winner {crit.winner.candidate_id!r}")
    if "rubric_version" in rows.columns:
        versions = sorted(set(rows["rubric_version"].astype(str)) - {""})
        if versions and versions != [judge.rubric_version]:
            return (f"the bench was judged on rubric version {', '.join(versions)}, the judge file validated "
                    f"version {judge.rubric_version}")
    return None


# -- systems and differences ------------------------------------------------------------------------


def _systems(units: pd.DataFrame) -> Iterator[tuple[dict, pd.DataFrame]]:
    """Items per (model, condition, topology), then - with several models - pooled over models."""
    for key, sub in units.groupby(_GROUP_KEY, sort=True):
        yield dict(zip(_GROUP_KEY, key)), sub
    if units["model"].nunique() > 1:
        for (condition, topology), sub in units.groupby(["condition", "topology"], sort=True):
            yield {"model": ALL, "condition": condition, "topology": topology}, sub


def _pairs(keys: list[dict]) -> Iterator[tuple[str, dict, dict]]:
    """The system pairs the report compares: ``(between, A, B)`` for A minus B."""
    have = {tuple(k[c] for c in _GROUP_KEY) for k in keys}
    for m, c, t in sorted(have):
        if c == "structured" and (m, "free-form", t) in have:
            yield "conditions", {"model": m, "condition": c, "topology": t}, {"model": m, "condition": "free-form", "topology": t}
        if t == "n+1" and (m, c, "single") in have:
            yield "topologies", {"model": m, "condition": c, "topology": t}, {"model": m, "condition": c, "topology": "single"}
    models = sorted({k[0] for k in have} - {ALL})
    for a, b in combinations(models, 2):
        for c, t in sorted({(k[1], k[2]) for k in have}):
            if (a, c, t) in have and (b, c, t) in have:
                yield "models", {"model": a, "condition": c, "topology": t}, {"model": b, "condition": c, "topology": t}


def _items(units: pd.DataFrame, key: dict) -> pd.DataFrame:
    mask = units["condition"].eq(key["condition"]) & units["topology"].eq(key["topology"])
    if key["model"] != ALL:
        mask &= units["model"].eq(key["model"])
    return units[mask]


def _same_components(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Both systems' items restricted to the output components both have (a structured
    pipeline's role components have no free-form counterpart: a difference over the mix would
    mix the systems with their components), and the components left out."""
    common = set(a["component"]) & set(b["component"])
    dropped = sorted((set(a["component"]) | set(b["component"])) - common)
    return a[a["component"].isin(common)], b[b["component"].isin(common)], dropped


def _unrated(items: pd.DataFrame) -> pd.DataFrame:
    scored = items[items["score"].notna()]
    return pd.DataFrame({"case_id": scored["case_id"].astype(str).to_numpy(), "judge": scored["score"].to_numpy(dtype=float)})


def _anchored(est: PPIEstimate | None, refusal: str | None, prefix: str) -> dict:
    if est is None or est.refused:
        return {prefix: None, f"{prefix}_low": None, f"{prefix}_high": None, "lam": None, "effective_n": None,
                "refused": refusal or (est.refused if est is not None else None)}
    return {prefix: est.estimate, f"{prefix}_low": est.low, f"{prefix}_high": est.high, "lam": est.lam,
            "effective_n": est.effective_n, "refused": None}


def _system_row(key: dict, crit: CriterionJudge, number: int, items: pd.DataFrame, rated: pd.DataFrame,
                refusal: str | None, n_boot: int, seed: int) -> dict:
    unrated = _unrated(items)
    rs = ClusterMeans(items["case_id"], n_boot, seed, CONFIDENCE)
    est, reps, n = rs.mean(unrated["case_id"].to_numpy(dtype=object), unrated["judge"].to_numpy())
    raw = rs.interval(est, reps, n)
    row = {**key, "number": number, "criterion": crit.criterion_id, "n_items": len(unrated),
           "n_unscored": len(items) - len(unrated), "n_cases": int(unrated["case_id"].nunique()),
           "judge_mean": raw.estimate, "judge_mean_low": raw.low, "judge_mean_high": raw.high,
           "n_rated": len(rated), "n_rated_cases": int(rated["case_id"].nunique())}
    if refusal is None and unrated.empty:
        refusal = "no judged item of this criterion has a numeric score"
    ppi = None if refusal else ppi_mean(rated, unrated, confidence=CONFIDENCE, min_rated_cases=MIN_RATED_CASES)
    return {**row, **_anchored(ppi, refusal, "anchored_mean")}


def _difference_row(between: str, a: dict, b: dict, crit: CriterionJudge, number: int, items_a: pd.DataFrame,
                    items_b: pd.DataFrame, rated: pd.DataFrame, refusal: str | None, n_boot: int, seed: int) -> dict:
    ua, ub = _unrated(items_a), _unrated(items_b)
    rs = ClusterMeans(pd.concat([ua["case_id"], ub["case_id"]]), n_boot, seed, CONFIDENCE)
    est_a, reps_a, n_a = rs.mean(ua["case_id"].to_numpy(dtype=object), ua["judge"].to_numpy())
    est_b, reps_b, n_b = rs.mean(ub["case_id"].to_numpy(dtype=object), ub["judge"].to_numpy())
    raw = rs.interval(est_a - est_b, reps_a - reps_b, min(n_a, n_b))
    row = {"between": between, **{f"a_{k}": v for k, v in a.items()}, **{f"b_{k}": v for k, v in b.items()},
           "number": number, "criterion": crit.criterion_id, "n_items_a": len(ua), "n_items_b": len(ub),
           "judge_difference": raw.estimate, "judge_difference_low": raw.low, "judge_difference_high": raw.high}
    if refusal is None and (ua.empty or ub.empty):
        refusal = "one of the two systems has no numeric score on this criterion"
    ppi = None if refusal else ppi_mean_difference(rated, ua, rated, ub, confidence=CONFIDENCE,
                                                   min_rated_cases=MIN_RATED_CASES)
    return {**row, **_anchored(ppi, refusal, "anchored_difference"), "_assumption": ppi.assumption if ppi else None}


def _rated(crit: CriterionJudge) -> pd.DataFrame:
    return pd.DataFrame([{"case_id": t.case_id, "judge": t.judge, "physician": t.physician} for t in crit.anchor],
                        columns=["case_id", "judge", "physician"])


def _criterion_summary(crit: CriterionJudge, number: int, rated: pd.DataFrame, refusal: str | None) -> dict:
    return {"criterion": crit.criterion_id, "number": number, "name": crit.name,
            "guidance": crit.winner.candidate_id, "n_rated": len(rated), "n_rated_cases": int(rated["case_id"].nunique()),
            "rated_judge_mean": float(rated["judge"].mean()) if len(rated) else None,
            "rated_physician_mean": float(rated["physician"].mean()) if len(rated) else None,
            "refused": refusal}


# -- the section ------------------------------------------------------------------------------------


def _unavailable(reason: str, record: dict | None = None) -> dict:
    return {"available": False, "reason": reason, "judge_file": record, "assumption": ASSUMPTION, "difference_assumption": None,
            "confidence": CONFIDENCE, "min_rated_cases": MIN_RATED_CASES, "criteria": [], "systems": [],
            "differences": [], "notes": []}


def anchored_means(run_dir: Path | str, units: pd.DataFrame, scores: pd.DataFrame, *, n_boot: int = 2000,
                   seed: int = 0) -> dict:
    """The physician-anchored section of a judged bench's report.

    Args:
        run_dir: The bench run folder (its ``judge.json`` names the judge file; the copy
            ``calibrated_judge.json`` holds the anchor).
        units: Judged items (one row per output, component, role and criterion; columns
            ``case_id``, ``model``, ``condition``, ``topology``, ``component``, ``number``,
            ``criterion``, ``score`` = mean over numeric repeats, NaN when none).
        scores: The judge calls (``judge_scores.csv`` rows, for the guidance and rubric version
            each criterion was judged with).
        n_boot, seed: The report's case-clustered bootstrap of the raw means.

    Returns:
        ``available`` (bool), ``reason`` (why not, in words; None when available),
        ``judge_file`` (path, sha256, run_id, judge_model, copy_name), ``assumption`` (the
        sentence shown with the means), ``difference_assumption`` (the one the anchored
        differences rest on: with one shared anchor the judge's correction cancels, so they
        assume its mean error is the same on both systems; None when none was computed),
        ``confidence``, ``min_rated_cases``, ``criteria`` (per criterion of the judge
        file: id, number, name, guidance, n_rated, n_rated_cases, the anchor's judge and
        physician means, refused), ``systems`` (rows of :data:`ANCHORED_COLUMNS`),
        ``differences`` (rows of :data:`DIFFERENCE_COLUMNS`) and ``notes``.
    """
    folder = BenchFolder(run_dir)
    record, meta = _judge_record(folder)
    if record is None:
        # plain words, no Markdown: the reason is escaped into report.md, which the terminal shows as is
        how = ("its guidance came from a calibration run without a judge file (evolve report RUN writes one; then "
               "judge again)") if meta.get("calibration_run") else "it was judged without a judge file"
        return _unavailable(f"no physician-anchored means: {how}. Judge with: evolve bench judge {folder.path} "
                            "--guidance CALIBRATION_RUN_OR_JUDGE_JSON")
    judge, problem = _load_copy(folder, record)
    if judge is None:
        return _unavailable(f"no physician-anchored means: {problem}.", record)
    out = _unavailable("", record) | {"available": True, "reason": None}
    numbers = {str(k): int(v) for k, v in units.groupby("criterion")["number"].first().items()}
    prompts = _prompt_mismatch(folder, judge)
    bench_cases = set(units["case_id"].astype(str))
    for criterion_id, crit in sorted(judge.criteria.items(), key=lambda kv: numbers.get(kv[0], 99)):
        if criterion_id not in numbers:
            out["notes"].append(f"criterion {criterion_id!r} of the judge file was not judged in this bench.")
            continue
        number = int(numbers[criterion_id])
        rated = _rated(crit)
        refusal = _criterion_refusal(crit, judge, scores, meta) or prompts
        out["criteria"].append(_criterion_summary(crit, number, rated, refusal))
        shared = set(rated["case_id"].astype(str)) & bench_cases
        if shared and refusal is None:
            out["notes"].append(f"{crit.criterion_id}: {len(shared)} of the anchor's {rated['case_id'].nunique()} cases "
                                "are also bench cases; the estimator treats the rated and judged samples as independent.")
        crit_units = units[units["criterion"] == criterion_id]
        keys = []
        for key, items in _systems(crit_units):
            keys.append(key)
            out["systems"].append(_system_row(key, crit, number, items, rated, refusal, n_boot, seed))
        for between, a, b in _pairs(keys):
            items_a, items_b, dropped = _same_components(_items(crit_units, a), _items(crit_units, b))
            if dropped:
                names = [" · ".join((k["model"], k["condition"], k["topology"])) for k in (a, b)]
                out["notes"].append(f"{crit.criterion_id}, {names[0]} − {names[1]}: compared on the components "
                                    f"both have; {', '.join(dropped)} left out (judged in one system only).")
            row = _difference_row(between, a, b, crit, number, items_a, items_b, rated, refusal, n_boot, seed)
            out["difference_assumption"] = out["difference_assumption"] or row.pop("_assumption")
            row.pop("_assumption", None)
            out["differences"].append(row)
    unguided = sorted(set(numbers) - set(judge.criteria))
    if unguided:
        out["notes"].append(f"criteria {', '.join(unguided)} are not in the judge file: raw judge means only.")
    return out


# -- markdown ---------------------------------------------------------------------------------------


def _fmt(x: float | None, low: float | None = None, high: float | None = None) -> str:
    return format_interval(x if x is not None and np.isfinite(x) else None, low, high, digits=2)


def _anchored_cell(refused: str | None, estimate: float | None, low: float | None, high: float | None) -> str:
    if refused:
        return f"refused: {md_inline(refused)}"
    return _fmt(estimate, low, high)


def _eff(n: float | None) -> str:
    return "—" if n is None else f"{n:.1f}"


def _system(model: str, condition: str, topology: str) -> str:
    return " · ".join(md_inline(part) for part in (model, condition, topology))


def render_anchored(section: AnchoredSection | None, judged: bool) -> list[str]:
    """The section as Markdown lines (nothing for an unjudged run)."""
    if not judged or section is None:
        return []
    title = "## Physician-anchored means"
    if not section.available or section.judge_file is None:
        return [title, "", f"Raw judge means only: {md_inline(section.reason)}", ""]
    rec = section.judge_file
    out = [title, "",
           (f"Judge file {md_code(rec.path)} (calibration {md_code(rec.run_id)}, sha256 {rec.sha256[:16]}…, copied into "
            "this run as `calibrated_judge.json`). **Raw judge mean**: the judge's mean score over the system's judged "
            "items of the criterion (repeats averaged), with a 95% case-clustered bootstrap interval; it describes the "
            "judge, not physicians. **Physician-anchored mean**: a prediction-powered estimate of the physicians' mean "
            "(PPI++ with power tuning, case-clustered; Angelopoulos et al. 2023) from these judge scores and the judge "
            "file's rated validation targets (the anchor), with a valid 95% interval; *effective n* is how many "
            "physician ratings it is worth. Anchored figures are refused, in words, below "
            f"{section.min_rated_cases} rated cases."), "",
           f"*Assumption:* {md_inline(section.assumption)}", ""]
    out += [f"- Note: {md_inline(n)}" for n in section.notes] + ([""] if section.notes else [])
    out += ["| # | criterion | guidance | rated targets (cases) | anchor: judge mean | anchor: physician mean | anchored figures |",
            "|---|---|---|---|---|---|---|"]
    for c in section.criteria:
        why = {r.refused for r in section.systems if r.criterion == c.criterion}
        status = (f"refused: {md_inline(c.refused)}" if c.refused else "given below" if None in why or not why else
                  f"refused in every row below: {md_inline('; '.join(sorted(str(w) for w in why)))}")
        out.append(f"| {md_inline(c.number)} | {md_inline(c.criterion)} | {md_inline(c.guidance)} | {c.n_rated} ({c.n_rated_cases}) | "
                   f"{_fmt(c.rated_judge_mean)} | {_fmt(c.rated_physician_mean)} | {status} |")
    out += ["", "Per system (model · condition · topology; `all` pools the models):", "",
            "| # | criterion | system | items (cases) | raw judge mean | physician-anchored mean | effective n | λ |",
            "|---|---|---|---|---|---|---|---|"]
    for r in section.systems:
        lam = "—" if r.lam is None else f"{r.lam:.2f}"
        out.append(f"| {md_inline(r.number)} | {md_inline(r.criterion)} | {_system(r.model, r.condition, r.topology)} | "
                   f"{r.n_items} ({r.n_cases}) | {_fmt(r.judge_mean, r.judge_mean_low, r.judge_mean_high)} | "
                   f"{_anchored_cell(r.refused, r.anchored_mean, r.anchored_mean_low, r.anchored_mean_high)} | "
                   f"{_eff(r.effective_n)} | {lam} |")
    out.append("")
    if section.differences:
        assumption = section.difference_assumption or section.assumption
        out += ["Differences between systems (A − B; positive = A scored higher); the raw difference's interval draws "
                "both systems' cases together, the anchored one uses the one anchor for both systems, so the judge's "
                "correction cancels and the estimate equals the raw difference, with a case-clustered normal interval. "
                f"*Assumption:* {md_inline(assumption)}", "",
                "| # | criterion | between | A | B | items A / B | raw judge difference | physician-anchored difference | effective n |",
                "|---|---|---|---|---|---|---|---|---|"]
        for d in section.differences:
            out.append(f"| {md_inline(d.number)} | {md_inline(d.criterion)} | {md_inline(d.between)} | "
                       f"{_system(d.a_model, d.a_condition, d.a_topology)} | {_system(d.b_model, d.b_condition, d.b_topology)} | "
                       f"{d.n_items_a} / {d.n_items_b} | "
                       f"{_fmt(d.judge_difference, d.judge_difference_low, d.judge_difference_high)} | "
                       f"{_anchored_cell(d.refused, d.anchored_difference, d.anchored_difference_low, d.anchored_difference_high)} | "
                       f"{_eff(d.effective_n)} |")
        out.append("")
    return out
