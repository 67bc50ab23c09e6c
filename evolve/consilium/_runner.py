"""The benchmark runner: generate consilium second opinions for a case set (consilium paper, benchmark runner).

For each case (source order) and generating model, roles are assigned once and reused by every
condition and topology of that case and model (consilium paper, role assignment); then each condition x topology runs
the pipeline and its :class:`~evolve.consilium.CaseRun` is written as soon as it finishes. A run
folder ``archives/<run_id>/`` holds::

    manifest.json                      BenchManifest: config + what the run saw (prompt hashes ...)
    cases.jsonl                        the run's cases (with reference answers; the judge reads them)
    deidentification.csv               identifiers replaced per case and kind before any model saw the case
    journal.jsonl                      bench_started/resumed, roles_*, case_started/finished/failed ...
    roles/<stem>.<model>.json          the role assignment of one case and model (RoleFile)
    cases/<stem>.<model>.<condition>.<topology>.json      one CaseRun per pipeline run
    records/<model>[.n+1]/<stem>.<condition>.json         its ConsiliumRecord (successful runs)
    pack/<model>[.n+1]/                a rating pack of those records (rubric consilium, no ratings)

``<stem>`` is :func:`~evolve.data.record_file_stem` of the case id and ``<model>`` the
:func:`~evolve.consilium.model_slug` of the model id. A records folder is what physicians'
workbooks are matched against (``evolve ratings import-workbooks ... --outputs records/<model>``).

Resuming replays the run: finished artifacts are kept, everything else is asked again with
identical requests (temperature 0, fixed seeds), so every call that finished before the
interruption - including those of a case interrupted mid-consilium - comes from the response
cache and is never paid twice.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from evolve.consilium._config import (
    BENCH_PATHS,
    MANIFEST_FILE,
    BenchConfig,
    BenchManifest,
    load_bench_manifest,
    manifest_json,
    model_slug,
)
from evolve.consilium._deidentify import deidentification_csv
from evolve.consilium._models import (
    ARTIFACT_VERSION,
    CallRecord,
    CaseRun,
    RoleAssignment,
)
from evolve.data import (
    Case,
    ConsiliumRecord,
    PackManifest,
    PanelRole,
    RatingPack,
    RubricRef,
    consilium_targets,
    load_cases,
    load_pack,
    record_file_stem,
    validate_pack,
    write_pack,
)
from evolve.errors import DataError, RunError, RunStoppedError
from evolve.outputs import BenchReport
from evolve.records import Record
from evolve.rubric import run_prompts_root, write_prompts_snapshot
from evolve.runs import (
    BenchFolder,
    Event,
    Journal,
    NoProgress,
    ProgressHook,
    atomic_write,
    check_resumable,
    check_same_settings,
    context_window,
    holds_interrupt,
    locks_run,
    owned_client,
    report_step,
    with_cache_path,
)

if TYPE_CHECKING:  # pragma: no cover
    from evolve.consilium._context import ContextCheck
    from evolve.llm import Client

__all__ = [
    "BENCH_RUBRIC_ID",
    "BenchResult",
    "CaseRunSummary",
    "PipelineBackend",
    "RoleFile",
    "case_artifact_path",
    "default_backend",
    "load_bench_cases",
    "load_case_runs",
    "load_run_cases",
    "prepare_bench",
    "records_key",
    "role_file_path",
    "run_bench",
]

BENCH_RUBRIC_ID = "consilium"
"""Rubric of the run's rating pack and of judging (consilium paper, rubric)."""

RUN_CASES_FILE = BenchFolder.CASES
PROGRESS_KEY = "generate"


# -- the pipeline behind the runner ----------------------------------------------------------


