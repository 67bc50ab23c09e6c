"""``evolve bench``: the consilium benchmark runner (generate second opinions, judge them, the tables)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from evolve.cli._app import (
    _guarded,
    _interrupt_on_sigterm,
    _or_fail,
    _price,
    _progress_bar,
    _rejudge_command,
    _RichProgress,
    _run_guarded,
    _run_spend,
    _say,
    _show_plan,
    _warn,
    _warn_guidance,
    _warn_self_judging,
    bench_app,
    err,
    out,
)
from evolve.cli._options import (
    BENCH_ENDPOINT,
    BENCH_FOLDER,
    GENERATION_SPEND,
    JUDGE_SPEND,
    PLAN,
    REPORT,
    Given,
    OptionGroup,
    PromptsRootOption,
    RunPromptsRootOption,
    flat,
    grouped,
    in_range,
)
from evolve.errors import EvolveError

if TYPE_CHECKING:
    from evolve.consilium import BenchResult, JudgeBenchResult
    from evolve.runs import Price
    from evolve.workflows._options import BenchJudgeOptions, BenchRunOptions

GuidanceOption = Annotated[Optional[Path], typer.Option(
    "--guidance", help="Judge file whose validated winners guide the judge: a calibration run folder (archives/<run_id>) "
    "or its judge.json. The bench report then adds physician-anchored means.")]
RunDirArgument = Annotated[Path, typer.Argument(help="A benchmark run folder (archives/<run_id>).")]

GENERATION: Any = OptionGroup({
    "models": Annotated[Optional[list[str]], typer.Option(
        "--model", help="Generating model (repeatable; each runs every stage). Default: the endpoint's model.")],
    "conditions": Annotated[Optional[list[str]], typer.Option(
        "--condition", help="free-form and/or structured (repeatable; default both).")],
    "topologies": Annotated[Optional[list[str]], typer.Option(
        "--topology", help="single and/or n+1 (repeatable; default single).")],
    "workers": Annotated[Optional[list[str]], typer.Option(
        "--worker", help="Worker model of the n+1 topology: proposes a panel and writes every role's opinion "
        "(repeatable; the paper used 3).")],
    "consolidator": Annotated[Optional[str], typer.Option(
        "--consolidator", help="n+1 consolidator: merges the workers' panels and opinions and runs the "
        "consilium and finalizer (default: the generating model).")],
    "max_cases": Annotated[Optional[int], typer.Option(
        "--max-cases", callback=in_range(1, 10_000_000), help="Use the first N cases in source order (quick preset: 3).")],
    "max_rounds": Annotated[Optional[int], typer.Option(
        "--max-rounds", callback=in_range(1, 5), help="Most review rounds (paper: 5).")],
})
"""What ``bench run`` generates: models, conditions, topologies, how many cases and rounds."""

JUDGING: Any = OptionGroup({
    "judge": Annotated[bool, typer.Option("--judge/--no-judge", help="Judge the outputs after generating them (default on).")],
    "guidance": GuidanceOption,
    "judge_model": Annotated[Optional[str], typer.Option(
        "--judge-model", help="Judge model id (default: the endpoint's model, which is the first --model when "
        "--model is given and the endpoint names none; a generating model judging its own outputs is warned about).")],
    "judge_repeats": Annotated[Optional[int], typer.Option(
        "--judge-repeats", callback=in_range(1, 20), help="Judge calls per target and criterion (default 1).")],
}, {"judge": True})
"""How ``bench run`` judges what it generated."""

CasesOption = Annotated[Optional[Path], typer.Option(
    "--cases", help="Case file (.jsonl/.csv/.parquet; doi, title, case_text, answer) or a rating-pack "
    "folder whose cases.jsonl is read (e.g. ratings/savage). Required unless --resume.")]
CaseColumnOption = Annotated[Optional[list[str]], typer.Option(
    "--column", help="Case-file column mapping field=column (doi, title, text, answer, case_id); repeatable.")]
PresetOption = Annotated[str, typer.Option(help="'quick' (3 cases, short outputs, 2 rounds on the embedded model) or "
                                           "'paper' (the consilium paper's output limits, 5 rounds).")]
ConfigFileOption = Annotated[Optional[Path], typer.Option("--config", help="JSON file with benchmark config fields.")]
ResumeOption = Annotated[Optional[Path], typer.Option(
    "--resume", help="Continue this run folder with its stored settings (finished calls are free).")]
ParallelCasesOption = Annotated[Optional[int], typer.Option(
    "--parallel-cases", callback=in_range(1, 64), help="(case, model) units generated at once over the shared client (default 1).")]


@bench_app.command("run")
@grouped
def bench_run(
    cases: CasesOption = None,
    case_column: CaseColumnOption = None,
    preset: PresetOption = "quick",
    config_file: ConfigFileOption = None,
    generation: Given = GENERATION,
    folder: Given = BENCH_FOLDER,
    resume: ResumeOption = None,
    judging: Given = JUDGING,
    parallel_cases: ParallelCasesOption = None,
    endpoint: Given = BENCH_ENDPOINT,
    spend: Given = GENERATION_SPEND,
    prompts_root: PromptsRootOption = None,
    plan: Given = PLAN,
) -> None:
    """Generate consilium second opinions for a case set, judge them and write the bench tables.

    Writes archives/<run_id>/: manifest.json, cases/ (one CaseRun per case, model, condition and
    topology), records/<model>/ (what physicians rate: `evolve ratings import-workbooks ...
    --outputs records/<model>`), pack/<model>/, judge_scores.csv and the bench report.
    """
    values = flat(locals())  # the options as given (before any other local name is bound)
    from evolve.workflows._options import BenchRunOptions

    result = _run_bench(BenchRunOptions(**values))
    if result is not None:
        _print_bench_run(result)


def _run_bench(options: BenchRunOptions) -> BenchResult | None:
    """``evolve bench run``: the plan or the run (None: nothing was run)."""
    from evolve.workflows import run_and_judge

    config = None
    resume = options.resume is not None
    with _run_guarded("evolve bench run", lambda: config.run_dir if config is not None else None):
        config = options.config()
        price = _price(options.price_in, options.price_out, config.endpoint)
        guidance = options.guidance
        if options.judge:
            if resume and guidance is None:  # as the run will: the guidance the run was judged or started with
                from evolve.consilium import recorded_guidance

                guidance = recorded_guidance(config.run_dir)
            _warn_self_judging(config.models, config.judge.model, config.endpoint.model)
            _warn_guidance(guidance)
        if options.plan:
            _plan_bench_run(config, judge=options.judge, guidance=guidance, resume=resume, price=price,
                            calls_per_hour=options.calls_per_hour)
            return None
        _interrupt_on_sigterm()
        with _progress_bar() as bar:
            return run_and_judge(config, judge=options.judge, calibration_run=options.guidance, resume=resume,
                                 progress=_RichProgress(bar, price), on_warning=_warn)
    return None  # not reached: _guarded exits on an error


def _print_bench_run(result: BenchResult) -> None:
    """What a benchmark run did, its report and where it is; exit 1 when nothing was generated."""
    from evolve.markdown import count_noun
    from evolve.runs import BenchFolder

    for s in [r for r in result.runs if not r.ok][:10]:
        _warn(f"{s.case_id} {s.model} {s.condition} {s.topology} failed: {s.error}")
    for note in result.notes + (result.judge.warnings if result.judge is not None else []):
        _warn(note, "note")
    if result.judge is not None:
        _print_split_fallbacks(result.judge)
    _print_bench_report(result.run_dir)
    run = result.run_dir
    _say(f"wrote {run}: {count_noun(result.n_ok, 'pipeline run')} with a record, {result.n_failed} failed "
         f"(cases/, journal.jsonl, manifest.json)")
    for key, folder in result.records.items():
        _say(f"records: {folder}  rating pack: {result.packs[key]}")
    if result.judge is not None:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(result.judge.outcomes.items()))
        _say(f"judge scores: {result.judge.path} ({count_noun(result.judge.rows, 'call')}: {counts or 'none'})")
    if result.report is not None:
        _say(f"bench report: {run / BenchFolder.REPORT_MD}")
    if result.n_failed:
        _warn(f"{result.n_failed} of {count_noun(result.n_ok + result.n_failed, 'pipeline run')} failed "
              f"(the reasons are above and in {run / 'journal.jsonl'})")
    if result.runs and not result.n_ok:
        raise typer.Exit(code=1)  # nothing was generated: not a success


def _plan_bench_run(config: Any, *, judge: bool, guidance: Path | None, resume: bool, price: Price | None,
                    calls_per_hour: float | None) -> None:
    """``evolve bench run --plan``: the checks the run makes before any call, then the plan."""
    import dataclasses

    from evolve.consilium import FinishedWork, default_backend, finished_work, plan_bench_run, plan_context, prepare_bench
    from evolve.runs import BenchFolder
    from evolve.workflows._plan import token_counter

    cases, _ = prepare_bench(config, resume, default_backend())  # reads only
    context = plan_context(config, cases)  # runs whose prompt alone exceeds the context are refused without a call
    for warning in context.warnings:
        err.print(f"warning: context: {warning}")
    finished = finished_work(config, cases) if resume else FinishedWork()  # the plan of what is left
    finished = dataclasses.replace(finished, blocked=frozenset(context.blocked))
    plan = plan_bench_run(config, cases, judge=judge, calibration_run=guidance, counter=token_counter(config.endpoint),
                          finished=finished)
    _show_plan(plan, price, calls_per_hour, BenchFolder(config.run_dir).journal_path if resume else None,
               limits=config.endpoint)


@bench_app.command("judge")
@grouped
def bench_judge(
    run_dir: RunDirArgument,
    guidance: GuidanceOption = None,
    repeats: Optional[int] = typer.Option(None, "--repeats", callback=in_range(1, 20), help="Judge calls per target and criterion (default: the run's)."),
    free_form_roles: bool = typer.Option(
        False, "--free-form-roles",
        help="Also judge the reasoning and opinion of free-form pipelines (split on their 'FINAL OPINION:' line; "
             "the paper judged role components of the structured pipeline only)."),
    spend: Given = JUDGE_SPEND,
    prompts_root: RunPromptsRootOption = None,
    plan: Given = PLAN,
) -> None:
    """Score a benchmark run's outputs with the (calibrated) consilium judge into judge_scores.csv."""
    values = flat(locals())  # the options as given (before any other local name is bound)
    from evolve.markdown import count_noun
    from evolve.workflows._options import BenchJudgeOptions

    result = _judge_bench(BenchJudgeOptions(**values))
    if result is None:
        return
    for warning in result.warnings:
        _warn(warning)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result.outcomes.items()))
    _say(f"wrote {result.path}: {count_noun(result.rows, 'judge call')} ({counts}; {result.cached} from the cache), "
         f"{count_noun(result.skipped_runs, 'failed pipeline run')} not judged")
    _print_split_fallbacks(result)
    if result.judge_file is not None:
        _say(f"judge file: {result.judge_file.path} (sha256 {result.judge_file.sha256[:16]}…, copied to "
             f"{run_dir / 'calibrated_judge.json'}); raw and physician-anchored means: evolve bench report {run_dir}")


