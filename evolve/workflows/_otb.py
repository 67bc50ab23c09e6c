"""``evolve otb run``: generate OpenTumorBoard answers, judge them, report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evolve.errors import require_extra
from evolve.llm import Client
from evolve.otb import (
    GenerationCounts,
    OtbConfig,
    OtbJudgeResult,
    generate_otb,
    judge_otb,
    load_otb_inputs,
)
from evolve.outputs import OtbReport
from evolve.report import write_otb_report
from evolve.runs import OtbFolder, ProgressHook, owned_client, with_cache_path

__all__ = ["OtbRunResult", "run_otb"]


@dataclass
class OtbRunResult:
    """What :func:`run_otb` did: generation counts per (task, model), the judging, the report."""

    run_dir: Path
    generated: dict[tuple[str, str], GenerationCounts] = field(default_factory=dict)
    judge: OtbJudgeResult | None = None
    report: OtbReport | None = None


def run_otb(config: OtbConfig, *, judge: bool = True, report: bool = True, client: Client | None = None,
            resume: bool = False, guidance: dict[str, str] | None = None, calibration_run: Path | None = None,
            progress: ProgressHook | None = None) -> OtbRunResult:
    """:func:`~evolve.otb.generate_otb`, then :func:`~evolve.otb.judge_otb`, then the report,
    over one client (the embedded server starts once).

    Args:
        config: The run.
        judge: Judge the answers (and, with ``report``, write ``otb_report.md``).
        report: Write the report after judging.
        client: A ready client; None opens one from ``config.endpoint`` and releases it.
        resume: Continue ``config.run_dir`` (answered ids are kept; calls come from the cache).
        guidance: Extra judge guidance per judge rubric.
        calibration_run: A calibration run of rubric ``otb`` whose winners guide the judge.
        progress: Progress hook.

    Raises:
        As :func:`~evolve.otb.generate_otb` and :func:`~evolve.otb.judge_otb`.
        RunLockedError: Another process is writing the run folder.
        MissingExtraError: The ``otb`` extra (its metrics) is not installed: checked before any call.
    """
    require_extra("otb", "OpenTumorBoard (its ROUGE-L and embedding-similarity metrics)")
    with OtbFolder(config.run_dir).exclusive():  # one process writes a run, for all its steps
        return _otb_steps(config, judge, report, client, resume, guidance, calibration_run, progress)


def _otb_steps(config: OtbConfig, judge: bool, report: bool, client: Client | None, resume: bool,
               guidance: dict[str, str] | None, calibration_run: Path | None,
               progress: ProgressHook | None) -> OtbRunResult:
    """The steps of :func:`run_otb`, under the run folder's lock."""
    config = with_cache_path(config)
    load_otb_inputs(config)  # bad input (every file's problems together) fails before a server starts
    result = OtbRunResult(run_dir=config.run_dir)
    with owned_client(config.endpoint, cache_path=config.cache_path, journal=OtbFolder(config.run_dir).journal(),
                      client=client, journal_usage=True) as client:
        result.generated = generate_otb(config, client=client, resume=resume, progress=progress)
        if judge:
            result.judge = judge_otb(config.run_dir, client=client, guidance=guidance, calibration_run=calibration_run,
                                     progress=progress)
    if judge and report:
        result.report = write_otb_report(config.run_dir)
    return result