@dataclass(frozen=True)
class PipelineBackend:
    """The consilium pipeline as the runner uses it (replaceable in tests).

    Attributes:
        make: ``make(client, config) -> pipeline``; the pipeline offers
            ``assign_roles(case, model=...)`` and ``run_case(case, model=..., condition=...,
            topology=..., workers=..., consolidator=..., roles=...) -> CaseRun``.
        version: The pipeline version recorded in the manifest.
        catalog: ``catalog() -> {template name: text}``: every prompt template, for the manifest.
        describe: ``describe(config) -> dict``: what else the manifest should hold about the
            pipeline (its settings, the JSON schemas of its structured outputs).
    """

    make: Callable[[Any, BenchConfig], Any]
    version: str
    catalog: Callable[[], dict[str, str]]
    describe: Callable[[BenchConfig], dict[str, Any]] = lambda config: {}


def _describe(config: BenchConfig) -> dict[str, Any]:
    from evolve.consilium._pipeline import ConsiliumPipeline

    # the description needs no client: settings and response formats only
    info = ConsiliumPipeline(None, config.pipeline_settings()).manifest()  # type: ignore[arg-type]
    return {k: v for k, v in info.items() if k in ("settings", "response_formats")}


def default_backend() -> PipelineBackend:
    """The real pipeline (:mod:`evolve.consilium._pipeline`), imported on first use."""
    from evolve.consilium import _pipeline as p

    return PipelineBackend(
        make=lambda client, config: p.ConsiliumPipeline(client, config.pipeline_settings()),
        version=str(p.PIPELINE_VERSION),
        catalog=p.prompt_catalog,
        describe=_describe,
    )


# -- files -----------------------------------------------------------------------------------


class RoleFile(Record):
    """``roles/<stem>.<model>[.n+1].json``: one case's role assignment by one model, or by the
    ``n+1`` pipeline of that model (workers' proposals merged by the consolidator) (consilium paper, role assignment).

    Attributes:
        version: File format version.
        case_id: The case.
        model: The model that assigned the roles.
        roles: The panel (1-5 roles, one primary).
        panel_rationale: Why this panel.
        calls: The role-assignment calls (with tokens).
    """

    version: Literal[1] = ARTIFACT_VERSION
    case_id: str
    model: str
    roles: tuple[PanelRole, ...]
    panel_rationale: str = ""
    calls: tuple[CallRecord, ...] = ()


def role_file_path(run_dir: Path, case_id: str, model: str, topology: str = "single") -> Path:
    """``<run_dir>/roles/<record_file_stem(case_id)>.<records_key(model, topology)>.json``: the
    single-model panel, or (``n+1``) the panel the consolidator merged."""
    return Path(run_dir) / "roles" / f"{record_file_stem(case_id)}.{records_key(model, topology)}.json"


def case_artifact_path(run_dir: Path, case_id: str, model: str, condition: str, topology: str) -> Path:
    """``<run_dir>/cases/<record_file_stem(case_id)>.<model_slug(model)>.<condition>.<topology>.json``."""
    return Path(run_dir) / "cases" / f"{record_file_stem(case_id)}.{model_slug(model)}.{condition}.{topology}.json"


def records_key(model: str, topology: str) -> str:
    """Name of the records (and pack) folder of a model and topology: the model slug, with
    ``.n+1`` appended for the ``n+1`` topology (one record per case and condition per folder)."""
    return model_slug(model) if topology == "single" else f"{model_slug(model)}.{topology}"


def _record_path(run_dir: Path, record: ConsiliumRecord, key: str) -> Path:
    return Path(run_dir) / "records" / key / f"{record_file_stem(record.case_id)}.{record.condition}.json"


def _dump(model: BaseModel) -> str:
    return model.model_dump_json(indent=2) + "\n"


# -- cases -----------------------------------------------------------------------------------