def _judge_bench(options: BenchJudgeOptions) -> JudgeBenchResult | None:
    """``evolve bench judge``: the plan or the judging (None: nothing was judged)."""
    from evolve.consilium import judge_bench, load_bench_config, plan_bench_judge
    from evolve.runs import BenchFolder
    from evolve.workflows._options import with_spend

    run_dir = options.run_dir
    options = _continued_judging(options)
    with _guarded(lambda: _judge_command(options),
                  lambda: f"interrupted; judge_scores.csv was not written (finished calls are cached). Continue with: "
                          f"{_judge_command(options)}"):
        price, limited = _run_spend(options.spend(), load_bench_config, run_dir, lambda: BenchFolder(run_dir).journal())
        guidance, prompts_root = options.guidance, options.prompts_root
        _warn_guidance(guidance)
        if options.plan:
            from evolve.workflows._plan import token_counter

            counter = token_counter(load_bench_config(run_dir).endpoint)
            _show_plan(plan_bench_judge(run_dir, calibration_run=guidance, repeats=options.repeats,
                                        free_form_roles=options.free_form_roles, prompts_root=prompts_root,
                                        counter=counter),
                       price, options.calls_per_hour, BenchFolder(run_dir).journal_path,
                       limits=with_spend(load_bench_config(run_dir).endpoint, **options.spend()))
            return None
        _interrupt_on_sigterm()
        with _progress_bar() as bar, limited as client:
            return judge_bench(run_dir, calibration_run=guidance, repeats=options.repeats,
                               progress=_RichProgress(bar, price), free_form_roles=options.free_form_roles,
                               prompts_root=prompts_root, client=client)
    return None  # not reached: _guarded exits on an error


