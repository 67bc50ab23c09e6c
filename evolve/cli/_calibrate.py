"""``evolve calibrate``, ``evolve report`` and ``evolve audit``: a calibration run, its report, its drift audit."""

from __future__ import annotations

import contextlib
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from evolve.cli._app import (
    _guarded,
    _interrupt_on_sigterm,
    _or_fail,
    _price,
    _progress_bar,
    _RichProgress,
    _run_guarded,
    _say,
    _show_plan,
    _warn,
    app,
    err,
    out,
)
from evolve.cli._options import (
    AUDIT_SPEND,
    ENDPOINT,
    PLAN,
    REPORT,
    RUN_ENDPOINT,
    SPEND,
    ArchivesDirOption,
    CalibrationRunIdOption,
    Given,
    OptionGroup,
    PromptsRootOption,
    RunPromptsRootOption,
    flat,
    grouped,
)
from evolve.errors import EvolveError

if TYPE_CHECKING:
    from evolve.calibration import CalibrationResult
    from evolve.outputs import CalibrationReport
    from evolve.workflows._options import CalibrateOptions

_WITH_WORKBOOKS = "With --workbooks: "

WORKBOOKS: Any = OptionGroup({
    "workbooks": Annotated[Optional[Path], typer.Option(
        "--workbooks", help="Physician workbooks folder (consilium paper, physician spreadsheets): import them, split, "
        "then calibrate, all into the run folder.")],
    "cases": Annotated[Optional[Path], typer.Option(
        "--cases", help=_WITH_WORKBOOKS + "the case file (.jsonl/.csv/.parquet), or a bench run / rating-pack folder.")],
    "outputs": Annotated[Optional[Path], typer.Option(
        "--outputs", help=_WITH_WORKBOOKS + "folder of the consilium records the workbooks rate.")],
    "role_map": Annotated[Optional[Path], typer.Option(
        "--role-map", help=_WITH_WORKBOOKS + "CSV specialty,role for specialties that do not name a panel role.")],
    "case_column": Annotated[Optional[list[str]], typer.Option(
        "--column", help=_WITH_WORKBOOKS + "case-file column mapping field=column (repeatable).")],
    "frame_manifest": Annotated[Optional[Path], typer.Option(
        "--frame-manifest", help=_WITH_WORKBOOKS + "calibration frame manifest (default: the rated cases).")],
    "no_header": Annotated[bool, typer.Option(
        "--no-header", help=_WITH_WORKBOOKS + "read sheets without a header row by position (you vouch that their "
        "columns are A..AC in the consilium paper's workbook order; without it such sheets are refused).")],
}, {"no_header": False})
"""``--workbooks`` and the inputs of its import (the consilium paper's physician spreadsheets)."""

BUDGET: Any = OptionGroup({
    "accepted": Annotated[Optional[int], typer.Option(help="Accepted mutants per criterion.")],
    "max_attempts": Annotated[Optional[int], typer.Option(help="Mutation attempts per criterion.")],
    "batch_size": Annotated[Optional[int], typer.Option(help="Mutants per iteration.")],
    "train_repeats": Annotated[Optional[int], typer.Option(help="Judge seeds per candidate during evolution.")],
    "reeval_repeats": Annotated[Optional[int], typer.Option(help="Fresh judge seeds in re-evaluation (>= 2).")],
    "max_train_targets": Annotated[Optional[int], typer.Option(help="Subsample training targets.")],
    "max_validation_targets": Annotated[Optional[int], typer.Option(help="Subsample validation targets.")],
})
"""The evolution budget of each criterion (the config's ``budget``)."""

PackOption = Annotated[Optional[Path], typer.Option("--pack", help="Rating pack folder (required unless --resume or --workbooks).")]
SplitsOption = Annotated[Optional[Path], typer.Option("--splits", help="Split manifests (default: splits/<pack name>).")]
PresetOption = Annotated[str, typer.Option(
    help="Budget preset: 'quick' (minutes on the embedded model) or 'paper' (consilium paper, calibration budget).")]
ConfigFileOption = Annotated[Optional[Path], typer.Option("--config", help="JSON file with config fields.")]
ResumeOption = Annotated[Optional[Path], typer.Option("--resume", help="Continue this run folder (archives/<run_id>).")]
RubricOption = Annotated[Optional[str], typer.Option(
    "--rubric", help="Rubric the pack must be rated on, e.g. 'consilium' (criteria 1-9 evolved, one archive each).")]
CriteriaOption = Annotated[Optional[list[str]], typer.Option("--criterion", help="Criterion to calibrate (repeatable).")]
ConditionsOption = Annotated[Optional[list[str]], typer.Option(
    "--condition", help="Use only targets of this producing condition, e.g. 'structured' (repeatable).")]
ParallelCriteriaOption = Annotated[Optional[int], typer.Option(
    help="Criterion archives evolved at once over the shared client (default 9).")]
AuditOption = Annotated[Optional[bool], typer.Option(
    "--audit/--no-audit", help="Audit the winners for semantic drift at the end (default on; see `evolve audit`).")]