def load_bench_cases(config: BenchConfig) -> tuple[list[Case], Path]:
    """The run's cases in source order (first ``max_cases``) and the file that holds them.

    Args:
        config: ``config.cases`` is a case file (read with ``config.columns``) or a rating-pack
            folder (its ``cases.jsonl``; e.g. ``ratings/savage``, whose reference answers come
            along).

    Returns:
        ``(cases, file)``: ``file`` is the case file, or the pack's ``cases.jsonl``.

    Raises:
        DataError: Unreadable case file or pack; two case ids that give the same file stem.
    """
    source = Path(config.cases)
    if source.is_dir():
        file = source / "cases.jsonl"
        if not file.is_file():
            raise DataError(
                f"{source}: a folder without cases.jsonl. Pass a case file (.jsonl/.csv/.parquet) or a rating-pack "
                "folder (e.g. ratings/savage after `evolve ratings import savage ... --out ratings/savage`)."
            )
        cases = list(load_pack(source, check_rubric=False).cases)
    else:
        file = source
        cases = load_cases(source, mapping=config.columns)
    if config.max_cases is not None:
        cases = cases[: config.max_cases]
    stems: dict[str, str] = {}
    for c in cases:
        stem = record_file_stem(c.case_id)
        if stem in stems:
            raise DataError(
                f"{file}: case ids {stems[stem]!r} and {c.case_id!r} give the same file name {stem!r} "
                "('/' and ':' become '_'); give one of them another id."
            )
        stems[stem] = c.case_id
    return cases, file


def load_run_cases(run_dir: Path | str) -> list[Case]:
    """The cases a run folder was generated on (its ``cases.jsonl``), in source order.

    Raises:
        RunError: The file is missing or invalid.
    """
    path = Path(run_dir) / RUN_CASES_FILE
    try:
        return [Case.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValidationError) as exc:
        raise RunError(f"{path}: cannot read the run's cases ({exc}). Pass a folder written by `evolve bench run`.") from exc


def load_case_runs(run_dir: Path | str, config: BenchConfig | None = None) -> list[CaseRun]:
    """Every :class:`CaseRun` artifact of a run folder, in run order (case source order, then
    model, condition, topology as configured); missing artifacts are skipped.

    Raises:
        RunError: The manifest or an artifact cannot be read.
    """
    from evolve.consilium._config import load_bench_config

    run_dir = Path(run_dir)
    config = config or load_bench_config(run_dir)
    out = []
    for case in load_run_cases(run_dir):
        for model in config.models:
            for condition in config.conditions:
                for topology in config.topologies:
                    path = case_artifact_path(run_dir, case.case_id, model, condition, topology)
                    if path.is_file():
                        out.append(_read_case_run(path))
    return out


def _read_case_run(path: Path) -> CaseRun:
    try:
        return CaseRun.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        raise RunError(f"{path}: unreadable case artifact ({exc}). Delete it and resume the run to regenerate it.") from exc


# -- resume ----------------------------------------------------------------------------------

_RESUME_IGNORED = ("archives_dir", "run_id", "parallel_cases", "cache_path")


def _comparable(config: BenchConfig) -> dict:
    """A config as a resume compares it: paths absolute (relative ones from the current folder),
    without what changes no result; a run with its own rubric copy resumes on that copy, so
    where the rubric was loaded from does not count either."""
    data = json.loads(config.model_dump_json())
    ignored = (*_RESUME_IGNORED, "prompts_root") if run_prompts_root(BenchFolder(config.run_dir).prompts_root, None) \
        else _RESUME_IGNORED
    for key in ignored:
        data.pop(key, None)
    for key in BENCH_PATHS:
        if data.get(key) is not None:
            data[key] = os.path.normpath(Path.cwd() / data[key])
    data["endpoint"] = config.endpoint.resume_fields()
    return data