def _continued_judging(options: BenchJudgeOptions) -> BenchJudgeOptions:
    """``options``, continuing the run's judging with its own settings when that judging
    stopped part-way and none of ``--guidance``, ``--repeats``, ``--free-form-roles`` is given
    (a note says so); a finished judging with guidance about to be replaced by one without is
    warned about."""
    from evolve.consilium import last_judging

    with contextlib.suppress(EvolveError):  # not a bench run: the command itself says so
        last = last_judging(options.run_dir)
        if last is None:
            return options
        given = options.guidance is not None or options.repeats is not None or options.free_form_roles
        if not last.finished and not given:
            _warn(f"continuing the judging that stopped part-way with its settings: guidance "
                  f"{last.calibration_run or 'none'}, {last.repeats} repeat(s)"
                  f"{', free-form roles' if last.free_form_roles else ''}", "note")
            return options.model_copy(update={"guidance": last.calibration_run, "repeats": last.repeats,
                                              "free_form_roles": last.free_form_roles})
        if last.calibration_run is not None and options.guidance is None:
            _warn(f"the run's scores were judged with the guidance of {last.calibration_run}; this judging has none "
                  f"and replaces them (pass --guidance {last.calibration_run} to keep it)")
    return options


def _judge_command(options: BenchJudgeOptions) -> str:
    """The ``evolve bench judge`` command line that repeats this judging (its settings and prices)."""
    return _rejudge_command("evolve bench judge", options,
                            *([f"--repeats {options.repeats}"] if options.repeats is not None else []),
                            *(["--free-form-roles"] if options.free_form_roles else []))