EvaluateHoldoutOption = Annotated[Optional[bool], typer.Option(
    "--evaluate-holdout/--no-evaluate-holdout", help="After the report, score the split's held-out cases with the "
    "calibrated judge into <run>/holdout/ (the final, untouched estimate; Table 5's held-out column). Default: on in the "
    "paper preset, off in quick.")]
RacingOption = Annotated[Optional[str], typer.Option(
    "--racing", help="'on' (default): judge a mutant on growing batches of training targets and stop it once a paired "
    "test finds it unlikely to beat the best (p < 0.5); 'off': every mutant on every training target (the paper).")]
SelectionOption = Annotated[Optional[str], typer.Option(
    "--selection", help="'robust' (default): re-judge the initial prompts and the 3 best mutants on training with 2 "
    "fresh seeds each (selection.finalists, selection.finalist_repeats), lowest MAE over all their calls wins; 'paper': "
    "lowest training MAE (consilium paper, calibration).")]
SeedOption = Annotated[Optional[int], typer.Option(help="Master seed.")]
MinCoverageOption = Annotated[Optional[float], typer.Option(
    help="Least share of numeric judge scores for a selectable candidate.")]


@app.command()
@grouped
def calibrate(
    pack: PackOption = None,
    workbooks: Given = WORKBOOKS,
    splits: SplitsOption = None,
    preset: PresetOption = "quick",
    config_file: ConfigFileOption = None,
    run_id: CalibrationRunIdOption = None,
    resume: ResumeOption = None,
    rubric: RubricOption = None,
    criteria: CriteriaOption = None,
    conditions: ConditionsOption = None,
    parallel_criteria: ParallelCriteriaOption = None,
    audit: AuditOption = None,
    evaluate_holdout: EvaluateHoldoutOption = None,
    budget: Given = BUDGET,
    racing: RacingOption = None,
    selection: SelectionOption = None,
    endpoint: Given = ENDPOINT,
    spend: Given = SPEND,
    seed: SeedOption = None,
    min_coverage: MinCoverageOption = None,
    archives_dir: ArchivesDirOption = None,
    prompts_root: PromptsRootOption = None,
    plan: Given = PLAN,
) -> None:
    """Evolve per-criterion judge guidance against physician ratings and write archives/<run_id>/."""
    values = flat(locals())  # the options as given (before any other local name is bound)
    from evolve.workflows._options import CalibrateOptions

    result = _run_calibration(CalibrateOptions(**values))
    if result is not None:
        _print_calibration(result)


def _run_calibration(options: CalibrateOptions) -> CalibrationResult | None:
    """``evolve calibrate``: the plan, the exported batch or the run (None: nothing was run)."""
    from evolve.runs import CalibrationFolder
    from evolve.workflows import run_calibration

    config = None
    resume = options.resume is not None
    with _run_guarded("evolve calibrate", lambda: config.run_dir if config is not None else None), \
            contextlib.ExitStack() as scratch:
        # --plan imports --workbooks into a scratch folder, removed with it: a plan writes nothing
        into = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="evolve-plan-"))) \
            if options.plan and options.workbooks is not None and not resume else None
        config = options.config(scratch=into, on_warning=_warn, on_imported=lambda text: out.print(text))
        price = _price(options.price_in, options.price_out, config.endpoint)
        if options.plan:
            from evolve.workflows import plan_calibration_run

            _show_plan(plan_calibration_run(config, resume=resume), price, options.calls_per_hour,
                       CalibrationFolder(config.run_dir).journal_path if resume else None, limits=config.endpoint)
            typer.echo(f"planned for run {config.run_dir}: pack {config.pack}, splits {config.splits}")  # paths unwrapped
            return None
        if options.export_batch is not None:
            from evolve.cli._batch import export_note
            from evolve.workflows._batch import calibration_batch_requests, export_batch

            export = export_batch(calibration_batch_requests(config, resume=resume), config.endpoint,
                                  options.export_batch, cache_path=config.cache_path)
            _say(export_note(export, options.export_batch))
            return None
        _interrupt_on_sigterm()
        with _progress_bar() as bar:
            return run_calibration(config, resume=resume, progress=_RichProgress(bar, price), on_warning=_warn,
                                   on_note=lambda n: _warn(n, "note"))
    return None  # not reached: _guarded exits on an error


def _print_calibration(result: CalibrationResult) -> None:
    """The report of a finished calibration, its verdicts and how to use the judge."""
    from evolve.runs import CalibrationFolder

    typer.echo((result.run_dir / CalibrationFolder.REPORT_MD).read_text(encoding="utf-8"))  # unwrapped: tables stay intact
    out.print(f"wrote {result.run_dir}/report.md")
    if result.report is not None:  # run_calibration always ends by writing it
        _print_verdicts(result.report)
    _say(f"use the calibrated judge on new outputs: evolve judge TARGETS --judge {result.run_dir} "
         "(TARGETS: a rating pack folder or a .csv/.jsonl/.parquet/.xlsx table with case_text and target_text)")


