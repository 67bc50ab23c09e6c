"""``evolve judge``: score new targets with a calibrated judge file, then write the report."""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from evolve.calibrated import JudgeFile, load_judge_file
from evolve.data import RatingPack
from evolve.errors import ConfigError
from evolve.llm import Client
from evolve.outputs import ScoringReport
from evolve.report import LAMBDA_ZERO, write_scoring_report
from evolve.runs import EndpointSettings, Event, ProgressHook, ScoringFolder, default_cache_path, owned_client
from evolve.scoring import ScoringTargets, check_statements, chosen_criteria, read_targets, score_targets, select_cases

__all__ = ["CalibratedJudge", "CriterionScore", "JudgeRunOptions", "ScoringSummary", "load_judge", "run_judge"]


class JudgeRunOptions(BaseModel):
    """The settings of one scoring run (``evolve judge``).

    Attributes:
        targets: A rating pack folder, a table file (.csv/.jsonl/.parquet/.xlsx), a DataFrame or a
            :class:`~evolve.data.RatingPack` in memory.
        judge: A calibration run folder or its ``judge.json``.
        run_id: Run folder name under ``archives_dir`` (default: ``judge-<targets>-<UTC time>``).
        archives_dir: Where run folders go.
        run_dir: The run folder itself (overrides ``archives_dir``/``run_id``).
        columns: Table column mapping ``field -> column`` (as ``evolve ratings import table``).
        not_evaluable: Rating cells meaning *not evaluable* (rated tables).
        score_map: Rating labels -> scores per criterion (rated tables; ``"*"``: every criterion).
        rows: JSONL only: the dotted path whose every element is one row (``answers.*.claims.*``).
        where: ``COLUMN=VALUE`` conditions rows must meet (e.g. ``metadata.field=Healthcare / Medicine``).
        layout: A rated table's layout, ``long`` or ``wide`` (None: wide when ``columns`` maps
            ``criterion:<id>`` keys, else long).
        skip_empty: Rated tables: skip empty score cells (counted) instead of refusing them.
        cases: A case-id file (e.g. a split's ``holdout.txt``): score only those cases.
        criteria: Criterion ids to score (default: every criterion of the judge file).
        resume: Continue the run folder (finished calls come from the cache).
        endpoint: Where calls go (default: the embedded model).
        model: Model id to send instead of the judge file's (then not the validated judge: warned).
        cache_path: The response cache (default: ``$EVOLVE_CACHE_DIR/responses.sqlite``).
        n_boot: Bootstrap replicates per interval (default: ``$EVOLVE_REPORT_REPLICATES``, else 2000).
        html: Also write ``report.html``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    targets: Any  # a Path, a DataFrame or a RatingPack (checked by _targets_kind)
    judge: Path
    run_id: str | None = None
    archives_dir: Path = Path("archives")
    run_dir: Path | None = None
    columns: dict[str, str] = Field(default_factory=dict)
    not_evaluable: tuple[str, ...] = ()
    score_map: dict[str, dict[str, int]] = Field(default_factory=dict)
    rows: str | None = None
    where: tuple[str, ...] = ()
    layout: Literal["long", "wide"] | None = None
    skip_empty: bool = False
    cases: Path | None = None
    criteria: tuple[str, ...] | None = None
    resume: bool = False
    endpoint: EndpointSettings = Field(default_factory=EndpointSettings)
    model: str | None = None
    cache_path: Path | None = None
    n_boot: int | None = Field(default=None, ge=1)
    html: bool = True

    @field_validator("targets", mode="before")
    @classmethod
    def _targets_kind(cls, value: Any) -> Any:
        if isinstance(value, str):
            return Path(value)
        if not isinstance(value, (Path, pd.DataFrame, RatingPack)):
            raise ValueError(f"targets must be a pack folder or table file (a path), a DataFrame or a RatingPack, "
                             f"not {type(value).__name__}")
        return value

    def folder(self) -> Path:
        """The run folder these options name."""
        if self.run_dir is not None:
            return self.run_dir
        if self.run_id is None:
            if self.resume:
                raise ConfigError("--resume needs the run to continue: pass --run-id (the run folder's name).")
            stem = self.targets.stem if isinstance(self.targets, Path) else "pack" if isinstance(self.targets, RatingPack) else "frame"
            return self.archives_dir / f"judge-{stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
        return self.archives_dir / self.run_id


class CriterionScore(BaseModel):
    """One criterion of a scoring run, in numbers (the report's headline).

    Attributes:
        criterion_id, name: The criterion.
        n_items, n_scored, n_failed, n_not_evaluable, n_excluded: Where every (criterion,
            target) went; ``n_items`` is their sum.
        coverage: Share of the winner's calls that gave a numeric score (None: no call).
        mean, low, high: Mean judge score over scored items with its case-clustered interval.
        anchored, anchored_low, anchored_high: Physician-anchored (PPI++) mean and interval.
        anchored_refused: Why no anchored mean (e.g. too few rated cases), else None.
        anchored_lam: The judge's weight in the anchored mean (PPI++'s lambda, 0-1); at 0 the
            anchored mean is the rated sample's physician mean and says nothing of these targets.
        physician_mean, physician_low, physician_high: The targets' physicians' mean (rated
            targets) with its case-clustered interval, else None.
        mae, no_guidance_mae: MAE of the winner and of no guidance against the targets' ratings.
    """

    criterion_id: str
    name: str
    n_items: int
    n_scored: int
    n_failed: int
    n_not_evaluable: int
    n_excluded: int
    coverage: float | None
    mean: float | None
    low: float | None
    high: float | None
    anchored: float | None = None
    anchored_low: float | None = None
    anchored_high: float | None = None
    anchored_refused: str | None = None
    anchored_lam: float | None = None
    physician_mean: float | None = None
    physician_low: float | None = None
    physician_high: float | None = None
    mae: float | None = None
    no_guidance_mae: float | None = None


class ScoringSummary(BaseModel):
    """What :func:`run_judge` (and :meth:`CalibratedJudge.score`) return.

    Attributes:
        run_dir: The scoring run folder.
        judge_run_id: The calibration run the judge comes from.
        rated: Whether the targets carried ratings.
        criteria: Per criterion, the headline numbers.
        report: The whole report (``summary.json``, :class:`~evolve.outputs.ScoringReport`).
    """

    run_dir: Path
    judge_run_id: str
    rated: bool
    criteria: dict[str, CriterionScore]
    report: ScoringReport

    def items(self) -> pd.DataFrame:
        """``items.csv``: one row per (criterion, target) with its status and mean score."""
        return pd.read_csv(self.run_dir / ScoringFolder.ITEMS, dtype={"case_id": str, "target_id": str})

    def describe(self) -> str:
        """One line per criterion: the mean with its interval, the anchored mean, the counts."""
        lines = []
        for c in self.criteria.values():
            mean = ("no scored item" if c.mean is None else
                    f"{c.mean:.3f} (no interval: its scored items come from one case)" if c.low is None and c.high is None
                    else f"{c.mean:.3f} [{_f(c.low)}, {_f(c.high)}]")
            anchored = (f"refused ({c.anchored_refused})" if c.anchored_refused else
                        "—" if c.anchored is None else f"{c.anchored:.3f} [{_f(c.anchored_low)}, {_f(c.anchored_high)}]")
            if c.anchored is not None and c.anchored_lam == 0:
                anchored += f" ({LAMBDA_ZERO})"
            phys = "" if c.physician_mean is None else \
                f"; physicians' mean {c.physician_mean:.3f} [{_f(c.physician_low)}, {_f(c.physician_high)}]"
            lines.append(f"{c.criterion_id}: judge mean {mean}; physician-anchored {anchored}{phys} "
                         f"({c.n_scored} of {c.n_items} items scored, {c.n_failed} failed, {c.n_not_evaluable} not evaluable, "
                         f"{c.n_excluded} excluded)")
        return "\n".join(lines)


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _targets_sha(targets: ScoringTargets) -> str:
    pack = targets.pack
    payload = json.dumps([[c.model_dump(mode="json") for c in pack.cases], [t.model_dump(mode="json") for t in pack.targets],
                          [r.model_dump(mode="json") for r in pack.ratings]], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def judge_fingerprint(judge: JudgeFile) -> str:
    """sha256 of what a judge file sends to the model (rubric files, judge settings, seed policy,
    each criterion's winner and no-guidance texts) - not what it says about them (verdicts, the
    held-out evaluation), which a later report may add without changing a single call."""
    payload = {"rubric_files": judge.rubric_files, "judge": judge.judge.model_dump(mode="json"),
               "seed_policy": judge.seed_policy.model_dump(mode="json"),
               "criteria": {c: [e.winner.text, *(a.text for a in e.alternatives if a.kind == "no-guidance")]
                            for c, e in judge.criteria.items()}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def scoring_config(options: JudgeRunOptions, judge: JudgeFile, targets: ScoringTargets, folder: ScoringFolder) -> dict[str, Any]:
    """The settings a scoring run stores in ``config.json`` and a resume compares."""
    src = options.targets
    return {
        "run_id": folder.path.name,
        "targets": folder.portable(src) if isinstance(src, Path) else targets.source,
        "targets_sha256": _targets_sha(targets),
        "rated": targets.rated,
        "judge": folder.portable(options.judge),
        "judge_run_id": judge.run_id,
        "judge_sha256": judge_fingerprint(judge),
        "columns": options.columns,
        "not_evaluable": list(options.not_evaluable),
        "score_map": options.score_map,
        "rows": options.rows,
        "where": list(options.where),
        **({"layout": options.layout} if options.layout else {}),  # only when given: older runs resume as before
        **({"skip_empty": True} if options.skip_empty else {}),
        "cases": folder.portable(options.cases) if options.cases is not None else None,
        "criteria": list(options.criteria) if options.criteria else None,
        "model": options.model,
        "endpoint": options.endpoint.resume_fields(),
        "cache_path": str(options.cache_path or default_cache_path()),
    }


def run_judge(
    options: JudgeRunOptions,
    *,
    client: Client | None = None,
    progress: ProgressHook | None = None,
    judge: JudgeFile | None = None,
    on_warning: Any = None,
    on_note: Any = None,
) -> ScoringSummary:
    """Score targets with a calibrated judge, then write the report (``evolve judge``).

    Reads the judge file and the targets before any server starts; scores them with
    :func:`evolve.scoring.score_targets` over one client (owned, or the caller's); writes
    ``summary.json``, ``report.md`` and ``report.html`` (:func:`evolve.report.write_scoring_report`).

    Args:
        options: The settings.
        client: A ready client (tests pass one over the fake provider); None opens one from
            ``options.endpoint`` and releases it on any exit.
        progress: Progress hook.
        judge: The judge file already loaded (else read from ``options.judge``).
        on_warning: Receives each warning (e.g. a model other than the validated one).
        on_note: Receives what the Batch API path does (``--batch``: a batch submitted, its
            status, lines asked again), one line each.

    Returns:
        The summary: per criterion the counts, the mean with its interval, the anchored mean.

    Raises:
        RunError: No judge file, a run folder that exists without ``resume`` (or differs).
        PackError: Unreadable targets (every bad cell named by file, row and column), or targets
            with or without a statement where the calibration's were the other way.
        ConfigError: An unknown criterion.
        RunLockedError: Another process is writing the run folder.
    """
    judge = judge or load_judge_file(options.judge)
    targets = judge_targets(options, judge)  # before the folder exists
    folder = ScoringFolder(options.folder())
    config = scoring_config(options, judge, targets, folder)
    warnings = judge_warnings(judge, options.criteria)
    if options.model is not None and options.model != judge.judge.model:
        warnings.append(f"the judge was validated with model {judge.judge.model!r}; scoring with {options.model!r} uses "
                        "another judge, whose agreement with physicians was never measured")
    for w in warnings:
        if on_warning is not None:
            on_warning(w)
    endpoint = options.endpoint
    if options.model is not None or "model" not in endpoint.model_fields_set:
        endpoint = endpoint.model_copy(update={"model": options.model or judge.judge.model})
    with folder.exclusive():  # one process writes a run folder (the judge file it reads needs no lock)
        with owned_client(endpoint, cache_path=options.cache_path, journal=folder.journal(), client=client,
                          journal_usage=True) as used:
            if on_note is not None and used.batch is not None and used.batch.on_note is None:
                used.batch.on_note = on_note
            result = score_targets(judge, targets, client=used, run_dir=folder.path, config=config,
                                   criteria=options.criteria, resume=options.resume, model=options.model,
                                   progress=progress)
        for w in warnings:
            folder.journal().append(Event.WARNING, message=w)
        report = write_scoring_report(result.run_dir, n_boot=options.n_boot, html=options.html)
    return summary_of(result.run_dir, judge.run_id, report)


def judge_targets(options: JudgeRunOptions, judge: JudgeFile) -> ScoringTargets:
    """The targets ``options`` name, read as the run reads them (a table's columns, cells, layout
    and rows; ``--cases``), checked against the judge file's statements - shared by the run, its
    plan and its batch export, so all three see the same targets.

    Raises:
        PackError: Unreadable targets, or targets with or without a statement where the
            calibration's were the other way.
        ConfigError: An unknown criterion.
    """
    targets = read_targets(options.targets, judge, columns=options.columns, not_evaluable=options.not_evaluable,
                           score_map=options.score_map, rows=options.rows, where=options.where, layout=options.layout,
                           skip_empty=options.skip_empty)
    if options.cases is not None:
        targets = select_cases(targets, options.cases)
    check_statements(judge, targets, chosen_criteria(judge, options.criteria))
    return targets


def judge_warnings(judge: JudgeFile, criteria: Sequence[str] | None = None) -> list[str]:
    """What the judge file says against using a criterion's judge, in words: no better than a
    constant on validation, a winner the drift audit flagged, or winners never audited."""
    out = []
    chosen = {cid: entry for cid, entry in judge.criteria.items() if not criteria or cid in criteria}
    unaudited = [cid for cid, entry in chosen.items() if entry.drift is None]
    if unaudited:
        out.append(f"the winning guidance of {', '.join(unaudited)} was never audited for semantic drift (calibration "
                   f"{judge.run_id} ran with --no-audit, or before audits); `evolve audit` on that run folder audits "
                   "it and refreshes the judge file")
    for cid, entry in chosen.items():
        if entry.no_better_than_constant:
            out.append(f"criterion {cid}: on validation this judge was no better than a constant (always answering the "
                       f"training median {entry.training_median:g}); its scores add nothing the constant does not")
        if entry.drift in ("drift", "review"):
            out.append(f"criterion {cid}: the drift audit flagged the winning guidance '{entry.drift}'; read audit.md of "
                       f"run {judge.run_id} before trusting its scores")
    return out


def summary_of(run_dir: Path, judge_run_id: str, report: ScoringReport) -> ScoringSummary:
    """A :class:`ScoringSummary` from a scoring report (``summary.json``)."""
    criteria = {}
    for cid, c in report.criteria.items():
        a, n, rated = c.anchored, c.counts, c.rated
        phys = rated.physician_mean if rated is not None else None
        winner_mae = rated.winner.mae if rated is not None else None
        none_mae = rated.no_guidance.mae if rated is not None else None
        criteria[cid] = CriterionScore(
            criterion_id=cid, name=c.name, n_items=n.n_items, n_scored=n.n_scored, n_failed=n.n_failed,
            n_not_evaluable=n.n_not_evaluable, n_excluded=n.n_excluded, coverage=c.coverage,
            mean=c.judge_mean.estimate, low=c.judge_mean.low, high=c.judge_mean.high,
            anchored=a.estimate, anchored_low=a.low, anchored_high=a.high, anchored_refused=a.refused, anchored_lam=a.lam,
            physician_mean=phys.estimate if phys else None, physician_low=phys.low if phys else None,
            physician_high=phys.high if phys else None,
            mae=winner_mae.estimate if winner_mae else None, no_guidance_mae=none_mae.estimate if none_mae else None,
        )
    return ScoringSummary(run_dir=Path(run_dir), judge_run_id=judge_run_id, rated=report.rated, criteria=criteria,
                          report=report)


class CalibratedJudge:
    """A calibrated judge, ready to score new outputs (``evolve.load_judge(path)``).

    Args:
        path: A calibration run folder or its ``judge.json``.

    Raises:
        RunError: No judge file there (``evolve report RUN`` writes it).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.file: JudgeFile = load_judge_file(self.path)

    def __repr__(self) -> str:
        return f"CalibratedJudge({str(self.path)!r}: run {self.file.run_id!r}, criteria {list(self.file.criteria)})"

    @property
    def criteria(self) -> list[str]:
        """The criteria the judge was calibrated on."""
        return list(self.file.criteria)

    def guidance(self, criterion_id: str) -> str | None:
        """The winning guidance of ``criterion_id`` (None when the winner is no guidance)."""
        return self.file.guidance(criterion_id)

    def score(
        self,
        targets: pd.DataFrame | Path | str,
        *,
        run_dir: Path | str | None = None,
        client: Client | None = None,
        endpoint: EndpointSettings | Mapping[str, Any] | str | None = None,
        columns: Mapping[str, str] | None = None,
        rows: str | None = None,
        where: Sequence[str] = (),
        not_evaluable: Sequence[str] = (),
        score_map: Mapping[str, Mapping[str, int]] | None = None,
        layout: Literal["long", "wide"] | None = None,
        skip_empty: bool = False,
        cases: Path | str | None = None,
        criteria: Sequence[str] | None = None,
        resume: bool = False,
        archives_dir: Path | str = "archives",
        run_id: str | None = None,
        progress: ProgressHook | None = None,
        n_boot: int | None = None,
        html: bool = True,
    ) -> ScoringSummary:
        """Score ``targets`` (a DataFrame in the table importer's columns - at least ``case_text``
        and ``target_text`` - a table file or a rating pack folder) as :func:`run_judge` does.

        Args:
            targets: What to score.
            run_dir: The run folder (default: ``archives_dir/run_id``).
            client: A ready client (else one from ``endpoint``).
            endpoint: A base URL, :class:`~evolve.runs.EndpointSettings` or a dict of its fields
                (default: the embedded model).
            columns: ``field -> column`` mapping.
            rows, where, not_evaluable, score_map: As for ``evolve ratings import table`` (nested JSONL
                rows, ``COLUMN=VALUE`` row conditions, rated tables' not-evaluable cells and label map).
            layout, skip_empty: A rated table's layout (``long``/``wide``; None: wide when ``columns``
                maps ``criterion:<id>`` keys) and whether its empty score cells are skipped (counted).
            cases: A case-id file (e.g. ``splits/<name>/holdout.txt``): score only those cases.
            criteria: Criterion ids (default: all).
            resume: Continue ``run_dir`` (finished calls free from the cache).
            archives_dir, run_id: Where the run folder goes when ``run_dir`` is None.
            progress: Progress hook.
            n_boot: Bootstrap replicates (default: ``$EVOLVE_REPORT_REPLICATES``, else 2000).
            html: Also write ``report.html``.
        """
        if isinstance(endpoint, str):
            settings = EndpointSettings(base_url=endpoint)
        elif isinstance(endpoint, Mapping):
            settings = EndpointSettings(**endpoint)
        else:
            settings = endpoint or EndpointSettings()
        options = JudgeRunOptions(
            targets=Path(targets) if isinstance(targets, str) else targets, judge=self.path, run_id=run_id,
            archives_dir=Path(archives_dir), run_dir=Path(run_dir) if run_dir is not None else None, columns=dict(columns or {}),
            rows=rows, where=tuple(where), not_evaluable=tuple(not_evaluable),
            score_map={k: dict(v) for k, v in (score_map or {}).items()}, layout=layout, skip_empty=skip_empty,
            cases=Path(cases) if cases is not None else None, criteria=tuple(criteria) if criteria else None,
            resume=resume, endpoint=settings, n_boot=n_boot, html=html)
        return run_judge(options, client=client, progress=progress, judge=self.file, on_warning=_warn)


def _warn(message: str) -> None:
    """A scoring run's warning (no better than a constant, drift, another model) as a Python
    :class:`UserWarning`, as :func:`evolve.calibrate` passes its run's warnings."""
    warnings.warn(message, UserWarning, stacklevel=4)


def load_judge(path: Path | str) -> CalibratedJudge:
    """Load a calibrated judge: ``evolve.load_judge("archives/RUN").score(frame)``.

    Args:
        path: A calibration run folder or its ``judge.json``.

    Raises:
        RunError: No judge file there, or not one this evolve reads.
    """
    return CalibratedJudge(path)