def _check_resume(config: BenchConfig, resume: bool, fresh: BenchManifest) -> None:
    """Refuse to start over an existing run, or to resume one made differently.

    Raises:
        RunError: The folder holds a run and ``resume`` is false; nothing to resume; the stored
            configuration, case file, pipeline version or a prompt template differs.
    """
    if not check_resumable(config.run_dir, MANIFEST_FILE, resume, what="a benchmark run",
                           resume_flag=f"--resume {config.run_dir}", kind="bench"):
        return
    path = config.run_dir / MANIFEST_FILE
    try:
        stored = load_bench_manifest(config.run_dir)
    except RunError as exc:
        raise RunError(f"{exc} Or start a new --run-id.") from exc
    check_same_settings(path, _comparable(stored.config), _comparable(config),
                        hint=f"`evolve bench run --resume {config.run_dir}` reuses the stored ones")
    if stored.cases_sha256 != fresh.cases_sha256:
        raise RunError(
            f"{path}: the case file {fresh.cases_file} changed since the run started (SHA-256 differs). Restore it, "
            "or start a new --run-id."
        )
    changed = sorted(
        name for name in set(stored.prompts) | set(fresh.prompts)
        if (stored.prompts.get(name) and stored.prompts[name].sha256) != (fresh.prompts.get(name) and fresh.prompts[name].sha256)
    )
    formats = stored.pipeline.get("response_formats") != fresh.pipeline.get("response_formats")
    if stored.pipeline_version != fresh.pipeline_version or changed or formats:
        what = (f"prompt templates {changed}" if changed else
                "the response formats (JSON schemas)" if formats else "the pipeline version")
        raise RunError(
            f"{path}: {what} changed since the run started (pipeline {stored.pipeline_version} -> "
            f"{fresh.pipeline_version}); resuming would mix outputs of two pipelines. Start a new --run-id."
        )


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseRunSummary:
    """One pipeline run of a benchmark, as :func:`run_bench` reports it.

    Attributes:
        case_id, model, condition, topology: What ran.
        stop_reason: The CaseRun's stop reason (``failure`` for a failed run).
        rounds: Review rounds completed.
        tokens: Prompt + completion tokens of its calls.
        path: The CaseRun artifact.
        record: The ConsiliumRecord file, None for a failed run.
        reused: The artifact was already there (a resumed run) and was not regenerated.
        error: Why it failed.
    """

    case_id: str
    model: str
    condition: str
    topology: str
    stop_reason: str
    rounds: int
    tokens: int
    path: Path
    record: Path | None
    reused: bool = False
    error: str = ""

    @property
    def ok(self) -> bool:
        """The run produced a record."""
        return self.record is not None


@dataclass
class BenchResult:
    """What :func:`run_bench` (and :func:`run_and_judge`) return.

    Attributes:
        run_dir: The run folder.
        manifest: The run manifest.
        runs: One summary per (case, model, condition, topology), in run order.
        records: Records folder per key (:func:`records_key`).
        packs: Rating-pack folder per key.
        usage: Client usage per tag (calls, cache hits, tokens) of this invocation.
        judge: The judging result, when :func:`run_and_judge` judged.
        report: The bench report (``write_bench_report``'s return), when written.
        notes: Things the caller should know (e.g. why no report was written).
        context: The context check made before any call (:func:`plan_context`).
    """

    run_dir: Path
    manifest: BenchManifest
    runs: list[CaseRunSummary] = field(default_factory=list)
    records: dict[str, Path] = field(default_factory=dict)
    packs: dict[str, Path] = field(default_factory=dict)
    usage: dict[str, dict] = field(default_factory=dict)
    judge: Any = None
    report: BenchReport | None = None
    notes: list[str] = field(default_factory=list)
    context: ContextCheck | None = None

    @property
    def n_ok(self) -> int:
        """Runs that produced a record."""
        return sum(r.ok for r in self.runs)

    @property
    def n_failed(self) -> int:
        """Runs that failed."""
        return sum(not r.ok for r in self.runs)


# -- the run ---------------------------------------------------------------------------------


