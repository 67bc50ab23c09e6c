"""``evolve calibrate``: calibrate, audit, report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from evolve.audit import audit_run
from evolve.calibration import CalibrationResult, calibrate, plan_calibration
from evolve.config import CalibrationConfig
from evolve.data import RatingPack, load_pack
from evolve.errors import NoWinnerError
from evolve.llm import Client
from evolve.report import write_report
from evolve.runs import CalibrationFolder, Event, ProgressHook, ScoringFolder, owned_client
from evolve.splits import load_splits
from evolve.workflows._judge import JudgeRunOptions, ScoringSummary, run_judge

__all__ = ["evaluate_holdout", "run_calibration"]


def run_calibration(
    config: CalibrationConfig,
    *,
    client: Client | None = None,
    resume: bool = False,
    progress: ProgressHook | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> CalibrationResult:
    """Calibrate every requested criterion, audit the winners, write the report.

    Steps over one client: :func:`evolve.calibration.calibrate` (archives, re-evaluation,
    tables); :func:`evolve.audit.audit_run` when ``config.audit`` (consilium paper, calibration semantic review);
    with ``config.evaluate_holdout``, the report (for ``judge.json``) and :func:`evaluate_holdout`;
    the client's ``usage`` is journaled when it is released (every call, the audit's included); then
    :func:`evolve.report.write_report` and ``run_finished``. Inputs are checked before the
    embedded server starts (:func:`evolve.calibration.plan_calibration`).

    Args:
        config: Resolved configuration.
        client: A ready client (tests pass one over the fake provider); None builds one from
            ``config.endpoint`` (starting the embedded server if so configured) and releases it
            on any exit (calls in flight cancelled after an interrupt).
        resume: Continue the run in ``config.run_dir`` (finished calls come from the cache).
        progress: Progress hook.
        on_warning: Receives each warning about the run before it starts (a budget too small
            to calibrate, :func:`evolve.calibration.budget_warnings`); they are journaled too.
        on_note: Receives each choice the plan made for the user before the run starts (the
            ``paper`` preset's structured targets, ``CalibrationConfig.prefer_condition``), and
            what the Batch API path does (``--batch``: a batch submitted, its status).

    Returns:
        The run folder, the winners and the parsed ``report.json``.

    Raises:
        As :func:`evolve.calibration.calibrate` and :func:`evolve.audit.audit_run`.
        NoWinnerError: After the report is written, when some criterion found no selectable
            candidate (the report covers the others).
        RunLockedError: Another process is writing the run folder.
    """
    with CalibrationFolder(config.run_dir).exclusive():  # one process writes a run, for all its steps
        return _calibration_steps(config, client, resume, progress, on_warning, on_note)


def _calibration_steps(config: CalibrationConfig, client: Client | None, resume: bool, progress: ProgressHook | None,
                       on_warning: Callable[[str], None] | None,
                       on_note: Callable[[str], None] | None) -> CalibrationResult:
    """The steps of :func:`run_calibration`, under the run folder's lock."""
    plan = plan_calibration(config, resume=resume)  # refuses bad inputs before a server starts
    if on_warning is not None:
        for warning in plan.warnings:
            on_warning(warning)
    if on_note is not None:
        for note in plan.notes:
            on_note(note)
    journal = CalibrationFolder(config.run_dir).journal()
    with owned_client(config.endpoint, cache_path=config.cache_path, journal=journal, client=client,
                      journal_usage=True) as client:
        if on_note is not None and client.batch is not None and client.batch.on_note is None:
            client.batch.on_note = on_note
        result = calibrate(config, client=client, resume=resume, progress=progress, plan=plan)
        if config.audit:
            audit_run(result.run_dir, client=client)
        if config.evaluate_holdout and result.winners:
            # judge.json, which the held-out scoring reads; not from an old holdout/summary.json,
            # which that scoring rewrites (so a damaged one is mended by a resume)
            write_report(result.run_dir, holdout=False)
            evaluate_holdout(config, client=client, progress=progress)
    report = write_report(result.run_dir)  # with the held-out column when there is one
    journal.append(Event.RUN_FINISHED, winners=result.winners, failed=sorted(result.failed))
    if result.failed:
        done = f"the other {len(result.winners)} finished and are in {result.run_dir / 'report.md'}" if result.winners \
            else "no criterion finished"
        raise NoWinnerError(f"{len(result.failed)} criterion/criteria ended without a winner ({done}): "
                            + " | ".join(result.failed.values()))
    return dataclasses.replace(result, report=report)


def evaluate_holdout(config: CalibrationConfig, *, client: Client | None = None,
                     progress: ProgressHook | None = None) -> ScoringSummary | None:
    """Score the split's held-out cases with the run's judge file (the final, untouched estimate).

    The held-out targets (of the run's conditions, when it used only some) are scored exactly
    as ``evolve judge`` would into ``<run>/holdout/`` (a :class:`~evolve.runs.ScoringFolder`);
    :func:`evolve.report.write_report` then adds their MAE and the physician-anchored vs actual
    held-out mean to Table 5 and ``judge.json``. A held-out folder already there is resumed
    (its finished calls come from the cache).

    Args:
        config: The run's configuration (``judge.json`` must already be in its folder).
        client: The run's client (None: opened from ``config.endpoint``).
        progress: Progress hook.

    Returns:
        The scoring summary, or None when the split holds no held-out case (journaled).

    Raises:
        RunError: No ``judge.json`` in the run folder.
    """
    folder = CalibrationFolder(config.run_dir)
    holdout = tuple(load_splits(config.splits).holdout)
    if not holdout:
        folder.journal().append(Event.WARNING, message="--evaluate-holdout: the split holds no held-out case; nothing scored")
        return None
    pack = load_pack(config.pack, check_rubric=False).subset(holdout)
    if config.conditions is not None:
        targets = tuple(t for t in pack.targets if t.condition in config.conditions)
        kept = {t.target_id for t in targets}
        pack = RatingPack(path=None, manifest=pack.manifest, cases=pack.cases, targets=targets,
                          ratings=tuple(r for r in pack.ratings if r.target_id in kept))
    out = folder / folder.HOLDOUT
    options = JudgeRunOptions(targets=pack, judge=folder.path, run_dir=out, resume=(out / ScoringFolder.CONFIG).is_file(),
                              endpoint=config.endpoint, cache_path=config.cache_path)
    return run_judge(options, client=client, progress=progress)
