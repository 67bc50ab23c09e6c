"""Judging a benchmark run with the (calibrated) consilium judge (consilium paper, rubric-§3).

For every successful :class:`~evolve.consilium.CaseRun` of a run folder the judge scores the
``final`` report and, in the structured condition, the primary role's ``reasoning`` and
``opinion`` (role-level scores are those of the primary role); once per case, model and panel
(the ``n+1`` topology has its own) it scores the ``case`` component (the panel: criteria 9-10).
The paper judged role components only for
the structured pipeline (consilium paper, pre-consilium opinions): a free-form opinion's reasoning and opinion come from
splitting its text on a "FINAL OPINION:" line, and where a model wrote none the two components
overlap. ``free_form_roles=True`` judges them anyway, and every split that fell back is
counted (:func:`split_fallbacks`). Only (criterion, component) pairs the rubric applies are called (consilium paper, rubric);
criterion 11 is physician-only and never judged. Each call sees the case and one target; the
reference answer only for the conclusion criterion (:class:`~evolve.judge.Judge` does that).

Guidance per criterion is the winner of a calibrated judge (:func:`load_calibrated_guidance`:
a judge file, :mod:`evolve.calibrated`, or an older run's ``candidates.csv``); none without
one, or for a criterion it did not calibrate.

Output, in the run folder: ``judge_scores.csv`` (:data:`JUDGE_SCORE_COLUMNS`, one row per judge
call) and ``judge.json`` (judge model and decoding, repeats and seeds, rubric version, the
guidance used with its source). Judging is resume-safe: a repeated or resumed ``judge_bench``
replays every finished call from the response cache.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from evolve.consilium._config import BenchConfig, load_bench_config
from evolve.consilium._judge_record import JudgeFileRecord, keep_judge_file, read_judge_file_record
from evolve.consilium._models import CaseRun
from evolve.consilium._prompts import split_free_form
from evolve.consilium._runner import (
    BENCH_RUBRIC_ID,
    load_case_runs,
    load_run_cases,
)
from evolve.data import consilium_targets
from evolve.errors import ConfigError, EvolveError, RunError
from evolve.judge import Judge, JudgeSettings
from evolve.llm import limits_sent
from evolve.records import Record
from evolve.rubric import MAX_GUIDANCE_CHARS, Rubric, load_protocol, load_rubric, run_prompts_root
from evolve.runs import (
    BenchFolder,
    CalibrationFolder,
    Event,
    NoProgress,
    ProgressHook,
    atomic_write,
    holds_interrupt,
    locks_run,
    on_call,
    owned_client,
)

if TYPE_CHECKING:  # pragma: no cover
    from evolve.llm import Client

__all__ = [
    "JUDGE_FILE",
    "JUDGE_SCORES_FILE",
    "JUDGE_SCORE_COLUMNS",
    "NO_GUIDANCE",
    "GuidanceChoice",
    "JudgeBenchResult",
    "judge_bench",
    "load_calibrated_guidance",
    "split_fallbacks",
]

JUDGE_SCORES_FILE = BenchFolder.JUDGE_SCORES
JUDGE_FILE = BenchFolder.JUDGE
NO_GUIDANCE = "none"
"""``guidance_id`` of a call made without guidance."""

JUDGE_SCORE_COLUMNS: list[str] = [
    "case_id", "model", "condition", "topology", "component", "role", "criterion", "number", "repeat", "seed",
    "outcome", "score", "guidance_id", "rubric_version", "prompt_hash", "prompt_tokens", "completion_tokens",
    "cached", "rationale", "cached_prompt_tokens",
]
"""Columns of ``judge_scores.csv``, in order (the contract the bench report reads).

