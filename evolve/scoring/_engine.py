"""Score targets with a calibrated judge: the exact validated prompts, seeds and repeats."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evolve.calibrated import CriterionJudge, JudgeFile, JudgeGuidance
from evolve.data import Target, shorten
from evolve.errors import ConfigError, PackError, RunError
from evolve.judge import Judge, JudgeSettings, derive_seed
from evolve.llm import ChatRequest, Client, limits_sent
from evolve.rubric import Criterion
from evolve.runs import (
    Event,
    NoProgress,
    ProgressHook,
    ScoringFolder,
    check_resumable,
    check_same_settings,
    locks_run,
    on_call,
)
from evolve.scoring._targets import ScoringTargets

__all__ = ["CALL_COLUMNS", "ITEM_COLUMNS", "RATING_COLUMNS", "ScoringCounts", "ScoringResult", "check_scoring_resume",
           "check_statements", "score_targets",
           "scoring_requests"]

CALL_COLUMNS = [
    "criterion", "guidance", "candidate_id", "target_id", "case_id", "component", "repeat", "seed", "outcome",
    "score", "prompt_tokens", "completion_tokens", "cached", "cached_prompt_tokens", "prompt_hash", "rationale",
]
"""``calls.csv``: one row per judge call (``guidance`` is ``winner`` or ``no-guidance``)."""
ITEM_COLUMNS = [
    "criterion", "target_id", "case_id", "component", "model", "condition", "status", "judge", "n_calls", "n_score",
    "n_not_evaluable", "n_failure", "no_guidance", "physician", "n_ratings",
]
"""``items.csv``: one row per (criterion, target). ``status`` is ``scored`` (at least one numeric
repeat), ``not_evaluable`` (none numeric, one declined), ``failed`` (every call failed) or
``excluded`` (the criterion does not apply to the target's component; never judged). ``judge``
is the winner's mean score over its numeric repeats, ``no_guidance`` the same without guidance
(rated targets only), ``physician`` the mean of the numeric ratings. ``model`` and ``condition``
are the target's (a table's ``--column model=...``/``condition=...``; empty when not given), so
items can be grouped by the system that wrote them."""
RATING_COLUMNS = ["case_id", "target_id", "rater_id", "criterion", "score", "not_evaluable"]
STATUSES = ("scored", "failed", "not_evaluable", "excluded")


@dataclass(frozen=True)
class ScoringCounts:
    """Where every (criterion, target) went: ``n_items == n_scored + n_failed + n_not_evaluable + n_excluded``."""

    criterion: str
    n_items: int
    n_scored: int
    n_failed: int
    n_not_evaluable: int
    n_excluded: int


@dataclass(frozen=True)
class ScoringResult:
    """What :func:`score_targets` wrote: the run folder, its per-call and per-item tables, the counts."""

    run_dir: Path
    calls: pd.DataFrame
    items: pd.DataFrame
    counts: dict[str, ScoringCounts]


def chosen_criteria(judge: JudgeFile, criteria: Sequence[str] | None) -> list[Criterion]:
    """The rubric criteria to score: every calibrated one of the judge file, or those asked for.

    Raises:
        ConfigError: An asked criterion the judge file did not calibrate (naming those it did).
    """
    rubric = judge.bundle().rubric
    ids = list(criteria) if criteria else list(judge.criteria)
    unknown = [c for c in ids if c not in judge.criteria]
    if unknown:
        raise ConfigError(f"--criterion {', '.join(unknown)} (Python: criteria=): the judge file {judge.run_id!r} calibrated {list(judge.criteria)} only; "
                          "score those, or calibrate the others first.")
    return [rubric.criterion(c) for c in ids]


def check_statements(judge: JudgeFile, targets: ScoringTargets, chosen: Sequence[Criterion]) -> None:
    """Refuse targets whose statement, or whose case's reference answer, does not match what
    the criterion was calibrated on.

    The judge prompt shows a target's statement (K-QA's gold statement, ExpertQA's claim) when
    it has one, so a criterion calibrated on targets that all had one
    (:attr:`CriterionJudge.statement` ``required``) would judge a target without one with a
    prompt it never validated, and the other way round for ``absent``. The same holds for the
    case's reference answer of a criterion that shows it (:attr:`CriterionJudge.reference`).

    Raises:
        PackError: Naming the criterion, how many targets differ, the first of them, and the fix.
    """
    cases = {c.case_id: c for c in targets.pack.cases}
    for crit in chosen:
        made = judge.criteria[crit.criterion_id]
        mine = [t for t in targets.pack.targets if t.component in crit.components]
        # the text beside the id: a table's derived ids appear nowhere in the table
        _refuse_mismatch(targets.source, crit.criterion_id, made.statement, "target", "statement", "statement",
                         [(t.target_id, t.text, bool(t.statement)) for t in mine], "a column named 'statement'")
        if crit.show_reference:
            used = sorted({t.case_id for t in mine})
            _refuse_mismatch(targets.source, crit.criterion_id, made.reference, "case", "reference answer", "reference",
                             [(c, cases[c].text, bool(cases[c].reference_answer)) for c in used],
                             "a column named 'reference' or 'reference_answer'")


def _refuse_mismatch(source: str, criterion: str, rule: str, kind: str, what: str, field: str,
                     items: list[tuple[str, str, bool]], default_column: str) -> None:
    """Raise when an item has (or lacks) ``what`` against ``rule`` (``required``/``absent``;
    ``either`` checks nothing); ``items`` are ``(id, text, has it)``.

    Raises:
        PackError: How many differ, the first three with their text, and the fix.
    """
    wrong = [(i, text) for i, text, has in items if rule != "either" and has != (rule == "required")]
    if not wrong:
        return
    first = ", ".join(f"{i} {shorten(text, 40)!r}" for i, text in wrong[:3]) + (" ..." if len(wrong) > 3 else "")
    if rule == "required":
        raise PackError(f"{source}: {len(wrong)} {kind}(s) have no {what} ({first}), but criterion {criterion!r} was "
                        f"calibrated on {kind}s that each had one (the judge prompt shows it). Map the column that holds "
                        f"it: --column {field}=COLUMN (Python: columns={{'{field}': COLUMN}}).")
    raise PackError(f"{source}: {len(wrong)} {kind}(s) have a {what} ({first}), but criterion {criterion!r} was "
                    f"calibrated on {kind}s without one, so its prompts never showed one. Drop or rename the table's "
                    f"{field} column ({default_column} is read as one), or leave it unmapped (no --column {field}=...; "
                    f"Python: no '{field}' in columns=).")


def check_scoring_resume(run_dir: Path, config: Mapping[str, Any], resume: bool) -> bool:
    """Whether ``run_dir`` holds a scoring run that ``resume`` continues with ``config`` (reads
    only: :func:`score_targets` and ``evolve judge --plan --resume`` make the same checks).

    Raises:
        RunError: A run there without ``resume``, none with it, another kind of run, another
            endpoint (answers are cached per endpoint) or other settings.
    """
    folder = ScoringFolder(run_dir)
    if not check_resumable(folder.path, folder.CONFIG, resume, what="a scoring run", kind="scoring"):
        return False
    stored, current = folder.read_json(folder.CONFIG), json.loads(json.dumps(dict(config), default=str))
    _refuse_other_endpoint(folder / folder.CONFIG, stored.get("endpoint"), current.get("endpoint"))
    check_same_settings(folder / folder.CONFIG, stored, current, ignore=("run_id", "endpoint"),
                        hint="give the same targets, judge and options")
    return True


def _refuse_other_endpoint(path: Path, stored: Any, current: Any) -> None:
    """Refuse a resume on another endpoint: answers are cached per endpoint (its URL, or its
    replica group's name), so every finished call would be paid again there.

    Raises:
        RunError: Naming the endpoint fields that differ and both ways on.
    """
    if not isinstance(stored, dict) or not isinstance(current, dict):
        return  # a run made before runs recorded their endpoint
    diff = sorted(k for k in set(stored) | set(current) if stored.get(k) != current.get(k))
    if diff:
        shown = "; ".join(f"{k}: {stored.get(k)!r} then, {current.get(k)!r} now" for k in diff)
        raise RunError(f"{path}: this run was scored on another endpoint ({shown}). Answers are cached per endpoint, "
                       "so resuming here would pay every finished call again. Resume with the run's endpoint options "
                       "(the values 'then'), or start a new --run-id.")


@locks_run(lambda *_, run_dir, **__: run_dir)  # one process writes a run folder
def score_targets(
    judge: JudgeFile,
    targets: ScoringTargets,
    *,
    client: Client,
    run_dir: Path,
    config: Mapping[str, Any],
    criteria: Sequence[str] | None = None,
    resume: bool = False,
    model: str | None = None,
    progress: ProgressHook | None = None,
) -> ScoringResult:
    """Score every (criterion, target) with the judge file's winner, as validated (consilium paper: judge calls, calibration).

    Each call is the validation re-scoring's call: the rubric as the run copied it
    (:meth:`JudgeFile.bundle`), the judge settings and the winner's guidance, the seeds
    ``derive_seed(run_seed, "reeval", criterion, r)`` for ``r < repeats``. Scoring a target the
    calibration validated sends the same request, so the response cache answers it. Rated
    targets are also scored with no guidance (the comparison). A target whose component the
    criterion does not apply to is excluded, never judged.

    Writes ``config.json``, ``judge.json``, ``calls.csv``, ``items.csv``, ``ratings.csv`` (rated
    targets) and journal events; the report is written by :func:`evolve.workflows.run_judge`.

    Args:
        judge: The calibrated judge file.
        targets: What to score (:func:`read_targets`).
        client: The model client (its cache makes a resume free).
        run_dir: The scoring run folder.
        config: The run's settings as JSON-like data (``config.json``; compared on resume).
        criteria: Criterion ids (default: every criterion of the judge file).
        resume: Continue the run in ``run_dir`` (finished calls come from the cache).
        model: Model id to send instead of the judge file's (then not the validated judge).
        progress: Progress hook.

    Returns:
        The folder, the tables and the counts per criterion.

    Raises:
        RunError: ``run_dir`` holds a run and ``resume`` is false (or differs in settings).
        ConfigError: An unknown criterion.
        PackError: Targets with or without a statement where the calibration's targets were
            the other way (:func:`check_statements`); nothing is written then.
    """
    folder = ScoringFolder(run_dir)
    chosen = chosen_criteria(judge, criteria)
    check_statements(judge, targets, chosen)
    resuming = check_scoring_resume(folder.path, config, resume)
    folder.path.mkdir(parents=True, exist_ok=True)
    folder.write(folder.CONFIG, json.dumps(dict(config), indent=2, default=str))
    folder.write(folder.JUDGE, judge.model_dump_json(indent=2))
    journal = folder.journal()
    journal.append(Event.RUN_RESUMED if resuming else Event.RUN_STARTED, criteria=[c.criterion_id for c in chosen],
                   targets=len(targets.pack.targets))
    settings: JudgeSettings = judge.judge if model is None else judge.judge.model_copy(update={"model": model})
    bundle = judge.bundle()
    scorer = Judge(bundle.rubric, bundle.protocol, settings, schema_limits=limits_sent(client))
    jobs = _jobs(judge, targets, chosen, scorer)
    progress = progress or NoProgress()
    progress.phase("judging", len(jobs), key="judge", unit="judge calls")
    try:
        results = client.map([j[-1] for j in jobs], on_result=on_call(progress, "judge"), batchable=True)
    except BaseException as exc:  # Ctrl-C, a dead endpoint: the journal says so; finished calls are cached
        journal.append(Event.RUN_INTERRUPTED, error=f"{type(exc).__name__}: {exc}"[:500])
        raise
    calls = pd.DataFrame([_call_row(scorer, job, res) for job, res in zip(jobs, results)], columns=CALL_COLUMNS)
    ratings = _ratings(targets)
    items = _items(calls, targets, chosen, ratings)
    counts = {c.criterion_id: _counts(items, c.criterion_id) for c in chosen}
    folder.write(folder.CALLS, calls.to_csv(index=False))
    folder.write(folder.ITEMS, items.to_csv(index=False))
    if targets.rated:
        folder.write(folder.RATINGS, ratings.to_csv(index=False))
    journal.append(Event.RUN_FINISHED, calls=len(calls), counts={k: vars(v) for k, v in counts.items()})
    return ScoringResult(folder.path, calls, items, counts)


def scoring_requests(judge: JudgeFile, targets: ScoringTargets, *, criteria: Sequence[str] | None = None,
                     model: str | None = None, schema_limits: bool = True) -> list[tuple[str, ChatRequest]]:
    """``(guidance kind, request)`` of every call :func:`score_targets` would send, in its order,
    without sending any (``evolve judge --plan``). Identical requests (a winner without guidance
    is the no-guidance request) are one call: the client answers the second from the first.

    Args:
        judge: The calibrated judge file.
        targets: What would be scored.
        criteria: Criterion ids (default: every criterion of the judge file).
        model: Model id sent instead of the judge file's.
        schema_limits: Whether the endpoint is sent the rationale's length limit.

    Raises:
        ConfigError: An unknown criterion.
    """
    settings: JudgeSettings = judge.judge if model is None else judge.judge.model_copy(update={"model": model})
    bundle = judge.bundle()
    scorer = Judge(bundle.rubric, bundle.protocol, settings, schema_limits=schema_limits)
    return [(job[1], job[-1]) for job in _jobs(judge, targets, chosen_criteria(judge, criteria), scorer)]


def _jobs(judge: JudgeFile, targets: ScoringTargets, chosen: Sequence[Criterion], scorer: Judge) -> list[tuple]:
    """``(criterion, kind, candidate id, case, target, repeat, seed, request)`` of every call."""
    pack, policy = targets.pack, judge.seed_policy
    kinds = ["winner"] + (["no-guidance"] if targets.rated else [])
    jobs = []
    for crit in chosen:
        entry = judge.criteria[crit.criterion_id]
        guides = {"winner": entry.winner, "no-guidance": _no_guidance(entry)}
        seeds = [derive_seed(policy.run_seed, policy.phase, crit.criterion_id, r) for r in range(policy.repeats)]
        for target in pack.targets:
            if target.component not in crit.components:
                continue
            case = pack.case(target.case_id)
            for kind in kinds:
                g = guides[kind]
                for rep, seed in enumerate(seeds):
                    req = scorer.request(case, target, crit, g.text or None, seed)
                    jobs.append((crit, kind, g.candidate_id, case, target, rep, seed, req))
    return jobs


def _no_guidance(entry: CriterionJudge) -> JudgeGuidance:
    """The judge file's no-guidance alternative (a bare one when the file lists none)."""
    for alt in entry.alternatives:
        if alt.kind == "no-guidance":
            return alt
    return JudgeGuidance(kind="no-guidance", candidate_id=f"{entry.criterion_id}:none", text="",
                         sha256=hashlib.sha256(b"").hexdigest())


def _call_row(scorer: Judge, job: tuple, result: Any) -> dict:
    crit, kind, cand, case, target, rep, seed, req = job
    out = scorer.parse(req, result, crit)
    return {"criterion": crit.criterion_id, "guidance": kind, "candidate_id": cand, "target_id": target.target_id,
            "case_id": case.case_id, "component": target.component, "repeat": rep, "seed": seed, "outcome": out.outcome,
            "score": out.score, "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
            "cached": out.cached, "cached_prompt_tokens": out.cached_prompt_tokens, "prompt_hash": out.prompt_hash,
            "rationale": out.rationale}


def _ratings(targets: ScoringTargets) -> pd.DataFrame:
    rows = [{k: getattr(r, k) for k in RATING_COLUMNS} for r in targets.pack.ratings]
    return pd.DataFrame(rows, columns=RATING_COLUMNS)


def _items(calls: pd.DataFrame, targets: ScoringTargets, chosen: Sequence[Criterion], ratings: pd.DataFrame) -> pd.DataFrame:
    numeric = ratings.assign(score=pd.to_numeric(ratings["score"], errors="coerce")).dropna(subset=["score"])
    phys = numeric.groupby(["criterion", "target_id"])["score"].agg(["mean", "size"]) if len(numeric) else None
    by_key = {k: g for k, g in calls.groupby(["criterion", "target_id", "guidance"])} if len(calls) else {}
    rows = []
    for crit in chosen:
        cid = crit.criterion_id
        for t in targets.pack.targets:
            row = _item_row(crit, t, by_key.get((cid, t.target_id, "winner")), by_key.get((cid, t.target_id, "no-guidance")))
            if phys is not None and (cid, t.target_id) in phys.index:
                row["physician"], row["n_ratings"] = float(phys.loc[(cid, t.target_id), "mean"]), int(phys.loc[(cid, t.target_id), "size"])
            rows.append(row)
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


def _item_row(crit: Criterion, target: Target, winner: pd.DataFrame | None, none: pd.DataFrame | None) -> dict:
    row: dict[str, Any] = {"criterion": crit.criterion_id, "target_id": target.target_id, "case_id": target.case_id,
                           "component": target.component, "model": target.model, "condition": target.condition,
                           "judge": None, "n_calls": 0, "n_score": 0, "n_not_evaluable": 0,
                           "n_failure": 0, "no_guidance": None, "physician": None, "n_ratings": 0}
    if target.component not in crit.components or winner is None:
        return {**row, "status": "excluded"}
    outcome = winner["outcome"]
    n_score, n_ne = int((outcome == "score").sum()), int((outcome == "not_evaluable").sum())
    status = "scored" if n_score else "not_evaluable" if n_ne else "failed"
    row.update(status=status, n_calls=len(winner), n_score=n_score, n_not_evaluable=n_ne,
               n_failure=int((outcome == "model_failure").sum()), judge=_mean_score(winner), no_guidance=_mean_score(none))
    return row


def _mean_score(calls: pd.DataFrame | None) -> float | None:
    if calls is None:
        return None
    scores = pd.to_numeric(calls.loc[calls["outcome"] == "score", "score"], errors="coerce").dropna()
    return float(scores.mean()) if len(scores) else None


def _counts(items: pd.DataFrame, criterion: str) -> ScoringCounts:
    mine = items[items["criterion"] == criterion]["status"]
    counts = ScoringCounts(criterion, len(mine), *(int((mine == s).sum()) for s in STATUSES))
    assert counts.n_items == counts.n_scored + counts.n_failed + counts.n_not_evaluable + counts.n_excluded
    return counts
