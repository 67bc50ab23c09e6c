"""``evolve bench run``: generate consilium outputs, judge them, report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evolve.consilium import (
    BenchConfig,
    BenchResult,
    PipelineBackend,
    default_backend,
    judge_bench,
    plan_context,
    prepare_bench,
    recorded_guidance,
    run_bench,
)
from evolve.llm import Client
from evolve.report import write_bench_report
from evolve.runs import BenchFolder, ProgressHook, owned_client

__all__ = ["run_and_judge"]


def run_and_judge(
    config: BenchConfig,
    *,
    judge: bool = True,
    calibration_run: Path | None = None,
    report: bool = True,
    client: Client | None = None,
    resume: bool = False,
    progress: ProgressHook | None = None,
    backend: PipelineBackend | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> BenchResult:
    """:func:`~evolve.consilium.run_bench`, then :func:`~evolve.consilium.judge_bench`, then
    the bench report - over one client (the embedded server starts once).

    Args:
        config: Resolved configuration.
        judge: Judge the generated material (consilium paper, rubric-§3).
        calibration_run: The judge file whose winners guide the judge: a calibration run folder
            or its ``judge.json`` (the bench report then adds physician-anchored means). None on
            a resume: the one the run was judged or started with
            (:func:`~evolve.consilium.recorded_guidance`), said in ``notes``.
        report: Write the bench tables (:func:`evolve.report.write_bench_report`).
        client: A ready client; None builds one from ``config.endpoint`` and releases it on any
            exit (calls in flight cancelled after an interrupt).
        resume, progress, backend: As for :func:`~evolve.consilium.run_bench`.
        on_warning: Receives, before any call, each stage whose prompts may not fit the
            endpoint's context (:func:`~evolve.consilium.plan_context`) and each pipeline run
            failed for that reason without a call.

    Raises:
        As :func:`~evolve.consilium.run_bench` and :func:`~evolve.consilium.judge_bench`.
        RunLockedError: Another process is writing the run folder.
    """
    with BenchFolder(config.run_dir).exclusive():  # one process writes a run, for all its steps
        return _bench_steps(config, judge, calibration_run, report, client, resume, progress, backend, on_warning)


def _bench_steps(config: BenchConfig, judge: bool, calibration_run: Path | None, report: bool, client: Client | None,
                 resume: bool, progress: ProgressHook | None, backend: PipelineBackend | None,
                 on_warning: Callable[[str], None] | None) -> BenchResult:
    """The steps of :func:`run_and_judge`, under the run folder's lock."""
    backend = backend or default_backend()
    prepared = prepare_bench(config, resume, backend)  # refuses a bad resume before a server starts
    notes = []
    if resume and judge and calibration_run is None and (calibration_run := recorded_guidance(config.run_dir)):
        notes.append(f"judging with the guidance this run was judged (or started) with: {calibration_run} "
                     "(pass --guidance to judge with another)")
    if on_warning is not None:
        context = plan_context(config, prepared[0])
        for warning in context.warnings:
            on_warning(f"context: {warning}")
        for (case_id, model, condition, topology), reason in context.blocked.items():
            on_warning(f"context: {case_id} {model} {condition} {topology} will fail without a call: {reason}")
    with owned_client(config.endpoint, cache_path=config.cache_path, journal=BenchFolder(config.run_dir).journal(),
                      client=client, journal_usage=True) as client:
        result = run_bench(config, client=client, resume=resume, progress=progress, backend=backend, prepared=prepared,
                           guidance=calibration_run if judge else None)
        result.notes[:0] = notes
        if judge:
            result.judge = judge_bench(config.run_dir, calibration_run=calibration_run, client=client, progress=progress)
        result.usage = client.usage_snapshot()
    if report:
        result.report = write_bench_report(config.run_dir)
    return result