class _Unit:
    """Generation of one (case, model): role assignment, then every condition x topology."""

    def __init__(self, *, config: BenchConfig, case: Case, model: str, pipe: Any, journal: Journal,
                 progress: ProgressHook, stop: threading.Event, blocked: dict[tuple[str, str, str, str], str]) -> None:
        self.config = config
        self.blocked = blocked
        self.stop = stop
        self.case = case
        self.model = model
        self.pipe = pipe
        self.journal = journal
        self.progress = progress
        self.run_dir = config.run_dir
        self.ids = {"case_id": case.case_id, "model": model}
        # topologies whose role-assignment calls are on the progress bar already (or were read
        # back from the role file): the runs that share the panel do not report them again
        self._roles_reported: set[str] = set()

    def _roles(self, topology: str) -> RoleAssignment:
        """The persisted assignment of this case, model and topology, or a new one (persisted when
        valid): in ``n+1`` the workers propose panels and the consolidator merges them."""
        path = role_file_path(self.run_dir, self.case.case_id, self.model, topology)
        if path.is_file():
            try:
                stored = RoleFile.model_validate_json(path.read_text(encoding="utf-8"))
            except ValidationError as exc:
                raise RunError(f"{path}: unreadable role assignment ({exc}). Delete it and resume to assign again.") from exc
            self.journal.append(Event.ROLES_REUSED, **self.ids, topology=topology, roles=[r.name for r in stored.roles])
            self._roles_reported.add(topology)
            return RoleAssignment(case_id=self.case.case_id, model=self.model, roles=stored.roles,
                                  panel_rationale=stored.panel_rationale, calls=stored.calls)
        if topology == "n+1":
            ra = self.pipe.assign_roles(self.case, model=self.model, workers=self.config.workers,
                                        consolidator=self.config.consolidator)
        else:
            ra = self.pipe.assign_roles(self.case, model=self.model)
        calls = tuple(ra.calls)
        tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
        if ra.error:
            self.journal.append(Event.ROLES_FAILED, **self.ids, topology=topology, error=str(ra.error)[:500], calls=len(calls), tokens=tokens)
            return ra
        atomic_write(path, _dump(RoleFile(case_id=self.case.case_id, model=self.model, roles=tuple(ra.roles),
                                           panel_rationale=ra.panel_rationale, calls=calls)))
        self.journal.append(Event.ROLES_ASSIGNED, **self.ids, topology=topology, roles=[r.name for r in ra.roles], calls=len(calls),
                            tokens=tokens, cached_calls=sum(c.cached for c in calls))
        return ra

    def run(self) -> list[CaseRunSummary]:
        out: list[CaseRunSummary] = []
        todo = []
        for condition in self.config.conditions:
            for topology in self.config.topologies:
                path = case_artifact_path(self.run_dir, self.case.case_id, self.model, condition, topology)
                if path.is_file():
                    done = _read_case_run(path)
                    if done.stop_reason != "failure":
                        out.append(self._finish(done, path, reused=True))
                        continue
                todo.append((condition, topology, path))
        reasons = {(c, t): self.blocked.get((self.case.case_id, self.model, c, t)) for c, t, _ in todo}
        for condition, topology, path in [x for x in todo if reasons[(x[0], x[1])]]:
            out.append(self._too_long(condition, topology, path, reasons[(condition, topology)] or ""))
        todo = [x for x in todo if not reasons[(x[0], x[1])]]
        panels: dict[str, RoleAssignment] = {}
        for condition, topology, path in todo:
            if self.stop.is_set():  # the run is ending (an error elsewhere): no new pipeline run
                break
            if topology not in panels:
                panels[topology] = self._roles(topology)
            out.append(self._one(panels[topology], condition, topology, path))
        order: dict[tuple[str, str], int] = {(c, t): i for i, (c, t) in enumerate(
            (c, t) for c in self.config.conditions for t in self.config.topologies)}
        return sorted(out, key=lambda s: order[(s.condition, s.topology)])

    def _too_long(self, condition: Any, topology: Any, path: Path, reason: str) -> CaseRunSummary:
        """A pipeline run failed before any call: a prompt cannot fit the context."""
        self.journal.append(Event.CASE_STARTED, **self.ids, condition=condition, topology=topology)
        run = CaseRun(case_id=self.case.case_id, model=self.model, condition=condition, topology=topology,
                      stop_reason="failure", error=reason)
        atomic_write(path, _dump(run))
        return self._finish(run, path, reused=False)

    def _one(self, ra: RoleAssignment, condition: Any, topology: Any, path: Path) -> CaseRunSummary:
        ids = {**self.ids, "condition": condition, "topology": topology}
        self.journal.append(Event.CASE_STARTED, **ids)
        try:  # a failed role assignment gives a failed run (the pipeline records why)
            run = self.pipe.run_case(
                self.case, model=self.model, condition=condition, topology=topology,
                workers=self.config.workers if topology == "n+1" else (),
                consolidator=self.config.consolidator if topology == "n+1" else None, roles=ra)
        except RunStoppedError:
            raise  # every later call would fail the same way: the run stops (and resumes later)
        except Exception as exc:  # a pipeline bug must not sink the other cases; it is recorded
            if self.stop.is_set():
                raise  # the run was interrupted (its calls were cancelled): nothing to record
            run = CaseRun(case_id=self.case.case_id, model=self.model, condition=condition, topology=topology,
                          stop_reason="failure", calls=tuple(ra.calls),
                          error=f"pipeline raised {type(exc).__name__}: {exc}"[:2000])
        atomic_write(path, _dump(run))
        shared = len(ra.calls) if topology in self._roles_reported else 0  # a run's calls start with its panel's
        self._roles_reported.add(topology)
        return self._finish(run, path, reused=False, reported=shared)

    def _finish(self, run: CaseRun, path: Path, *, reused: bool, reported: int = 0) -> CaseRunSummary:
        """Record a pipeline run and advance the progress (by its calls after the first
        ``reported``, which the progress has seen already)."""
        ids = {**self.ids, "condition": run.condition, "topology": run.topology}
        record_path = None
        if run.stop_reason != "failure" and run.final:
            record = run.to_record()
            record_path = _record_path(self.run_dir, record, records_key(run.model, run.topology))
            text = record.model_dump_json(indent=2) + "\n"
            if not (record_path.is_file() and record_path.read_text(encoding="utf-8") == text):
                atomic_write(record_path, text)
        stats = {"stop_reason": run.stop_reason, "rounds": run.rounds_completed, "consensus": run.consensus,
                 "tokens": run.tokens, "calls": len(run.calls), "cached_calls": sum(c.cached for c in run.calls)}
        if reused:
            self.journal.append(Event.CASE_REUSED, **ids, stop_reason=run.stop_reason)
        elif record_path is not None:
            self.journal.append(Event.CASE_FINISHED, **ids, **stats)
        else:
            self.journal.append(Event.CASE_FAILED, **ids, **stats, error=(run.error or "no final opinion")[:1000])
        report_step(self.progress, PROGRESS_KEY, run.calls[reported:], reused=reused)
        return CaseRunSummary(
            case_id=run.case_id, model=run.model, condition=run.condition, topology=run.topology,
            stop_reason=run.stop_reason, rounds=run.rounds_completed, tokens=run.tokens, path=path,
            record=record_path, reused=reused, error=run.error if record_path is None else "")