``condition`` and ``topology`` are empty for the ``case`` component (judged once per case and
model); ``role`` is the primary role's name for ``reasoning``/``opinion`` and empty otherwise;
``score`` is empty unless ``outcome == "score"``; ``guidance_id`` is the calibration candidate
id or ``none``."""

PROGRESS_KEY = "judge"
_ROLE_COMPONENTS = ("reasoning", "opinion")


class GuidanceChoice(Record):
    """The guidance a criterion is judged with.

    Attributes:
        criterion: Criterion id.
        candidate_id: The calibration candidate (``candidates.csv``), e.g. ``data_use:m7``.
        text: The guidance (<= 800 characters; empty = the winner was no guidance).
        sha256: Hex SHA-256 of ``text``.
        source: The calibration run folder.
    """

    criterion: str
    candidate_id: str
    text: str
    sha256: str
    source: str


@dataclass
class JudgeBenchResult:
    """What :func:`judge_bench` returns.

    Attributes:
        run_dir: The benchmark run folder.
        path: ``judge_scores.csv``.
        rows: Judge calls made (= rows written).
        outcomes: Count per outcome (``score``, ``not_evaluable``, ``model_failure``).
        cached: Calls answered by the response cache.
        skipped_runs: Failed pipeline runs (nothing to judge).
        guidance: The guidance per criterion (empty without a calibration run).
        warnings: E.g. the calibration used another judge model.
        free_form_roles: Role components of free-form pipelines were judged.
        split_fallbacks: Free-form primary-role opinions whose reasoning/opinion split fell
            back (no "FINAL OPINION:" line), judged or not.
        free_form_opinions: Free-form primary-role opinions of successful pipelines.
        judge_file: The judge file behind the guidance (path, sha256, calibration run, judge
            model; copied into the run as ``calibrated_judge.json``), None without one.
    """

    run_dir: Path
    path: Path
    rows: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    cached: int = 0
    skipped_runs: int = 0
    guidance: dict[str, GuidanceChoice] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    free_form_roles: bool = False
    split_fallbacks: int = 0
    free_form_opinions: int = 0
    judge_file: JudgeFileRecord | None = None


def load_calibrated_guidance(calibration_run: Path | str, rubric: Rubric) -> dict[str, GuidanceChoice]:
    """The winner of each criterion of a calibrated judge: a judge file, or a run's candidates.

    Args:
        calibration_run: A calibration run folder (``archives/<run_id>``) or its judge file
            (``judge.json``, :func:`evolve.calibrated.load_judge_file`). A run folder without a
            judge file (made before judge files existed) is read from its ``candidates.csv``
            (the ``selected`` rows).
        rubric: The rubric the benchmark is judged on; every calibrated criterion must be one
            of its judged criteria.

    Returns:
        ``criterion_id -> GuidanceChoice`` for the criteria the run selected a winner for.

    Raises:
        RunError: An invalid judge file; no ``candidates.csv`` (not a finished calibration run;
            see :func:`~evolve.calibrated.read_candidates`); no selected winner at all, two
            winners of one criterion, a criterion outside ``rubric`` (calibrated on another
            rubric) or a winner over 800 characters.
    """
    from evolve.calibrated import JUDGE_FILE, load_judge_file, read_candidates  # below the engines

    run = Path(calibration_run)
    if not run.is_dir() or (run / JUDGE_FILE).is_file():
        judge = load_judge_file(run)
        where = run / JUDGE_FILE if run.is_dir() else run
        winners = [(c, w.winner.candidate_id, w.winner.text) for c, w in judge.criteria.items()]
        return _guidance_choices(where, winners, rubric, str(run))
    path = run / CalibrationFolder.CANDIDATES
    rows = read_candidates(run, required=("candidate_id", "criterion", "text", "selected"))
    return _guidance_choices(path, [(r.criterion, r.candidate_id, r.text) for r in rows if r.selected], rubric, str(run))


def _guidance_choices(path: Path, winners: list[tuple[str, str, str]], rubric: Rubric, source: str) -> dict[str, GuidanceChoice]:
    """``(criterion, candidate id, text)`` winners read from ``path``, checked against ``rubric``."""
    if not winners:
        raise RunError(f"{path}: no candidate is selected; the calibration did not finish. Resume it first "
                       f"(`evolve calibrate --resume {source}`).")
    known = {c.criterion_id for c in rubric.criteria if c.judged}
    out: dict[str, GuidanceChoice] = {}
    for crit, candidate_id, raw in winners:
        if crit not in known:
            raise RunError(
                f"{path}: selected winner {candidate_id!r} is for criterion {crit!r}, which rubric "
                f"{rubric.id!r} does not judge (known: {sorted(known)}). Pass a calibration run of rubric {rubric.id!r}."
            )
        if crit in out:
            raise RunError(f"{path}: criterion {crit!r} has two selected winners ({out[crit].candidate_id!r}, "
                           f"{candidate_id!r}); the file was edited - restore it or rebuild the run.")
        text = raw.strip()
        if len(text) > MAX_GUIDANCE_CHARS:
            raise RunError(f"{path}: winner {candidate_id!r} has {len(text)} characters (limit "
                           f"{MAX_GUIDANCE_CHARS}); the file was edited - restore it.")
        out[crit] = GuidanceChoice(criterion=crit, candidate_id=candidate_id, text=text,
                                   sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), source=source)
    return out


def calibration_settings(settings: JudgeSettings, calibration_run: Path | str | None) -> JudgeSettings:
    """``settings`` with the prompt layout the calibration behind the guidance validated it with
    (its judge file's, else its configuration's: :class:`~evolve.judge.JudgeSettings`), so the
    guidance is judged in the prompt it was chosen in; ``settings`` unchanged without a run or
    when neither can be read (the guidance loader reports that)."""
    if calibration_run is None:
        return settings
    from evolve.calibrated import JUDGE_FILE, load_judge_file  # below the engines
    from evolve.config import load_run_config

    run = Path(calibration_run)
    try:
        if not run.is_dir() or (run / JUDGE_FILE).is_file():
            layout = load_judge_file(run).judge.layout
        else:
            layout = load_run_config(run).judge.layout
    except EvolveError:
        return settings
    return settings.model_copy(update={"layout": layout})


def _calibration_judge_model(calibration_run: Path) -> str | None:
    try:
        return json.loads((Path(calibration_run) / CalibrationFolder.CONFIG).read_text(encoding="utf-8"))["judge"]["model"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def split_fallbacks(run: CaseRun) -> list[tuple[str, str]]:
    """The free-form opinions of a pipeline run whose split into reasoning and opinion fell
    back, as ``(role, note)`` (see :func:`~evolve.consilium.split_free_form`); empty for the
    structured condition, whose components are fields of their own."""
    if run.condition != "free-form":
        return []
    found = []
    for o in run.opinions:
        note = split_free_form(o.text)[2] if o.text.strip() else "empty opinion"
        if note:
            found.append((o.role, note))
    return found


def _judge_batch(judge: Judge, client: Client, batch: list, progress: ProgressHook) -> list[dict]:
    """Judge one batch of ``(row, case, target, criterion, text, seed)`` in one concurrent map."""
    requests = [judge.request(case, target, crit, text, seed) for _, case, target, crit, text, seed in batch]
    results = client.map(requests, on_result=on_call(progress, PROGRESS_KEY), batchable=True)  # --batch
    rows = []
    for (row, _, _, crit, _, _), request, res in zip(batch, requests, results):
        out = judge.parse(request, res, crit)
        rows.append({**row, "outcome": out.outcome, "score": out.score, "prompt_hash": out.prompt_hash,
                     "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                     "cached": out.cached, "rationale": out.rationale,
                     "cached_prompt_tokens": out.cached_prompt_tokens})
    return rows


Call = tuple[dict, Any, Any, Any, "str | None", int]
"""One planned judge call: (row fields, case, target, criterion, guidance text, seed)."""


def _planned_calls(run_dir: Path, config: BenchConfig, rubric: Rubric, guidance: dict[str, GuidanceChoice],
                   seeds: list[int], result: JudgeBenchResult) -> list[list[Call]]:
    """Every judge call of a run, one batch per pipeline run, in output order (failed runs are
    skipped and counted in ``result``, and so are free-form split fallbacks).

    Raises:
        RunError: An artifact names a case that is not in the run's ``cases.jsonl``.
    """
    cases = {c.case_id: c for c in load_run_cases(run_dir)}
    criteria = [c for c in rubric.criteria if c.judged]
    batches: list[list[Call]] = []
    panels_done: set[tuple[str, str, str]] = set()
    for run in load_case_runs(run_dir, config):
        if run.stop_reason == "failure" or not run.final:
            result.skipped_runs += 1
            continue
        case = cases.get(run.case_id)
        if case is None:
            raise RunError(f"{run_dir}: artifact of case {run.case_id!r} but the case is not in cases.jsonl; "
                           "the run folder was edited.")
        if run.condition == "free-form":
            primary = next((p.name for p in run.roles if p.primary), "")
            result.free_form_opinions += 1
            result.split_fallbacks += sum(role == primary for role, _ in split_fallbacks(run))
        batch = []
        for target, condition, topology in _judged_targets(run, panels_done, result.free_form_roles):
            for crit in criteria:
                if not rubric.applies(crit.criterion_id, target.component):
                    continue  # structurally inapplicable: never called (consilium paper, rubric)
                g = guidance.get(crit.criterion_id)
                for rep, seed in enumerate(seeds):
                    row = {
                        "case_id": run.case_id, "model": run.model, "condition": condition, "topology": topology,
                        "component": target.component, "role": target.role, "criterion": crit.criterion_id,
                        "number": crit.number, "repeat": rep, "seed": seed,
                        "guidance_id": g.candidate_id if g is not None else NO_GUIDANCE,
                        "rubric_version": rubric.version,
                    }
                    batch.append((row, case, target, crit, (g.text or None) if g is not None else None, seed))
        batches.append(batch)
    return batches


def _judged_targets(run: CaseRun, panels_done: set[tuple[str, str, str]], free_form_roles: bool) -> list[tuple[Any, str, str]]:
    """The targets judged for one pipeline run: the final report, the primary role's reasoning
    and opinion (free-form ones only with ``free_form_roles``), and - first, once per case,
    model and panel - the panel, which belongs to no condition: the single-model panel's rows
    leave the topology empty, the ``n+1`` panel's (merged by the consolidator) say ``n+1``."""
    record = run.to_record()
    primary = record.primary_role.name
    roles_judged = run.condition == "structured" or free_form_roles
    chosen: list[tuple[Any, str, str]] = []
    for target in consilium_targets(record):
        is_primary_role = target.component in _ROLE_COMPONENTS and target.role == primary
        if (is_primary_role and roles_judged) or target.component == "final":
            chosen.append((target, run.condition, run.topology))
        elif target.component == "case" and (run.case_id, run.model, run.topology) not in panels_done:
            panels_done.add((run.case_id, run.model, run.topology))
            chosen.insert(0, (target, "", "" if run.topology == "single" else run.topology))
    return chosen