def _print_verdicts(report: CalibrationReport) -> None:
    """The last lines of a calibration: per criterion, the winner and its paired verdicts on
    validation; then the warnings in words."""
    from evolve.report import comparisons_text, verdict_text, verdict_warnings

    for r in report.table5:
        v = report.criteria[r.criterion].verdicts
        kind = "evolved" if r.evolved_origin == "mutation" else "initial prompt kept"
        constant = " - no better than a constant" if r.no_better_than_constant else ""
        out.print(f"{r.name or r.criterion}: winner {r.evolved} ({kind}{constant}); validation MAE vs best initial "
                  f"{verdict_text(v.best_initial)}; vs no guidance {verdict_text(v.no_guidance)}; "
                  f"vs training median {verdict_text(v.training_median)}")
    if (text := comparisons_text(report.comparisons)) is not None:
        out.print(text)
    for warning in verdict_warnings(report):
        err.print(f"warning: {warning}")


@app.command()
@grouped
def report(
    run_dir: Path = typer.Argument(..., help="A calibration run folder."),
    bootstrap: Given = REPORT,
    prompts_root: RunPromptsRootOption = None,
) -> None:
    """Rebuild the report (report.md/.json/.html, table5.csv, agreement.csv) from a run's saved artifacts (no model calls)."""
    from evolve.report import write_report

    report_data = _or_fail(write_report, run_dir, **bootstrap, prompts_root=prompts_root)
    for note in report_data.rubric.notes:  # the run's rubric copy was used, the original changed
        _say(f"note: {note}")
    _print_verdicts(report_data)
    _say(f"wrote {run_dir}/report.md, report.json, {'report.html, ' if bootstrap.html else ''}table5.csv, agreement.csv "
         "and judge.json (the calibrated judge)")


@app.command()
@grouped
def audit(
    run_dir: Path = typer.Argument(..., help="A finished calibration run folder (archives/<run_id>)."),
    llm: bool = typer.Option(
        True, "--llm/--no-llm",
        help="Ask the model whether each winner is still about its criterion and consistent with the protocol."),
    embeddings: bool = typer.Option(
        True, "--embeddings/--no-embeddings",
        help="Embedding similarities from the endpoint's /v1/embeddings (recorded as unavailable if it has none)."),
    endpoint: Given = RUN_ENDPOINT,
    spend: Given = AUDIT_SPEND,
    embedding_model: Optional[str] = typer.Option(None, help="Model id for /v1/embeddings (default: the endpoint's model)."),
    rebuild_report: bool = typer.Option(
        True, "--report/--no-report", help="Rebuild the run's report so its drift column shows the flags."),
    prompts_root: RunPromptsRootOption = None,
) -> None:
    """Semantic-drift audit: is each winner still about its criterion? Writes audit.md and audit.json.

    Compares every winner (and every initial prompt, as reference) with the criterion's
    definition and the initial prompts: TF-IDF and embedding similarity, key terms kept or
    lost, length, and an LLM check against the protocol. Exit code 0 whenever the audit ran,
    drift or not; the flags are in the printed table.
    """
    from evolve.audit import AUDIT_MD, audit_run
    from evolve.runs import CalibrationFolder

    again = shlex.join(["evolve", *sys.argv[1:]]) if sys.argv[1:2] == ["audit"] else f"evolve audit {run_dir}"
    with _guarded(lambda: again,  # as typed: its endpoint options included
                  lambda: f"interrupted; the audit wrote nothing (finished model calls are cached): run it again: {again}"):
        settings = _audit_endpoint(run_dir, {**endpoint, **spend})
        _interrupt_on_sigterm()
        result = audit_run(run_dir, use_llm=llm, use_embeddings=embeddings, endpoint=settings,
                           embedding_model=embedding_model, prompts_root=prompts_root)
    typer.echo((run_dir / AUDIT_MD).read_text(encoding="utf-8"))  # unwrapped: tables stay intact
    if rebuild_report and (run_dir / CalibrationFolder.REPORT_JSON).is_file():
        _rebuild_report(run_dir, prompts_root)
    flags = ", ".join(f"{c}: {f}" for c, f in result.flags.items())
    out.print(f"wrote {run_dir}/audit.md and audit.json ({flags})")


def _audit_endpoint(run_dir: Path, options: dict[str, Any]) -> Any:
    """The run's endpoint with the endpoint options of ``evolve audit`` applied (None: none given).

    Raises:
        ConfigError: The options make an invalid endpoint.
    """
    from evolve.config import EndpointSettings, load_run_config
    from evolve.layering import validated
    from evolve.workflows._options import endpoint_overrides

    config = load_run_config(run_dir)
    overrides = endpoint_overrides(**options)
    if not overrides:
        return None
    return validated(EndpointSettings, {**config.endpoint.model_dump(), **overrides}, "endpoint options")


def _rebuild_report(run_dir: Path, prompts_root: Path | None) -> None:
    """After an audit: the run's report again, with the drift flags (a failure only warned)."""
    from evolve.report import write_report

    try:
        write_report(run_dir, prompts_root=prompts_root)
        out.print(f"rebuilt {run_dir}/report.md with the drift flags")
    except EvolveError as exc:
        err.print(f"warning: the report was not rebuilt ({exc}); run `evolve report {run_dir}`")