def _pack_name(run_id: str, key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._:/\-]", "-", f"{run_id}.{key}")


def _write_packs(config: BenchConfig, cases: list[Case], runs: list[CaseRunSummary], journal: Journal) -> dict[str, Path]:
    """One rating pack per records folder: the run's cases, the targets of every record, no ratings."""
    from evolve.rubric import load_rubric

    rubric = load_rubric(BENCH_RUBRIC_ID, root=config.prompts_root)
    by_key: dict[str, list[ConsiliumRecord]] = {}
    for s in runs:
        if s.record is not None:
            record = ConsiliumRecord.model_validate_json(s.record.read_text(encoding="utf-8"))
            by_key.setdefault(records_key(s.model, s.topology), []).append(record)
    out = {}
    for key, records in by_key.items():
        pack = RatingPack(
            path=None,
            manifest=PackManifest(
                name=_pack_name(config.run_id, key),
                description=(f"Consilium outputs generated by `evolve bench run` (run {config.run_id}, records/{key}); "
                             "targets only, no ratings yet."),
                rubric=RubricRef(id=rubric.id, version=rubric.version),
                source=f"{config.run_dir / 'records' / key}",
                importer="evolve.consilium.run_bench/1",
            ),
            cases=tuple(cases),
            targets=tuple(t for r in records for t in consilium_targets(r)),
            ratings=(),
        )
        validate_pack(pack, prompts_root=config.prompts_root)
        out[key] = write_pack(pack, config.run_dir / "pack" / key, overwrite=True)
        journal.append(Event.PACK_WRITTEN, key=key, path=str(out[key]), targets=len(pack.targets))
    return out