def _print_split_fallbacks(result: Any) -> None:
    """One line on free-form opinions without a 'FINAL OPINION:' line (none printed when all had one)."""
    if result.split_fallbacks:
        what = "judged as overlapping components" if result.free_form_roles else "not judged (structured role components only)"
        out.print(f"free-form split fallbacks: {result.split_fallbacks} of {result.free_form_opinions} primary-role "
                  f"opinions had no 'FINAL OPINION:' line - {what}")


def _print_bench_report(run_dir: Path) -> None:
    """The run's bench report, when it has one (unwrapped: tables stay intact)."""
    from evolve.runs import BenchFolder

    report_md = run_dir / BenchFolder.REPORT_MD
    if report_md.is_file():
        typer.echo(report_md.read_text(encoding="utf-8"))  # unwrapped: tables stay intact


@bench_app.command("report")
@grouped
def bench_report(run_dir: RunDirArgument, bootstrap: Given = REPORT) -> None:
    """Rebuild the bench tables (Tables 2-9) and report.html from a run's saved artifacts (no model calls)."""
    from evolve.report import write_bench_report

    _or_fail(write_bench_report, run_dir, **bootstrap)
    _print_bench_report(run_dir)
    out.print(f"wrote {run_dir}/bench_report.md{', report.html' if bootstrap.html else ''} and its tables")