@dataclass(frozen=True)
class JudgingSettings:
    """The settings a benchmark run was last judged with, as its journal recorded them.

    Attributes:
        calibration_run: The judge file behind the guidance (a calibration run folder or its
            ``judge.json``, as given), None for no guidance.
        repeats: Judge calls per target and criterion.
        free_form_roles: Role components of free-form pipelines were judged too.
        finished: Whether that judging finished (``judge_scores.csv`` holds its scores);
            False for one stopped part-way (a limit, an error, an interrupt).
    """

    calibration_run: Path | None
    repeats: int
    free_form_roles: bool
    finished: bool


def last_judging(run_dir: Path | str) -> JudgingSettings | None:
    """The settings of the latest judging of a benchmark run (``evolve bench judge`` or the
    judging step of ``evolve bench run``), None when it was never judged. A resume continues
    an unfinished judging with them, so a stopped guided judging is not finished unguided."""
    started: dict[str, Any] | None = None
    finished = False
    for event in BenchFolder(Path(run_dir)).journal().events():
        if event.get("event") == Event.JUDGE_STARTED:
            started, finished = event, False
        elif event.get("event") == Event.JUDGE_FINISHED:
            finished = True
    if started is None:
        return None
    run = started.get("calibration_run")
    return JudgingSettings(calibration_run=Path(run) if run else None, repeats=int(started.get("repeats") or 1),
                           free_form_roles=bool(started.get("free_form_roles", False)), finished=finished)