@locks_run(lambda config, **_: config.run_dir)  # one process writes a run folder
def run_bench(
    config: BenchConfig,
    *,
    client: Client | None = None,
    resume: bool = False,
    progress: ProgressHook | None = None,
    backend: PipelineBackend | None = None,
    prepared: tuple[list[Case], BenchManifest] | None = None,
    guidance: Path | None = None,
) -> BenchResult:
    """Generate consilium outputs for every case x model x condition x topology (consilium paper, benchmark runner).

    Every artifact is written as soon as it exists (atomically), so an interrupted run loses
    at most the pipeline runs in flight; their finished calls are in the response cache.

    Args:
        config: Resolved configuration (:func:`~evolve.consilium.resolve_bench_config`).
        client: A ready client (tests pass one over the fake provider); None builds one from
            ``config.endpoint`` (starting the embedded server if so configured) and closes it.
        resume: Continue the run in ``config.run_dir``: finished artifacts are kept, failed and
            missing ones are generated again over the cache.
        progress: Progress hook (one bar, key ``generate``, one step per pipeline run).
        backend: The pipeline; None = :func:`default_backend`.
        prepared: What :func:`prepare_bench` returned for this ``config``, ``resume`` and
            ``backend`` (cases and manifest, already checked); None prepares them here.
        guidance: The judge file the run is to be judged with afterwards, recorded in its
            ``bench_started`` event so that a resume judges with it
            (:func:`~evolve.consilium.recorded_guidance`).

    Returns:
        The run folder, its manifest, one summary per pipeline run, records and pack folders.

    Raises:
        RunError: The folder holds a run and ``resume`` is false; nothing to resume; the
            stored configuration, case file or pipeline differs (nothing is called).
        DataError: Unreadable cases (raised before any model call).
        ConfigError, LocalServerError: The endpoint cannot be opened.
        KeyboardInterrupt: Passed on at once after the journal records ``interrupted``. An
            owned client is closed with its calls in flight cancelled; with a borrowed
            ``client`` the caller cancels them by ``client.close(cancel=True)`` (worker threads
            may run until then). Interrupted case runs are not recorded, so ``resume`` makes them.
    """
    progress = progress or NoProgress()
    config = with_cache_path(config)  # recorded, so a resume finds the same cache whatever EVOLVE_CACHE_DIR says
    backend = backend or default_backend()
    cases, manifest = prepared or prepare_bench(config, resume, backend)
    run_dir = config.run_dir
    if resume:
        manifest = load_bench_manifest(run_dir)
        # the rubric copy the run started with (runs made before runs kept one: the configured root)
        config = config.model_copy(update={"prompts_root": run_prompts_root(BenchFolder(run_dir).prompts_root,
                                                                            config.prompts_root)})
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        # the rubric's copy first: a run folder with a manifest always has it
        write_prompts_snapshot(BenchFolder(run_dir).prompts_root, [BENCH_RUBRIC_ID], root=config.prompts_root)
        atomic_write(run_dir / RUN_CASES_FILE, "".join(c.model_dump_json() + "\n" for c in cases))
        atomic_write(run_dir / MANIFEST_FILE, manifest_json(manifest))
    folder = BenchFolder(run_dir)
    folder.write(folder.DEIDENTIFICATION, deidentification_csv(cases))  # the same on a resume (same pipeline)
    journal = folder.journal()
    context = plan_context(config, cases)
    for warning in context.warnings:
        journal.append(Event.WARNING, message=f"context: {warning}")

    owns = client is None
    with owned_client(config.endpoint, cache_path=config.cache_path, journal=journal, client=client) as client:
        result = _generate(config, client, cases, manifest, journal, progress, backend, owns=owns, resume=resume,
                           blocked=context.blocked, guidance=guidance)
    result.context = context
    return result


