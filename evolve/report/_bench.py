"""Benchmark report (``bench_report.md`` / ``.json`` / one CSV per table) of a bench run folder.

Nothing here calls a model. Every number is recomputed from the run's artifacts:

- ``cases/*.json`` - one :class:`~evolve.consilium.CaseRun` per (case, model, condition,
  topology): panel, votes per role and round, stop reason, rounds completed, every call with
  its tokens;
- ``judge_scores.csv`` (optional) - one row per judge call outcome (:data:`JUDGE_SCORE_COLUMNS`).
  Without it the judge-based tables (6, 8, 9 and the quality half of 7) say "not judged yet".

**Tables** (consilium paper, tables; numbers follow the source paper's tables of the same number):

- **Table 3** (:data:`TABLE3_COLUMNS`) - consilium process outcomes per model x condition x
  topology: pipelines, first-round and eventual consensus, mean rounds completed, stops at the
  round limit, failures, and the count of every stop reason.
- **Table 4** (:data:`TABLE4_COLUMNS`) - role-level vote transitions between consecutive review
  rounds (yes->yes, yes->no, no->yes, no->no), by harmonised role category and overall, and for
  the overall row also by round pair.
- **Table 6** (:data:`TABLE6_COLUMNS`) - judge-score summaries per component (role reasoning,
  role opinion, final report; the case-level criteria 9 and 10 each on their own).
- **Table 7** (:data:`TABLE7_COLUMNS`) - final-report quality next to generation tokens per case.
- **Table 8** (:data:`TABLE8_COLUMNS`) - criterion profiles: per criterion 1-8, the final report's
  mean vs the primary role's reasoning and opinion means, and the differences.
- **Table 9** (:data:`TABLE9_COLUMNS`) - final-report quality and case complexity by rounds
  completed (1, 2, 3 or more).
- **Table 2**, panel sizes, score distributions, quality by case complexity and the
  structured-minus-free-form difference: :mod:`evolve.report._bench_cohort`.
- **Roles** (:data:`ROLES_COLUMNS`) - exact role labels collapsed into specialty categories by
  :func:`harmonise_role` (used by Table 4).
- **Physician-anchored means** - when the bench was judged with a judge file (``bench judge
  --guidance RUN_OR_JUDGE_JSON``): per criterion and system the raw judge mean beside the
  prediction-powered estimate of the physicians' mean anchored on the judge file's rated
  validation targets, and the same for differences between systems, with the assumption they
  rest on and refusals in words: :mod:`evolve.report._bench_anchored`.

**Intervals.** Every share and mean carries a 95% percentile interval from a case-clustered
bootstrap (the case, i.e. the DOI, is the resampling unit; B. Efron & R. J. Tibshirani 1993,
ch. 13; C. A. Field & A. H. Welsh 2007). Within one group (a model x condition x topology, its
pooled ``all`` row, or a Table 9 rounds group), each replicate draws as many cases as the group
has, uniformly with replacement, keeps *every* observation of each drawn case (a case drawn
twice counts twice; several models' pipelines of one case move together) and recomputes the
statistic; the interval is the 2.5% and 97.5% quantiles of the replicates where the statistic
is defined (a replicate that draws no observation of it, e.g. no no-vote for a transition rate,
is left out). Cases are ordered by id and drawn from a ``numpy.random.default_rng(seed)``
stream, so for a plain mean the replicates are exactly those :func:`evolve.stats.cluster_bootstrap`
draws with the same seed; ratios and differences (tokens per quality point, final minus role)
use the same drawn cases for both parts. Groups are resampled separately: an interval describes
one row, not the difference between two rows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import ValidationError

from evolve.consilium import CaseRun, harmonise_role, load_run_cases, split_fallbacks
from evolve.errors import DataError, RunError
from evolve.markdown import format_interval, md_code, md_inline
from evolve.outputs import BENCH_REPORT_VERSION, BenchReport, Table3Row, Table4Row, Table6Row, Table7Row, Table8Row, Table9Row
from evolve.records import Record
from evolve.report._bench_anchored import ANCHORED_COLUMNS, DIFFERENCE_COLUMNS, anchored_means, render_anchored
from evolve.report._bench_cohort import (
    COMPLEXITY_COLUMNS,
    DISTRIBUTION_COLUMNS,
    FORMAT_COLUMNS,
    PANELS_COLUMNS,
    TABLE2_COLUMNS,
    complexity_table,
    distribution_table,
    format_table,
    panels_table,
    render_cohort,
    table2,
)
from evolve.report._frames import rows_by
from evolve.report._pages import bench_html
from evolve.report._settings import ReportSettings, report_settings
from evolve.report._usage import prefix_cached_share, render_prefix_share, render_usage, usage_report
from evolve.runs import BenchFolder
from evolve.stats import ClusterMeans, Interval

__all__ = [
    "BENCH_REPORT_VERSION",
    "JUDGE_SCORE_COLUMNS",
    "ROLES_COLUMNS",
    "TABLE3_COLUMNS",
    "TABLE4_COLUMNS",
    "TABLE6_COLUMNS",
    "TABLE7_COLUMNS",
    "TABLE8_COLUMNS",
    "TABLE9_COLUMNS",
    "build_bench_report",
    "harmonise_role",
    "load_bench_run",
    "render_bench_markdown",
    "write_bench_report",
]

CONFIDENCE = 0.95
ALL = "all"
"""Value of ``model`` (and of ``condition`` in Table 9) on rows pooled over that column."""

JUDGE_SCORE_COLUMNS = [
    "case_id", "model", "condition", "topology", "component", "role", "criterion", "number",
    "repeat", "seed", "outcome", "score", "guidance_id", "rubric_version", "prompt_hash",
    "prompt_tokens", "completion_tokens", "cached", "rationale", "cached_prompt_tokens",
]
"""Columns of ``judge_scores.csv`` (the runner's output); the report needs those in
:data:`_REQUIRED_SCORE_COLUMNS` and ignores the rest."""

_REQUIRED_SCORE_COLUMNS = ["case_id", "model", "condition", "component", "role", "criterion", "number", "outcome", "score"]
_OUTCOMES = ("score", "not_evaluable", "model_failure")
_COMPONENTS = ("reasoning", "opinion", "final", "case")
_OUTPUT_KEY = ["case_id", "model", "condition", "topology"]
_GROUP_KEY = ["model", "condition", "topology"]
_STOP_REASONS = ("consensus", "no_substantive_change", "repeated_report", "max_rounds", "failure")
_QUALITY_CRITERIA = range(1, 9)
_PANEL, _COMPLEXITY = 9, 10


def _with_ci(*names: str) -> list[str]:
    return [c for n in names for c in (n, f"{n}_low", f"{n}_high")]


TABLE3_COLUMNS = [
    *_GROUP_KEY, "n_pipelines", "n_cases", "n_completed",
    *_with_ci("first_round_consensus_share", "consensus_share", "mean_rounds", "max_rounds_share", "failure_share"),
    *(f"stop_{r}" for r in _STOP_REASONS),
]
"""Columns of ``table3.csv``. Shares and the mean are over completed (non-failed) pipelines,
except ``failure_share`` (over all pipelines); ``stop_*`` are counts over all pipelines."""

TABLE4_COLUMNS = [
    *_GROUP_KEY, "role", "rounds", "n_pipelines", "n_transitions",
    "yes_yes", "yes_no", "no_yes", "no_no",
    *_with_ci("yes_yes_share", "yes_no_share", "no_yes_share", "no_no_share", "dissent_resolved_share", "assent_lost_share"),
]
"""Columns of ``table4.csv``. ``role``: a harmonised category or ``all``; ``rounds``: ``all`` or a
round pair such as ``1-2`` (round pairs only on ``role == "all"`` rows). The four ``*_share``
are counts over ``n_transitions``; ``dissent_resolved_share`` = no->yes / (no->yes + no->no),
``assent_lost_share`` = yes->no / (yes->yes + yes->no)."""

TABLE6_COLUMNS = [
    *_GROUP_KEY, "component", "criteria", "n_outputs", "n_calls", "n_numeric", "n_not_evaluable",
    "n_model_failure", "coverage", *_with_ci("mean"), "sd",
]
"""Columns of ``table6.csv``. ``component``: reasoning, opinion, final or case (one row each for
criteria 9 and 10); ``criteria``: the criterion numbers pooled; ``coverage`` = n_numeric / n_calls;
``mean``/``sd`` (population SD) over scored (output, role, criterion) units. Case rows judged once
per case and model (empty condition in ``judge_scores.csv``) have condition and topology ``all``."""

TABLE7_COLUMNS = [
    *_GROUP_KEY, "n_pipelines", "n_scored", *_with_ci("quality", "mean_tokens"),
    "mean_prompt_tokens", "mean_completion_tokens", *_with_ci("tokens_per_point"),
]
"""Columns of ``table7.csv``. ``quality``: mean output-level final score (0-3); tokens are prompt
+ completion tokens of the generation calls of one pipeline; ``tokens_per_point`` =
mean_tokens / quality."""

TABLE8_COLUMNS = [
    *_GROUP_KEY, "number", "criterion",
    "n_final", *_with_ci("final_mean"), "n_reasoning", *_with_ci("reasoning_mean"),
    "n_opinion", *_with_ci("opinion_mean"), *_with_ci("final_minus_reasoning", "final_minus_opinion"),
]
"""Columns of ``table8.csv`` (one row per group and criterion 1-8; empty where the criterion does
not apply to a role component)."""

TABLE9_COLUMNS = [
    "condition", "rounds", "n_outputs", *_with_ci("mean"), "sd", *_with_ci("below_2_share"),
    "n_complexity", *_with_ci("complexity_mean"),
]
"""Columns of ``table9.csv``. ``rounds``: ``1``, ``2`` or ``3+``; ``condition``: ``all`` or one
condition; ``mean``/``sd`` (population) of the output-level final score; ``complexity_mean``:
criterion 10 (not part of the quality mean)."""

ROLES_COLUMNS = ["category", "n_exact_labels", "n_assignments", "n_primary", "exact_labels"]
"""Columns of ``roles.csv`` (one row per harmonised category; ``exact_labels`` joined by ``"; "``)."""


# -- loading ----------------------------------------------------------------------------------------


def load_bench_run(run_dir: Path) -> tuple[list[CaseRun], pd.DataFrame | None]:
    """Read a bench run folder: every ``cases/*.json`` and, if present, ``judge_scores.csv``.

    Args:
        run_dir: The folder ``evolve bench`` wrote.

    Returns:
        ``(runs, scores)``: the :class:`~evolve.consilium.CaseRun` artifacts sorted by file name,
        and the judge scores (one row per call outcome, ``score`` numeric, ``NaN`` unless the
        outcome is ``score``) or None when ``judge_scores.csv`` does not exist.

    Raises:
        RunError: The folder, ``cases/`` or any case artifact is missing, an artifact is not a
            valid CaseRun, or two artifacts describe the same (case, model, condition, topology).
        DataError: ``judge_scores.csv`` lacks a required column or holds an unknown outcome or
            component, or a score outside 0-3.
    """
    run_dir = Path(run_dir)
    cases_dir = run_dir / "cases"
    if not run_dir.is_dir():
        raise RunError(f"{run_dir} does not exist; pass the folder `evolve bench` wrote (it holds cases/).")
    if not cases_dir.is_dir():
        raise RunError(
            f"{run_dir} is not a bench run: it has no cases/ folder. Pass the folder `evolve bench` wrote "
            "(cases/<case>.json, judge_scores.csv), not a calibration run or the cases/ folder itself."
        )
    files = sorted(cases_dir.glob("*.json"))
    if not files:
        raise RunError(f"{cases_dir} holds no case artifacts (*.json); run `evolve bench` into {run_dir} first.")
    runs: list[CaseRun] = []
    seen: dict[tuple, Path] = {}
    for path in files:
        try:
            run = CaseRun.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "(file)"
            raise RunError(
                f"{path}: not a CaseRun artifact ({loc}: {first['msg']}); re-run that case with `evolve bench`, "
                "or move the file out of cases/."
            ) from exc
        key = (run.case_id, run.model, run.condition, run.topology)
        if key in seen:
            raise RunError(
                f"{path} and {seen[key]} both hold case {run.case_id!r}, model {run.model!r}, {run.condition}, "
                f"{run.topology}; keep one of them."
            )
        seen[key] = path
        runs.append(run)
    scores = _read_scores(BenchFolder(run_dir))
    return runs, scores


def _read_scores(folder: BenchFolder) -> pd.DataFrame | None:
    frame = folder.read_frame(folder.JUDGE_SCORES, optional=True, dtype=str, keep_default_na=False)
    if frame is None:
        return None
    path = folder / folder.JUDGE_SCORES
    missing = [c for c in _REQUIRED_SCORE_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(
            f"{path}: columns {missing} are missing; this is not a judge_scores.csv written by `evolve bench` "
            f"(expected {JUDGE_SCORE_COLUMNS})."
        )
    if "topology" not in frame.columns:
        frame["topology"] = "single"

    def fail(mask: pd.Series, what: str, fix: str) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask.to_numpy())[0])
            raise DataError(f"{path}: row {i + 2}: {what} {frame.iloc[i][what.split()[0]]!r}; {fix}")

    fail(~frame["outcome"].isin(_OUTCOMES), "outcome", f"use one of {list(_OUTCOMES)}.")
    fail(~frame["component"].isin(_COMPONENTS), "component", f"use one of {list(_COMPONENTS)}.")
    # case-level rows (the panel) are judged once per case, model and panel and leave the
    # condition empty; the single-model panel's leave the topology empty too (it serves every
    # pipeline of a run from before n+1 had its own panel), the n+1 panel's say n+1
    case_wide = (frame["component"] == "case") & (frame["condition"] == "")
    fail((frame["condition"] == "") & ~case_wide, "condition",
         "only 'case' rows (judged once per case and model) may leave the condition empty.")
    frame.loc[case_wide, "condition"] = ALL
    frame.loc[case_wide & (frame["topology"] == ""), "topology"] = ALL
    frame["topology"] = frame["topology"].replace("", "single")
    number = pd.to_numeric(frame["number"], errors="coerce")
    fail(number.isna(), "number", "give the rubric criterion number (1-10).")
    frame["number"] = number.astype(int)
    score = pd.to_numeric(frame["score"].where(frame["outcome"] == "score"), errors="coerce")
    bad = (frame["outcome"] == "score") & ~score.isin([0, 1, 2, 3])
    fail(bad, "score", "a 'score' outcome needs an integer score 0-3.")
    frame["score"] = score.astype(float)
    return frame


# -- case-clustered bootstrap ---------------------------------------------------------------------


def _put(row: dict, name: str, iv: Interval) -> None:
    row[name], row[f"{name}_low"], row[f"{name}_high"] = iv.estimate, iv.low, iv.high


def _mean_into(row: dict, name: str, rs: ClusterMeans, frame: pd.DataFrame, column: str) -> tuple[float, np.ndarray]:
    est, reps, n = rs.mean(frame["case_id"].to_numpy(dtype=object), frame[column].to_numpy(dtype=np.float64))
    _put(row, name, rs.interval(est, reps, n))
    return est, reps


def _groups(frame: pd.DataFrame, pooled: bool) -> Iterator[tuple[dict, pd.DataFrame]]:
    """Rows per (model, condition, topology), then - with more than one model - pooled over models."""
    for key, sub in frame.groupby(_GROUP_KEY, sort=True):
        yield dict(zip(_GROUP_KEY, key)), sub
    if pooled and frame["model"].nunique() > 1:
        for (condition, topology), sub in frame.groupby(["condition", "topology"], sort=True):
            yield {"model": ALL, "condition": condition, "topology": topology}, sub


def _n_outputs(frame: pd.DataFrame) -> int:
    """Distinct outputs (pipelines: case, model, condition, topology) among the rows of ``frame``."""
    return len(set(zip(*(frame[k].tolist() for k in _OUTPUT_KEY), strict=True)))


def _in_group(frame: pd.DataFrame, key: dict) -> pd.Series:
    """Rows of ``frame`` in the group ``key`` (``model == "all"`` matches every model)."""
    mask = frame["condition"].eq(key["condition"]) & frame["topology"].eq(key["topology"])
    return mask if key["model"] == ALL else mask & frame["model"].eq(key["model"])


# -- frames from the artifacts --------------------------------------------------------------------


def _pipelines(runs: Sequence[CaseRun]) -> pd.DataFrame:
    rows = []
    for r in runs:
        gen = [c for c in r.calls if c.stage != "judge"]
        primary = next((role.name for role in r.roles if role.primary), "")
        rows.append({
            "case_id": r.case_id, "model": r.model, "condition": r.condition, "topology": r.topology,
            "stop_reason": r.stop_reason, "failed": r.stop_reason == "failure",
            "rounds_completed": r.rounds_completed, "consensus": r.consensus,
            "first_round_consensus": r.first_round_consensus, "primary_role": primary,
            "prompt_tokens": sum(c.prompt_tokens for c in gen), "completion_tokens": sum(c.completion_tokens for c in gen),
        })
    frame = pd.DataFrame(rows)
    frame["tokens"] = frame["prompt_tokens"] + frame["completion_tokens"]
    return frame


def _transitions(runs: Sequence[CaseRun]) -> pd.DataFrame:
    """One row per role per consecutive round pair in which the role voted in both rounds."""
    rows = []
    for r in runs:
        by_round = {rd.number: {v.role: v.vote for v in rd.votes} for rd in r.rounds}
        for number in sorted(by_round):
            nxt = by_round.get(number + 1)
            if nxt is None:
                continue
            for role, vote in by_round[number].items():
                if role in nxt:
                    rows.append({"case_id": r.case_id, "model": r.model, "condition": r.condition,
                                 "topology": r.topology, "role": role, "category": harmonise_role(role),
                                 "from_round": number, "kind": f"{vote}_{nxt[role]}"})
    cols = ["case_id", *_GROUP_KEY, "role", "category", "from_round", "kind"]
    return pd.DataFrame(rows, columns=cols)


def _units(scores: pd.DataFrame) -> pd.DataFrame:
    """Judge outcomes collapsed over repeats: one row per (output, component, role, criterion).

    ``score`` is the mean of the numeric repeats (NaN when none is numeric), so an output with a
    failed repeat is not weighted less or more than one without.
    """
    keys = [*_OUTPUT_KEY, "component", "role", "number"]
    return (scores.groupby(keys, sort=True)
            .agg(criterion=("criterion", "first"), score=("score", "mean"))
            .reset_index())


def _output_quality(units: pd.DataFrame, pipes: pd.DataFrame) -> pd.DataFrame:
    """Per output: mean over criteria 1-8 of the final report's (repeat-averaged) numeric scores,
    and the criterion-10 case-complexity score (a case row judged once per case and model -
    condition ``all`` - applies to every pipeline of that case and model)."""
    final = units[(units["component"] == "final") & units["number"].isin(_QUALITY_CRITERIA) & units["score"].notna()]
    quality = final.groupby(_OUTPUT_KEY, sort=True)["score"].mean().rename("quality")
    cplx = units[(units["component"] == "case") & (units["number"] == _COMPLEXITY) & units["score"].notna()]
    panel = cplx[cplx["condition"] == ALL]
    own = panel[panel["topology"] != ALL].drop(columns=["condition"])  # a topology's own panel (n+1)
    own = own.merge(pipes[_OUTPUT_KEY], on=["case_id", "model", "topology"])
    shared = panel[panel["topology"] == ALL].drop(columns=["condition", "topology"])
    shared = shared.merge(pipes[_OUTPUT_KEY], on=["case_id", "model"])
    shared = shared[~shared.set_index(["case_id", "model", "topology"]).index.isin(
        own.set_index(["case_id", "model", "topology"]).index)]  # an own panel wins over the shared one
    cplx = pd.concat([cplx[cplx["condition"] != ALL], own, shared], ignore_index=True)
    complexity = cplx.groupby(_OUTPUT_KEY, sort=True)["score"].mean().rename("complexity")
    return pd.concat([quality, complexity], axis=1).reset_index()


# -- tables ---------------------------------------------------------------------------------------


def _table3(pipes: pd.DataFrame, n_boot: int, seed: int) -> list[dict]:
    """Paper Table 3: consilium process outcomes per model x condition x topology (and pooled).

    First-round consensus, eventual consensus, rounds completed and round-limit stops describe
    the pipelines that did not fail (a failure has no consilium outcome); ``failure_share`` is
    over every pipeline. Each share/mean has a case-clustered 95% bootstrap interval.
    """
    out = []
    for key, sub in _groups(pipes, pooled=True):
        rs = ClusterMeans(sub["case_id"], n_boot, seed, CONFIDENCE)
        done = sub[~sub["failed"]]
        row = {**key, "n_pipelines": len(sub), "n_cases": sub["case_id"].nunique(), "n_completed": len(done)}
        done = done.assign(first=done["first_round_consensus"].astype(float), eventual=done["consensus"].astype(float),
                           at_limit=(done["stop_reason"] == "max_rounds").astype(float),
                           rounds=done["rounds_completed"].astype(float))
        _mean_into(row, "first_round_consensus_share", rs, done, "first")
        _mean_into(row, "consensus_share", rs, done, "eventual")
        _mean_into(row, "mean_rounds", rs, done, "rounds")
        _mean_into(row, "max_rounds_share", rs, done, "at_limit")
        _mean_into(row, "failure_share", rs, sub.assign(f=sub["failed"].astype(float)), "f")
        for reason in _STOP_REASONS:
            row[f"stop_{reason}"] = int((sub["stop_reason"] == reason).sum())
        out.append(row)
    return out


_KINDS = ("yes_yes", "yes_no", "no_yes", "no_no")


def _transition_row(key: dict, role: str, rounds: str, t: pd.DataFrame, rs: ClusterMeans) -> dict:
    cases = t["case_id"].to_numpy(dtype=object)
    kinds = t["kind"].to_numpy(dtype=object)
    row = {**key, "role": role, "rounds": rounds,
           "n_pipelines": _n_outputs(t), "n_transitions": len(t)}
    is_kind = {kind: (kinds == kind).astype(np.float64) for kind in _KINDS}
    for kind in _KINDS:
        row[kind] = int(is_kind[kind].sum())
    for kind in _KINDS:
        _put(row, f"{kind}_share", rs.interval(*rs.mean(cases, is_kind[kind])))
    from_no = is_kind["no_yes"] + is_kind["no_no"] > 0
    _put(row, "dissent_resolved_share", rs.interval(*rs.mean(cases[from_no], is_kind["no_yes"][from_no])))
    from_yes = is_kind["yes_yes"] + is_kind["yes_no"] > 0
    _put(row, "assent_lost_share", rs.interval(*rs.mean(cases[from_yes], is_kind["yes_no"][from_yes])))
    return row


def _table4(pipes: pd.DataFrame, trans: pd.DataFrame, n_boot: int, seed: int) -> list[dict]:
    """Paper Table 4: role-level vote transitions between round r and r+1 (never r and r+2).

    A transition is one role's pair of votes in two consecutive rounds of one consilium, so only
    consilia that reached a second round contribute. Rows: every transition (``role == "all"``,
    also split by round pair) and each harmonised role category. Shares are over the row's
    transitions, with intervals from resampling the group's cases.
    """
    out = []
    for key, sub in _groups(pipes, pooled=True):
        rs = ClusterMeans(sub["case_id"], n_boot, seed, CONFIDENCE)
        t = trans[_in_group(trans, key)]
        if t.empty:
            continue
        out.append(_transition_row(key, ALL, ALL, t, rs))
        for first in sorted(t["from_round"].unique()):
            out.append(_transition_row(key, ALL, f"{first}-{first + 1}", t[t["from_round"] == first], rs))
        for category in sorted(t["category"].unique()):
            out.append(_transition_row(key, category, ALL, t[t["category"] == category], rs))
    return out


def _criteria_label(numbers: Iterable[int]) -> str:
    return ",".join(str(n) for n in sorted({int(x) for x in numbers}))


def _table6(scores: pd.DataFrame, units: pd.DataFrame, n_boot: int, seed: int) -> list[dict]:
    """Paper Table 6: judge-score summaries per component, on the 0-3 scale.

    Counts are over judge calls (rows of ``judge_scores.csv``); the mean and population SD are
    over (output, role, criterion) units with at least one numeric repeat (repeats averaged
    first). Not-evaluable outcomes and model failures are counted and never enter a mean.
    Criteria 9 (panel adequacy) and 10 (case complexity) get a row each.
    """
    parts = [("reasoning", "reasoning", _QUALITY_CRITERIA), ("opinion", "opinion", _QUALITY_CRITERIA),
             ("final", "final", _QUALITY_CRITERIA), ("case", "case", (_PANEL,)), ("case", "case", (_COMPLEXITY,))]
    out = []
    for key, sub in _groups(scores, pooled=True):
        rs = ClusterMeans(sub["case_id"], n_boot, seed, CONFIDENCE)
        u_sub = units[_in_group(units, key)]
        for component, comp, numbers in parts:
            calls = sub[_part(sub, comp, numbers)]
            if calls.empty:
                continue
            u = u_sub[_part(u_sub, comp, numbers)]
            n_numeric = int((calls["outcome"] == "score").sum())
            row = {**key, "component": component, "criteria": _criteria_label(calls["number"]),
                   "n_outputs": _n_outputs(calls), "n_calls": len(calls),
                   "n_numeric": n_numeric, "n_not_evaluable": int((calls["outcome"] == "not_evaluable").sum()),
                   "n_model_failure": int((calls["outcome"] == "model_failure").sum()),
                   "coverage": n_numeric / len(calls)}
            _mean_into(row, "mean", rs, u, "score")
            numeric = u["score"].dropna()
            row["sd"] = float(numeric.std(ddof=0)) if len(numeric) else math.nan
            out.append(row)
    return out


def _part(frame: pd.DataFrame, component: str, numbers: Sequence[int]) -> np.ndarray:
    """Which rows of ``frame`` judge ``component`` on one of the criteria ``numbers`` (a numpy
    mask: five of these per group, where pandas comparisons cost more than the rows)."""
    return (frame["component"].to_numpy() == component) & np.isin(frame["number"].to_numpy(), numbers)


def _table7(pipes: pd.DataFrame, quality: pd.DataFrame | None, n_boot: int, seed: int) -> list[dict]:
    """Paper Table 7: final-report quality next to the tokens one pipeline used.

    ``quality`` is the mean over scored outputs of the output-level final score (0-3);
    tokens are prompt + completion tokens summed over the pipeline's generation calls (every
    stage except ``judge``; calls answered from the cache keep the tokens they reported), averaged
    over all pipelines of the group, failed ones included. ``tokens_per_point`` divides the two
    means; its interval divides them within each replicate (same drawn cases).
    """
    out = []
    merged = pipes if quality is None else pipes.merge(quality, on=_OUTPUT_KEY, how="left")
    for key, sub in _groups(merged, pooled=True):
        rs = ClusterMeans(sub["case_id"], n_boot, seed, CONFIDENCE)
        row = {**key, "n_pipelines": len(sub)}
        t_est, t_reps = _mean_into(row, "mean_tokens", rs, sub, "tokens")
        row["mean_prompt_tokens"] = float(sub["prompt_tokens"].mean())
        row["mean_completion_tokens"] = float(sub["completion_tokens"].mean())
        if quality is None:
            row["n_scored"] = 0
            _put(row, "quality", rs.interval(math.nan, np.full(n_boot, math.nan), 0))
            _put(row, "tokens_per_point", rs.interval(math.nan, np.full(n_boot, math.nan), 0))
        else:
            row["n_scored"] = int(sub["quality"].notna().sum())
            q_est, q_reps = _mean_into(row, "quality", rs, sub, "quality")
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = t_est / q_est if q_est else math.nan
                reps = t_reps / q_reps
            reps[~np.isfinite(reps)] = np.nan
            _put(row, "tokens_per_point", rs.interval(ratio, reps, row["n_scored"]))
        out.append(row)
    return out


def _table8(units: pd.DataFrame, n_boot: int, seed: int) -> list[dict]:
    """Paper Table 8: per criterion 1-8, the final report's mean vs the primary role's means.

    Means are over outputs (repeats averaged first); a role component's cell is empty where
    the rubric does not apply the criterion to it. ``final_minus_*`` is the difference of the
    two (unpaired) means; its interval takes the difference within each replicate.
    """
    names = units.groupby("number")["criterion"].first().to_dict()
    out = []
    comps = ("final", "reasoning", "opinion")
    for key, sub in _groups(units[units["component"].isin(comps)], pooled=True):
        rs = ClusterMeans(sub["case_id"], n_boot, seed, CONFIDENCE)
        cells = rows_by(sub, ["component", "number"])
        for number in _QUALITY_CRITERIA:
            row = {**key, "number": number, "criterion": names.get(number, "")}
            est, reps = {}, {}
            for comp in comps:
                u = cells(comp, number)
                row[f"n_{comp}"] = int(u["score"].notna().sum())
                est[comp], reps[comp] = _mean_into(row, f"{comp}_mean", rs, u, "score")
            for comp in ("reasoning", "opinion"):
                n = min(row["n_final"], row[f"n_{comp}"])
                _put(row, f"final_minus_{comp}",
                     rs.interval(est["final"] - est[comp], reps["final"] - reps[comp], n))
            if row["n_final"] or row["n_reasoning"] or row["n_opinion"]:
                out.append(row)
    return out


def _rounds_group(n: int) -> str:
    return "3+" if n >= 3 else str(n)


def _table9(pipes: pd.DataFrame, quality: pd.DataFrame, n_boot: int, seed: int) -> list[dict]:
    """Paper Table 9: output-level final scores and case complexity by rounds completed.

    Groups: 1, 2 and 3+ completed rounds (4 and 5 are rare and pooled into 3+), over every model
    and condition and per condition. Per group: outputs, mean and population SD of the
    output-level mean over criteria 1-8 of the final report, the share below 2, and the mean
    criterion-10 score (not part of the quality mean). Outputs with no completed round are left out.
    """
    outputs = pipes.merge(quality, on=_OUTPUT_KEY, how="inner")
    outputs = outputs[outputs["quality"].notna() & (outputs["rounds_completed"] >= 1)]
    outputs = outputs.assign(rounds=outputs["rounds_completed"].map(_rounds_group),
                             below=(outputs["quality"] < 2).astype(float))
    scopes = [(ALL, outputs)] + ([(c, s) for c, s in outputs.groupby("condition", sort=True)]
                                 if outputs["condition"].nunique() > 1 else [])
    out = []
    for condition, scope in scopes:
        for rounds in ("1", "2", "3+"):
            sub = scope[scope["rounds"] == rounds]
            rs = ClusterMeans(sub["case_id"], n_boot, seed, CONFIDENCE)
            row = {"condition": condition, "rounds": rounds, "n_outputs": len(sub)}
            _mean_into(row, "mean", rs, sub, "quality")
            row["sd"] = float(sub["quality"].std(ddof=0)) if len(sub) else math.nan
            _mean_into(row, "below_2_share", rs, sub, "below")
            row["n_complexity"] = int(sub["complexity"].notna().sum())
            _mean_into(row, "complexity_mean", rs, sub, "complexity")
            out.append(row)
    return out


def _roles(runs: Sequence[CaseRun]) -> dict:
    """Exact labels and harmonised categories over distinct panels (a panel is reused by conditions)."""
    panels: dict = {}
    for r in runs:
        panels.setdefault((r.case_id, r.model, r.topology, tuple((p.name, p.primary) for p in r.roles)), r.roles)
    labels: dict[str, dict] = {}
    for roles in panels.values():
        for p in roles:
            entry = labels.setdefault(p.name, {"label": p.name, "category": harmonise_role(p.name),
                                               "n_assignments": 0, "n_primary": 0})
            entry["n_assignments"] += 1
            entry["n_primary"] += int(p.primary)
    cats: dict[str, dict] = {}
    for e in sorted(labels.values(), key=lambda e: e["label"]):
        c = cats.setdefault(e["category"], {"category": e["category"], "n_exact_labels": 0, "n_assignments": 0,
                                            "n_primary": 0, "exact_labels": []})
        c["n_exact_labels"] += 1
        c["n_assignments"] += e["n_assignments"]
        c["n_primary"] += e["n_primary"]
        c["exact_labels"].append(e["label"])
    categories = sorted(cats.values(), key=lambda c: (-c["n_assignments"], c["category"]))
    for c in categories:
        c["exact_labels"] = "; ".join(c["exact_labels"])
    return {
        "n_panels": len(panels),
        "n_assignments": sum(e["n_assignments"] for e in labels.values()),
        "n_exact_labels": len(labels),
        "n_categories": len(cats),
        "n_collapsed": len(labels) - len(cats),
        "categories": categories,
        "labels": sorted(labels.values(), key=lambda e: (e["category"], e["label"])),
    }


# -- report ---------------------------------------------------------------------------------------


def _free_form_split(runs: Sequence[CaseRun], run_dir: Path) -> dict:
    """How many free-form opinions were split on their "FINAL OPINION:" line and how many fell
    back, and whether the judge scored free-form role components (``judge.json``)."""
    done = [r for r in runs if r.condition == "free-form" and r.stop_reason != "failure" and r.final]
    fallbacks = [(r, role) for r in done for role, _ in split_fallbacks(r)]
    primary = {id(r): next((p.name for p in r.roles if p.primary), "") for r in done}
    try:
        judged = json.loads((run_dir / BenchFolder.JUDGE).read_text(encoding="utf-8")).get("free_form_roles", True)
    except (OSError, ValueError):
        judged = None  # not judged (or judge.json unreadable)
    return {"opinions": sum(len(r.opinions) for r in done), "fallbacks": len(fallbacks),
            "primary_opinions": len(done), "primary_fallbacks": sum(role == primary[id(r)] for r, role in fallbacks),
            "roles_judged": judged}


def _clean(x):
    """A report as JSON-able values: numpy scalars as Python ones, NaN and infinities as None."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def build_bench_report(run_dir: Path, *, n_boot: int = 2000, seed: int = 0) -> BenchReport:
    """Compute every benchmark table of a bench run folder (no model calls).

    Args:
        run_dir: The folder ``evolve bench`` wrote (``cases/*.json``, optionally
            ``judge_scores.csv``).
        n_boot: Bootstrap replicates per interval (>= 1).
        seed: Seed of the case-clustered bootstrap; the same seed and artifacts give the same
            intervals.

    Returns:
        The report (:class:`~evolve.outputs.BenchReport`, what ``bench_report.json`` holds;
        ``NaN`` as ``None``): ``version``, ``run_dir``, ``bootstrap`` (method,
        replicates, seed, confidence, cluster), ``counts`` (artifacts, cases, models, conditions,
        topologies, judge rows), ``judged`` (whether ``judge_scores.csv`` exists), ``notes``
        (rows left out and why), ``tables`` (``table3`` ... ``table9``: lists of records with the
        columns of :data:`TABLE3_COLUMNS` ...; the judge-based ones empty when not judged) and
        ``roles`` (the harmonisation: totals, ``categories`` rows of :data:`ROLES_COLUMNS`, and
        ``labels``, one record per exact label with its category) and ``usage`` (every call
        of every process of the run, from the journal: :func:`~evolve.report.usage_report`) and
        ``free_form_split`` (free-form opinions, split fallbacks, whether their role components
        were judged) and ``anchored`` (None when not judged): the physician-anchored section of
        :func:`~evolve.report._bench_anchored.anchored_means` - ``available``, ``reason`` (why
        not, in words), ``judge_file`` (path, sha256, run_id, judge_model, copy_name),
        ``assumption`` (the sentence shown with the anchored means), ``difference_assumption``
        (the one shown with the anchored differences), ``confidence``,
        ``min_rated_cases``, ``criteria`` (per criterion of the judge file: criterion, number,
        name, guidance, n_rated, n_rated_cases, rated_judge_mean, rated_physician_mean,
        refused), ``systems`` (per criterion and model x condition x topology, models pooled as
        ``all``: the raw judge mean ``judge_mean``/``_low``/``_high`` and the physician-anchored
        ``anchored_mean``/``_low``/``_high`` with ``lam``, ``effective_n`` and ``refused``;
        columns :data:`ANCHORED_COLUMNS`), ``differences`` (structured - free-form, n+1 - single
        and each pair of models: ``judge_difference*`` and ``anchored_difference*``; columns
        :data:`DIFFERENCE_COLUMNS`) and ``notes``.

    Raises:
        ValueError: ``n_boot`` < 1.
        RunError: Not a bench run folder, or a broken case artifact (see :func:`load_bench_run`).
        DataError: A malformed ``judge_scores.csv``.
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    run_dir = Path(run_dir)
    runs, scores = load_bench_run(run_dir)
    pipes = _pipelines(runs)
    trans = _transitions(runs)
    notes: list[str] = []
    tables: dict[str, list[dict]] = {"table3": _table3(pipes, n_boot, seed), "table4": _table4(pipes, trans, n_boot, seed)}
    quality = None
    units: pd.DataFrame | None = None
    anchored = None
    if scores is not None:
        keys = pipes[_OUTPUT_KEY + ["primary_role"]]
        joined = scores.merge(keys, on=_OUTPUT_KEY, how="left", indicator=True)
        case_wide = joined["condition"] == ALL
        panels = set(zip(pipes["case_id"], pipes["model"]))
        known_panel = pd.Series([k in panels for k in zip(joined["case_id"], joined["model"])], index=joined.index)
        orphan = (joined["_merge"] == "left_only") & ~(case_wide & known_panel)
        if orphan.any():
            notes.append(f"{int(orphan.sum())} judge_scores.csv rows name no case artifact and are left out.")
        role_level = joined["component"].isin(["reasoning", "opinion"])
        other_role = role_level & joined["primary_role"].ne("") & joined["role"].ne(joined["primary_role"]) & ~orphan
        if other_role.any():
            notes.append(f"{int(other_role.sum())} role-level judge rows are not the primary role's and are left out "
                         "(Tables 6 and 8 describe the primary role).")
        scores = joined[~orphan & ~other_role].drop(columns=["_merge", "primary_role"]).reset_index(drop=True)
        units = _units(scores)
        quality = _output_quality(units, pipes)
        tables["table6"] = _table6(scores, units, n_boot, seed)
        tables["table7"] = _table7(pipes, quality, n_boot, seed)
        tables["table8"] = _table8(units, n_boot, seed)
        tables["table9"] = _table9(pipes, quality, n_boot, seed)
        tables["distribution"] = distribution_table(units)
        tables["complexity"] = complexity_table(pipes[_OUTPUT_KEY].merge(quality, on=_OUTPUT_KEY), n_boot, seed)
        tables["format"] = format_table(units, n_boot, seed)
        anchored = anchored_means(run_dir, units, scores, n_boot=n_boot, seed=seed)
        no_rounds = pipes.merge(quality, on=_OUTPUT_KEY)
        n_zero = int((no_rounds["rounds_completed"] < 1).sum())
        if n_zero:
            notes.append(f"{n_zero} judged outputs completed no review round and are not in Table 9.")
    else:
        tables.update(table6=[], table7=_table7(pipes, None, n_boot, seed), table8=[], table9=[], distribution=[],
                      complexity=[], format=[])
    try:
        cases = load_run_cases(run_dir)
    except RunError as exc:
        cases = []
        notes.append(f"Table 2 has no case texts: {exc}")
    tables["table2"] = [table2(cases, units, n_boot, seed)]
    tables["panels"] = panels_table(runs)
    report = {
        "version": BENCH_REPORT_VERSION,
        "run_dir": str(run_dir),
        "bootstrap": {"method": "case-clustered percentile bootstrap", "n_boot": n_boot, "seed": seed,
                      "confidence": CONFIDENCE, "cluster": "case_id"},
        "counts": {
            "case_artifacts": len(runs), "cases": int(pipes["case_id"].nunique()),
            "models": sorted(pipes["model"].unique().tolist()),
            "conditions": sorted(pipes["condition"].unique().tolist()),
            "topologies": sorted(pipes["topology"].unique().tolist()),
            "failed_pipelines": int(pipes["failed"].sum()),
            "judge_rows": 0 if scores is None else len(scores),
        },
        "judged": scores is not None,
        "notes": notes,
        "tables": tables,
        "roles": _roles(runs),
        "free_form_split": _free_form_split(runs, run_dir),
        "pipelines": _pipeline_records(pipes, quality),
        "anchored": anchored,
        "usage": usage_report(BenchFolder(run_dir).journal()),
        "prefix_cached_share": _prefix_share(BenchFolder(run_dir)),
    }
    return BenchReport.model_validate(_clean(report))  # the file always matches its schema


def _prefix_share(folder: BenchFolder) -> float | None:
    """:func:`~evolve.report.prefix_cached_share` over every row of ``judge_scores.csv`` (failed
    calls included: their prompt was sent); None without the file."""
    frame = folder.read_frame(folder.JUDGE_SCORES, optional=True, dtype=str, keep_default_na=False)
    return None if frame is None else prefix_cached_share(frame)


def _pipeline_records(pipes: pd.DataFrame, quality: pd.DataFrame | None) -> list[dict]:
    """One record per pipeline for the figures: its key, stop reason, rounds, consensus,
    generation tokens and final-report quality (None when not judged)."""
    cols = [*_OUTPUT_KEY, "stop_reason", "rounds_completed", "consensus", "tokens"]
    frame = pipes[cols] if quality is None else pipes[cols].merge(quality[[*_OUTPUT_KEY, "quality"]], on=_OUTPUT_KEY, how="left")
    if "quality" not in frame:
        frame = frame.assign(quality=None)
    return frame.to_dict(orient="records")


# -- markdown -------------------------------------------------------------------------------------


def _num(x: float | None, digits: int = 3) -> str:
    return format_interval(x, None, None, digits=digits)


def _ci(estimate: float | None, low: float | None, high: float | None, digits: int = 3, scale: float = 1.0,
        suffix: str = "") -> str:
    """``estimate [low, high]`` of one interval field of a row (its three values)."""
    return format_interval(estimate, low, high, digits=digits, scale=scale, suffix=suffix)


def _pct(estimate: float | None, low: float | None, high: float | None) -> str:
    return _ci(estimate, low, high, digits=1, scale=100.0, suffix="%")


def _ktok(estimate: float | None, low: float | None, high: float | None) -> str:
    return _ci(estimate, low, high, digits=1, scale=1e-3, suffix="k")


def _group(row: Table3Row | Table4Row | Table6Row | Table7Row | Table8Row) -> str:
    return f"{md_inline(row.model)} | {md_inline(row.condition)} | {md_inline(row.topology)}"


def _not_judged(title: str) -> list[str]:
    return [title, "", "Not judged yet: this run has no `judge_scores.csv`.", ""]


def _notes(report: BenchReport) -> list[str]:
    """The report's notes, and one on free-form opinions split without a 'FINAL OPINION:' line."""
    split, notes = report.free_form_split, list(report.notes)
    if split is not None and split.fallbacks:
        judged = {True: "their reasoning and opinion were judged as overlapping components",
                  False: "free-form role components were not judged (structured ones only, as in the paper)",
                  None: "not judged yet"}[split.roles_judged]
        notes.append(f"{split.fallbacks} of {split.opinions} free-form role opinions ({split.primary_fallbacks} of "
                     f"{split.primary_opinions} primary-role ones) have no 'FINAL OPINION:' line: reasoning = the whole "
                     f"text, opinion = its last paragraph; {judged}.")
    return notes


def render_bench_markdown(report: BenchReport) -> str:
    """Render :func:`build_bench_report` output as Markdown, one section per table."""
    b, c, t = report.bootstrap, report.counts, report.tables
    out = [
        "# Benchmark report",
        "",
        (f"Run {md_code(report.run_dir)}: {c.case_artifacts} pipelines over {c.cases} cases; models "
         f"{', '.join(map(md_inline, c.models))}; conditions {', '.join(map(md_inline, c.conditions))}; "
         f"topologies {', '.join(map(md_inline, c.topologies))}; "
         f"{c.failed_pipelines} failed pipelines; {c.judge_rows} judge rows used."),
        "",
        (f"Brackets: 95% percentile intervals from a case-clustered bootstrap ({b.n_boot} replicates, seed {b.seed}): "
         "whole cases (DOIs) are drawn with replacement and keep all their observations. "
         "`all` rows pool the models. Every number is recomputable from `cases/*.json` and `judge_scores.csv`."),
        "",
    ]
    notes = _notes(report)
    out += [f"- Note: {md_inline(n)}" for n in notes] + ([""] if notes else [])
    out += render_cohort(t, report.judged)
    out += _render_table3(t.table3) + _render_table4(t.table4)
    out += _render_table6(t.table6) if report.judged else _not_judged(TITLE6)
    out += _render_table7(t.table7, report.judged)
    out += _render_table8(t.table8) if report.judged else _not_judged(TITLE8)
    out += _render_table9(t.table9) if report.judged else _not_judged(TITLE9)
    out += render_anchored(report.anchored, report.judged)
    out += _render_roles(report)
    out += render_usage(report.usage)
    out += render_prefix_share(report.prefix_cached_share, "judge_scores.csv")
    return "\n".join(out)


TITLE6 = "## Table 6 — judge scores per component"
TITLE8 = "## Table 8 — criterion profiles, final report vs primary role"
TITLE9 = "## Table 9 — final-report scores by rounds completed"


def _render_table3(rows: list[Table3Row]) -> list[str]:
    out = ["## Table 3 — consilium outcomes", "",
           ("Per model, condition and topology: shares and mean rounds over completed pipelines, failures over all; "
            "stop reasons are counts."), "",
           ("| model | condition | topology | pipelines | first-round consensus | eventual consensus | mean rounds | "
            "max-round stops | failures | stop reasons |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        stops = ", ".join(f"{reason} {n}" for reason, n in r.stops.items() if n)
        out.append(f"| {_group(r)} | {r.n_pipelines} | "
                   f"{_pct(r.first_round_consensus_share, r.first_round_consensus_share_low, r.first_round_consensus_share_high)} | "
                   f"{_pct(r.consensus_share, r.consensus_share_low, r.consensus_share_high)} | "
                   f"{_ci(r.mean_rounds, r.mean_rounds_low, r.mean_rounds_high, 2)} | "
                   f"{_pct(r.max_rounds_share, r.max_rounds_share_low, r.max_rounds_share_high)} | "
                   f"{_pct(r.failure_share, r.failure_share_low, r.failure_share_high)} | {stops} |")
    return [*out, ""]


def _render_table4(rows: list[Table4Row]) -> list[str]:
    out = ["## Table 4 — vote transitions between consecutive rounds", "",
           ("Each role's vote in round r against its vote in round r+1 (consilia that went on to another round); "
            "roles by harmonised category; shares of the row's transitions; "
            "dissent resolved = no→yes among no votes, assent lost = yes→no among yes votes."), "",
           "| model | condition | topology | role | rounds | n | yes→yes | yes→no | no→yes | no→no | dissent resolved | assent lost |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    if not rows:
        out.append("| no consilium went past its first round | | | | | | | | | | | |")
    for r in rows:
        cells = " | ".join(f"{n} ({_pct(*share)})" for _, n, share in r.transitions)
        out.append(f"| {_group(r)} | {md_inline(r.role)} | {r.rounds} | {r.n_transitions} | {cells} | "
                   f"{_pct(r.dissent_resolved_share, r.dissent_resolved_share_low, r.dissent_resolved_share_high)} | "
                   f"{_pct(r.assent_lost_share, r.assent_lost_share_low, r.assent_lost_share_high)} |")
    return [*out, ""]


def _render_table6(rows: list[Table6Row]) -> list[str]:
    out = [TITLE6, "",
           ("Mean (0–3) of numeric judge scores over the component's criteria, repeats averaged first; "
            "not-evaluable and failed calls are counted, never scored as 0; coverage = numeric / calls; "
            "SD is the population SD."), "",
           ("| model | condition | topology | component | criteria | outputs | calls | coverage | not evaluable | "
            "failures | mean | SD |"), "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {_group(r)} | {md_inline(r.component)} | {md_inline(r.criteria)} | {r.n_outputs} | {r.n_calls} | "
                   f"{r.coverage * 100:.1f}% | {r.n_not_evaluable} | {r.n_model_failure} | "
                   f"{_ci(r.mean, r.mean_low, r.mean_high)} | {_num(r.sd)} |")
    return [*out, ""]


def _render_table7(rows: list[Table7Row], judged: bool) -> list[str]:
    out = ["## Table 7 — quality and tokens", "",
           ("Quality = mean over pipelines of the final report's mean numeric score on criteria 1–8; tokens = prompt + "
            "completion tokens of one pipeline's generation calls (judge calls excluded), in thousands, averaged over "
            "all pipelines of the row, failed ones included (their calls were spent)."), "",
           "| model | condition | topology | pipelines | scored | quality | tokens / case | prompt / completion | tokens per quality point |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        quality = _ci(r.quality, r.quality_low, r.quality_high) if judged else "not judged yet"
        out.append(f"| {_group(r)} | {r.n_pipelines} | {r.n_scored} | {quality} | "
                   f"{_ktok(r.mean_tokens, r.mean_tokens_low, r.mean_tokens_high)} | "
                   f"{r.mean_prompt_tokens / 1e3:.1f}k / {r.mean_completion_tokens / 1e3:.1f}k | "
                   f"{_ktok(r.tokens_per_point, r.tokens_per_point_low, r.tokens_per_point_high)} |")
    return [*out, ""]


def _render_table8(rows: list[Table8Row]) -> list[str]:
    out = [TITLE8, "",
           ("Per criterion: mean judge score of the final report and of the primary role's reasoning and opinion "
            "(— where the criterion does not apply), and final minus role on the same resampled cases."), "",
           "| model | condition | topology | # | criterion | final | reasoning | opinion | final − reasoning | final − opinion |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {_group(r)} | {md_inline(r.number)} | {md_inline(r.criterion)} | "
                   f"{_ci(r.final_mean, r.final_mean_low, r.final_mean_high)} | "
                   f"{_ci(r.reasoning_mean, r.reasoning_mean_low, r.reasoning_mean_high)} | "
                   f"{_ci(r.opinion_mean, r.opinion_mean_low, r.opinion_mean_high)} | "
                   f"{_ci(r.final_minus_reasoning, r.final_minus_reasoning_low, r.final_minus_reasoning_high)} | "
                   f"{_ci(r.final_minus_opinion, r.final_minus_opinion_low, r.final_minus_opinion_high)} |")
    return [*out, ""]


def _render_table9(rows: list[Table9Row]) -> list[str]:
    out = [TITLE9, "",
           ("Output-level mean of the final report's numeric scores on criteria 1–8, grouped by review rounds "
            "completed; SD is the population SD; case complexity (criterion 10) is not part of the mean."), "",
           "| condition | rounds | outputs | mean | SD | mean < 2 | case complexity |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {md_inline(r.condition)} | {r.rounds} | {r.n_outputs} | {_ci(r.mean, r.mean_low, r.mean_high)} | "
                   f"{_num(r.sd)} | {_pct(r.below_2_share, r.below_2_share_low, r.below_2_share_high)} | "
                   f"{_ci(r.complexity_mean, r.complexity_mean_low, r.complexity_mean_high)} |")
    return [*out, ""]


def _render_roles(report: BenchReport) -> list[str]:
    roles = report.roles
    out = ["## Role labels — exact vs harmonised", "",
           (f"{roles.n_assignments} role assignments in {roles.n_panels} distinct panels use "
            f"{roles.n_exact_labels} exact labels, harmonised into {roles.n_categories} categories "
            f"({roles.n_collapsed} labels collapsed; lowercase, titles dropped, -ologist → -ology, small synonym table)."), "",
           "| category | exact labels | assignments | primary | labels |", "|---|---|---|---|---|"]
    for r in roles.categories:
        out.append(f"| {md_inline(r.category)} | {r.n_exact_labels} | {r.n_assignments} | {r.n_primary} | "
                   f"{md_inline(r.exact_labels)} |")
    return [*out, ""]


def write_bench_report(run_dir: Path, *, n_boot: int | None = None, seed: int = 0, html: bool = True,
                       settings: ReportSettings | None = None) -> BenchReport:
    """Build the benchmark report and write it into ``run_dir``.

    Files: ``bench_report.json`` (everything :func:`build_bench_report` returns),
    ``bench_report.md`` (each table with a one-line explanation; shares as percentages, 95%
    intervals in brackets), ``table2.csv``, ``table3.csv``, ``table4.csv``, ``table6.csv``,
    ``table7.csv``, ``table8.csv``, ``table9.csv``, ``panels.csv``, ``distribution.csv``,
    ``complexity.csv``, ``format.csv`` (columns :data:`TABLE3_COLUMNS` ... and those of
    :mod:`evolve.report._bench_cohort`; a judge-based table of an unjudged run has its header
    only), ``roles.csv`` (:data:`ROLES_COLUMNS`), ``anchored.csv`` and
    ``anchored_differences.csv`` (the physician-anchored means per system and their
    differences, :data:`~evolve.report._bench_anchored.ANCHORED_COLUMNS` and
    ``DIFFERENCE_COLUMNS``; header only without a judge file) and ``report.html`` (figures,
    then the same tables: :func:`~evolve.report.bench_html`).

    Args:
        run_dir: The bench run folder.
        n_boot: Bootstrap replicates per interval (None: those of ``settings``).
        seed: Bootstrap seed.
        html: Also write ``report.html``.
        settings: Bootstrap replicates and figures (default:
            :meth:`~evolve.report.ReportSettings.from_env`).

    Returns:
        The report (what ``bench_report.json`` holds).

    Raises:
        RunError, DataError, ValueError: As :func:`build_bench_report`.
    """
    run_dir = Path(run_dir)
    folder = BenchFolder(run_dir)
    with folder.exclusive():  # before reading: a run still being written is refused, naming its writer
        settings = report_settings(settings, n_boot)
        report = build_bench_report(run_dir, n_boot=settings.replicates, seed=seed)
        folder.write(folder.REPORT_JSON, report.model_dump_json(indent=2) + "\n")
        markdown = render_bench_markdown(report)
        folder.write(folder.REPORT_MD, markdown)
        if html:
            folder.write(folder.REPORT_HTML, bench_html(report, markdown, figures=settings.figures))
        t, anchored = report.tables, report.anchored
        csvs: dict[str, tuple[Sequence[Record], list[str]]] = {
            "table2.csv": (t.table2, TABLE2_COLUMNS), "table3.csv": (t.table3, TABLE3_COLUMNS),
            "table4.csv": (t.table4, TABLE4_COLUMNS), "table6.csv": (t.table6, TABLE6_COLUMNS),
            "table7.csv": (t.table7, TABLE7_COLUMNS), "table8.csv": (t.table8, TABLE8_COLUMNS),
            "table9.csv": (t.table9, TABLE9_COLUMNS), "panels.csv": (t.panels, PANELS_COLUMNS),
            "distribution.csv": (t.distribution, DISTRIBUTION_COLUMNS), "complexity.csv": (t.complexity, COMPLEXITY_COLUMNS),
            "format.csv": (t.format, FORMAT_COLUMNS), folder.ROLES: (report.roles.categories, ROLES_COLUMNS),
            "anchored.csv": (anchored.systems if anchored else [], ANCHORED_COLUMNS),
            "anchored_differences.csv": (anchored.differences if anchored else [], DIFFERENCE_COLUMNS)}
        for name, (rows, cols) in csvs.items():
            folder.write(name, _csv(rows, cols))
    return report


def _csv(rows: Sequence[Record], columns: list[str]) -> str:
    """``rows`` as CSV text with ``columns`` (header only without rows)."""
    return pd.DataFrame([r.model_dump() for r in rows], columns=columns).to_csv(index=False)