def recorded_guidance(run_dir: Path | str) -> Path | None:
    """The judge file a resumed ``evolve bench run`` judges with when ``--guidance`` is not
    given: the latest the run's journal names, in a judging (``judge_started``) or at the start
    of a process of the run (``bench_started``/``bench_resumed``); None for no guidance."""
    latest: str | None = None
    for event in BenchFolder(Path(run_dir)).journal().events():
        if event.get("event") == Event.JUDGE_STARTED:
            latest = event.get("calibration_run")
        elif event.get("event") in (Event.BENCH_STARTED, Event.BENCH_RESUMED):
            latest = event.get("guidance")
    return Path(latest) if latest else None


@locks_run(lambda run_dir, **_: run_dir)  # one process writes a run folder
def judge_bench(
    run_dir: Path | str,
    *,
    calibration_run: Path | None = None,
    client: Client | None = None,
    repeats: int | None = None,
    progress: ProgressHook | None = None,
    free_form_roles: bool = False,
    prompts_root: Path | str | None = None,
) -> JudgeBenchResult:
    """Score a benchmark run's outputs with the consilium judge; write ``judge_scores.csv``.

    Judged per successful CaseRun: the ``final`` report and, in the structured condition (or
    with ``free_form_roles``), the primary role's ``reasoning`` and ``opinion``, on every
    criterion the rubric applies to them (consilium paper, rubric, §5.2); per case, model and panel: the ``case``
    component (panel adequacy, case complexity). Seeds are
    ``judge_seed + repeat`` (config), temperature/top_p/output limit from ``config.judge``.

    Args:
        run_dir: A folder written by :func:`~evolve.consilium.run_bench`.
        calibration_run: The judge file whose winners guide the judge (consilium paper, calibration): a calibration
            run folder or its ``judge.json``; the run keeps a copy (``calibrated_judge.json``)
            and records its path and sha256 in ``judge.json``. None = no guidance.
        client: A ready client; None builds one from the run's endpoint and closes it.
        repeats: Judge calls per (target, criterion) (>= 1); None = ``config.judge_repeats``.
        progress: Progress hook (key ``judge``, one step per call).
        prompts_root: For a run made before runs kept their own rubric copy: where the
            consilium rubric is looked up before the shipped rubrics (replaces the run's
            recorded ``prompts_root``). A run with a copy always reads the copy.
        free_form_roles: Also judge the role components of free-form pipelines (split on the
            "FINAL OPINION:" line; a fallback split is counted and warned about).

    Returns:
        Counts, the guidance used and warnings.

    Raises:
        RunError: Not a benchmark run folder; a bad calibration run (see
            :func:`load_calibrated_guidance`).
        ConfigError: ``repeats`` < 1.
        RubricError: The consilium rubric or protocol is missing.
    """
    run_dir = Path(run_dir)
    progress = progress or NoProgress()
    config = load_bench_config(run_dir)
    if prompts_root is not None:  # a run without its own rubric copy reads its rubric from there
        config = config.model_copy(update={"prompts_root": run_prompts_root(BenchFolder(run_dir).prompts_root, prompts_root)})
    n_repeats = config.judge_repeats if repeats is None else repeats
    if n_repeats < 1:
        raise ConfigError(f"judge repeats must be >= 1, got {n_repeats}; pass --repeats 1 or more.")
    rubric = load_rubric(BENCH_RUBRIC_ID, root=config.prompts_root)
    limits = config.endpoint.schema_limits if client is None else limits_sent(client)  # what the calls send
    judge = Judge(rubric, load_protocol(rubric.id, root=config.prompts_root),
                  calibration_settings(config.judge, calibration_run), schema_limits=limits)
    guidance = load_calibrated_guidance(calibration_run, rubric) if calibration_run is not None else {}
    result = JudgeBenchResult(run_dir=run_dir, path=run_dir / JUDGE_SCORES_FILE, guidance=guidance,
                              free_form_roles=free_form_roles)
    judge_file = read_judge_file_record(calibration_run) if calibration_run is not None else None
    result.judge_file = judge_file[0] if judge_file is not None else None
    if calibration_run is not None:
        calib_model = result.judge_file.judge_model if result.judge_file is not None else _calibration_judge_model(calibration_run)
        if calib_model and calib_model != config.judge.model:
            result.warnings.append(
                f"the guidance was calibrated for judge model {calib_model!r} but this run judges with "
                f"{config.judge.model!r}; the calibration may not carry over")
    seeds = [config.judge_seed + r for r in range(n_repeats)]

    batches = _planned_calls(run_dir, config, rubric, guidance, seeds, result)
    if free_form_roles and result.split_fallbacks:
        result.warnings.append(
            f"{result.split_fallbacks} of {result.free_form_opinions} free-form primary-role opinions have no "
            "'FINAL OPINION:' line: their reasoning is the whole text and their opinion its last paragraph, so the "
            "two components overlap (judge without --free-form-roles to score free-form finals only)")
    journal = BenchFolder(run_dir).journal()
    total = sum(len(b) for b in batches)
    journal.append(Event.JUDGE_STARTED, calls=total, repeats=n_repeats, judge_model=config.judge.model,
                   free_form_roles=free_form_roles,
                   calibration_run=str(calibration_run) if calibration_run is not None else None,
                   judge_file=result.judge_file.model_dump() if result.judge_file is not None else None,
                   guidance={k: v.candidate_id for k, v in guidance.items()})
    for warning in result.warnings:
        journal.append(Event.WARNING, message=warning)
    rows: list[dict] = []
    with owned_client(config.endpoint, cache_path=config.cache_path, journal=journal, client=client) as client:
        try:
            progress.phase("judging", total, key=PROGRESS_KEY, unit="judge calls")
            for batch in batches:
                rows += _judge_batch(judge, client, batch, progress)
        except BaseException as exc:
            journal.append(Event.JUDGE_INTERRUPTED, error=f"{type(exc).__name__}: {exc}"[:500], done=len(rows))
            if not isinstance(exc, KeyboardInterrupt) and holds_interrupt(exc):
                raise KeyboardInterrupt from exc  # an interrupt inside the client's task group
            raise
    frame = pd.DataFrame(rows, columns=JUDGE_SCORE_COLUMNS)
    frame["score"] = frame["score"].astype("Int64")
    frame["number"] = frame["number"].astype("Int64")
    atomic_write(result.path, frame.to_csv(index=False))
    folder = BenchFolder(run_dir)
    if judge_file is not None:
        keep_judge_file(folder, *judge_file)
    else:
        (folder / folder.CALIBRATED_JUDGE).unlink(missing_ok=True)  # a copy from an earlier judging is stale now
    atomic_write(run_dir / JUDGE_FILE, json.dumps({
        "version": 1,
        "rubric": {"id": rubric.id, "version": rubric.version},
        "judge": config.judge.model_dump(mode="json"),
        "repeats": n_repeats,
        "seeds": seeds,
        "free_form_roles": free_form_roles,
        "split_fallbacks": result.split_fallbacks,
        "free_form_opinions": result.free_form_opinions,
        "calibration_run": str(calibration_run) if calibration_run is not None else None,
        "judge_file": result.judge_file.model_dump() if result.judge_file is not None else None,
        "guidance": {k: v.model_dump() for k, v in guidance.items()},
        "warnings": result.warnings,
    }, indent=2, ensure_ascii=False) + "\n")
    result.rows = len(rows)
    result.outcomes = {k: int(v) for k, v in frame["outcome"].value_counts().items()}
    result.cached = int(frame["cached"].astype(bool).sum())
    journal.append(Event.JUDGE_FINISHED, rows=result.rows, outcomes=result.outcomes, cached=result.cached,
                   skipped_runs=result.skipped_runs)
    return result