def plan_context(config: BenchConfig, cases: Sequence[Case]) -> ContextCheck:
    """Check every stage's prompt of every pipeline run against the endpoint's context (the
    embedded server's slot, or ``endpoint.context_tokens``) before any call; see
    :func:`~evolve.consilium.check_context`. Nothing is checked when the context is unknown."""
    from evolve.consilium._context import check_context
    from evolve.consilium._pipeline import ConsiliumPipeline

    context, source = context_window(config.endpoint)
    runs = [(m, c, t) for m in config.models for c in config.conditions for t in config.topologies]
    return check_context(ConsiliumPipeline(None, config.pipeline_settings()), cases, runs, context, source,  # type: ignore[arg-type]
                         workers=config.workers, consolidator=config.consolidator)


def _generate(config: BenchConfig, client: Client, cases: list[Case], manifest: BenchManifest, journal: Journal,
              progress: ProgressHook, backend: PipelineBackend, *, owns: bool, resume: bool,
              blocked: dict[tuple[str, str, str, str], str], guidance: Path | None = None) -> BenchResult:
    """Run every (case, model) unit in worker threads over one client; write packs and usage."""
    run_dir = config.run_dir
    result = BenchResult(run_dir=run_dir, manifest=manifest)
    units = [(case, model) for case in cases for model in config.models]
    pool = ThreadPoolExecutor(max_workers=min(config.parallel_cases, max(len(units), 1)), thread_name_prefix="bench")
    stop = threading.Event()
    interrupted = False
    try:
        journal.append(Event.BENCH_RESUMED if resume else Event.BENCH_STARTED, run_id=config.run_id,
                       endpoint=client.endpoint_id, models=list(config.models), conditions=list(config.conditions),
                       topologies=list(config.topologies), cases=len(cases), pipeline_version=manifest.pipeline_version,
                       **({"guidance": str(guidance)} if guidance is not None else {}))
        progress.phase("generating", len(units) * len(config.conditions) * len(config.topologies), key=PROGRESS_KEY,
                       unit="pipeline runs")
        pipe = backend.make(client, config)

        def work(case: Case, model: str) -> list[CaseRunSummary]:
            if stop.is_set():
                return []
            return _Unit(config=config, case=case, model=model, pipe=pipe, journal=journal, progress=progress,
                         stop=stop, blocked=blocked).run()

        futures = [pool.submit(work, case, model) for case, model in units]
        for future in futures:
            result.runs += future.result()
        result.packs = _write_packs(config, cases, result.runs, journal)
        result.records = {key: run_dir / "records" / key for key in result.packs}
        result.usage = client.usage_snapshot()
    except BaseException as exc:
        stop.set()
        interrupted = holds_interrupt(exc)
        journal.append(Event.INTERRUPTED, error=f"{type(exc).__name__}: {exc}"[:500])
        pool.shutdown(wait=False, cancel_futures=True)
        if owns:
            client.close(cancel=True)  # the workers' calls in flight raise at once
        if not isinstance(exc, KeyboardInterrupt) and holds_interrupt(exc):
            raise KeyboardInterrupt from exc  # an interrupt inside the client's task group
        raise
    finally:
        # On Ctrl-C with a borrowed client, the owner cancels the calls in flight by closing it
        # after we re-raise; waiting here would hold the interrupt until those calls finish
        # (minutes on a local model). Any other error waits for the workers (each stops after
        # its current pipeline run), so none writes into the folder after we return.
        pool.shutdown(wait=owns or not interrupted)
    journal.append(Event.BENCH_FINISHED, runs=len(result.runs), ok=result.n_ok, failed=result.n_failed)
    return result


def prepare_bench(config: BenchConfig, resume: bool, backend: PipelineBackend) -> tuple[list[Case], BenchManifest]:
    """Cases and a fresh manifest, after the resume checks (no model call, nothing written).

    Raises:
        RunError, DataError: As :func:`run_bench` raises them before any call.
    """
    config = with_cache_path(config)
    cases, cases_file = load_bench_cases(config)
    manifest = BenchManifest.build(config, pipeline_version=backend.version, catalog=backend.catalog(),
                                   description=backend.describe(config), cases_file=cases_file, case_ids=tuple(c.case_id for c in cases))
    _check_resume(config, resume, manifest)
    return cases, manifest
