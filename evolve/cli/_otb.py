"""``evolve otb``: OpenTumorBoard's Specialist Turn and Board Simulation (generate, judge, report)."""

from __future__ import annotations

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
    err,
    out,
    sub_app,
)
from evolve.cli._options import (
    GENERATION_ENDPOINT,
    GENERATION_SPEND,
    JUDGE_SPEND,
    OTB_FOLDER,
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

if TYPE_CHECKING:
    from evolve.otb import OtbJudgeResult
    from evolve.outputs import OtbReport
    from evolve.workflows import OtbRunResult
    from evolve.workflows._options import OtbRunOptions, RejudgeOptions

otb_app = sub_app("OpenTumorBoard: Specialist Turn and Board Simulation, judged and reported.")


def _print_summary(run_dir: Path, report: OtbReport | None) -> None:
    from evolve.markdown import count_noun
    for r in report.tables.main if report is not None else []:
        averaged = r.items - r.judge_failures  # malformed answers count 1, as released; judge failures are left out
        mean = (": no scored item of" if r.mean is None
                else f" {r.mean:.2f} [{r.mean_low:.2f}, {r.mean_high:.2f}] over {averaged} of")
        name = "conclusion alignment" if r.task == "board" else "clinical equivalence"
        out.print(f"{r.task} {r.model}: {name}{mean} {count_noun(r.items, 'item')} ({r.format_failures} "
                  f"malformed, scored 1 as released; {count_noun(r.judge_failures, 'judge failure')} left out)")
        if r.judge_failures and not r.scored:
            err.print(f"warning: {r.task} {r.model}: every judge call failed; the reasons are in "
                      f"{run_dir / 'judge_scores.jsonl'} (outcome judge_failure, error)")
    if report is not None:
        out.print(f"OpenTumorBoard report: {run_dir / 'otb_report.md'}")


GuidanceOption = Annotated[Optional[Path], typer.Option(
    "--guidance", help="Judge file of rubric otb whose validated winners guide the judge: a calibration run folder "
    "(archives/<run_id>) or its judge.json.")]
RunDirArgument = Annotated[Path, typer.Argument(help="An OpenTumorBoard run folder (archives/<run_id>).")]

INPUTS: Any = OptionGroup({
    "board": Annotated[Optional[Path], typer.Option("--board", help="Board Simulation records (task1_*.jsonl or .jsonl.gz).")],
    "turn": Annotated[Optional[Path], typer.Option("--turn", help="Specialist Turn records (task2_*.jsonl or .jsonl.gz).")],
    "prompts": Annotated[Optional[str], typer.Option(
        "--prompts", help="'evolve' (default: our prompts in the released layout) or 'released' (the prompts stored in "
        "the released test manifests).")],
    "board_manifest": Annotated[Optional[Path], typer.Option(
        "--board-manifest", help="Released test_inputs/board_simulation.caption.jsonl (for --prompts released).")],
    "turn_manifest": Annotated[Optional[Path], typer.Option(
        "--turn-manifest", help="Released test_inputs/specialist_turn.caption.jsonl (for --prompts released).")],
})
"""The OpenTumorBoard records a run answers, and the prompts it answers them with."""

GENERATION: Any = OptionGroup({
    "models": Annotated[Optional[list[str]], typer.Option(
        "--model", help="Generating model (repeatable). Default: the endpoint's.")],
    "reasoning_models": Annotated[Optional[list[str]], typer.Option(
        "--reasoning-model", help="A --model that reasons before answering (repeatable): its output without an answer "
        "boundary (separated reasoning, a 'Final Answer' heading, </think>) is a format failure, not judged.")],
    "max_items": Annotated[Optional[int], typer.Option(
        "--max-items", callback=in_range(1, 10_000_000), help="First N records of each task (quick: 2).")],
})
"""Which models answer, and how many records of each task."""

JUDGING: Any = OptionGroup({
    "judge_model": Annotated[Optional[str], typer.Option("--judge-model", help="Judge model (default: the endpoint's model, which is the first --model when "
        "--model is given and the endpoint names none; a generating model judging its own outputs is warned about).")],
    "judge": Annotated[bool, typer.Option("--judge/--no-judge", help="Judge and report after generating (default on).")],
    "guidance": GuidanceOption,
}, {"judge": True})
"""How ``otb run`` judges the answers."""

PresetOption = Annotated[str, typer.Option(
    help="'quick' (2 items per task, short answers, for the embedded model) or 'paper' (the released limits: "
         "32,768 / 8,192 output tokens, judge 1,200 / 1,024).")]
ConfigFileOption = Annotated[Optional[Path], typer.Option("--config", help="JSON file with OpenTumorBoard config fields.")]
ResumeOption = Annotated[Optional[Path], typer.Option("--resume", help="Continue this run folder with its stored settings.")]


@otb_app.command("run")
@grouped
def otb_run(
    inputs: Given = INPUTS,
    preset: PresetOption = "quick",
    config_file: ConfigFileOption = None,
    generation: Given = GENERATION,
    judging: Given = JUDGING,
    folder: Given = OTB_FOLDER,
    resume: ResumeOption = None,
    endpoint: Given = GENERATION_ENDPOINT,
    spend: Given = GENERATION_SPEND,
    prompts_root: PromptsRootOption = None,
    plan: Given = PLAN,
) -> None:
    """Answer Board Simulation and/or Specialist Turn items, judge the answers and write the tables.

    Writes archives/<run_id>/: run_config.json, <task>/<model>/responses.jsonl (released layout),
    errors.jsonl, summary.json, judge_scores.jsonl, metrics.csv, otb_report.md, otb_report.json
    and otb_table.csv.
    """
    values = flat(locals())  # the options as given (before any other local name is bound)
    from evolve.workflows._options import OtbRunOptions

    result = _run_otb(OtbRunOptions(**values))
    if result is not None:
        _print_otb_run(result)


def _run_otb(options: OtbRunOptions) -> OtbRunResult | None:
    """``evolve otb run``: the plan or the run (None: nothing was run)."""
    from evolve.workflows import run_otb

    config = None
    resume = options.resume is not None
    with _run_guarded("evolve otb run", lambda: config.run_dir if config is not None else None):
        config = options.config()
        price = _price(options.price_in, options.price_out, config.endpoint)
        if options.judge:
            _warn_self_judging(config.models, config.judge.model, config.endpoint.model)
            _warn_guidance(options.guidance)
        if options.plan:
            _plan_otb_run(config, judge=options.judge, guidance=options.guidance, resume=resume, price=price,
                          calls_per_hour=options.calls_per_hour)
            return None
        _interrupt_on_sigterm()
        with _progress_bar() as bar:
            return run_otb(config, judge=options.judge, resume=resume, calibration_run=options.guidance,
                           progress=_RichProgress(bar, price))
    return None  # not reached: _guarded exits on an error


def _print_otb_run(result: OtbRunResult) -> None:
    """What an OpenTumorBoard run answered and how it was judged."""
    for (task, model), c in result.generated.items():
        _say(f"{task} {model}: {c.answered} answered, {c.reused} reused, {c.malformed} malformed, {c.failed} failed calls")
        for e in c.errors[:3]:
            _warn(f"{task} {model}: {e}")
    for warning in result.judge.warnings if result.judge else []:
        _warn(warning)
    _print_summary(result.run_dir, result.report)
    if any(c.failed for c in result.generated.values()):
        err.print(f"some calls failed (in errors.jsonl); ask them again with: evolve otb run --resume {result.run_dir}")


def _plan_otb_run(config, *, judge: bool, guidance: Optional[Path], resume: bool, price, calls_per_hour: Optional[float]) -> None:
    """``evolve otb run --plan``: the inputs read and checked as the run reads them, then the plan."""
    from evolve.otb import plan_otb_run
    from evolve.otb._cost import answered_items
    from evolve.otb._runner import check_resume_settings
    from evolve.runs import OtbFolder
    from evolve.workflows._plan import token_counter

    check_resume_settings(config, resume)
    answered = answered_items(config) if resume else None  # the plan of what is left
    plan = plan_otb_run(config, judge=judge, calibration_run=guidance, counter=token_counter(config.endpoint),
                        answered=answered)
    _show_plan(plan, price, calls_per_hour, OtbFolder(config.run_dir).journal_path if resume else None,
               limits=config.endpoint)


@otb_app.command("judge")
@grouped
def otb_judge(
    run_dir: RunDirArgument,
    guidance: GuidanceOption = None,
    spend: Given = JUDGE_SPEND,
    prompts_root: RunPromptsRootOption = None,
    plan: Given = PLAN,
) -> None:
    """Judge a run's answers again (finished calls come from the cache) and rewrite its report."""
    values = flat(locals())  # the options as given (before any other local name is bound)
    from evolve.markdown import count_noun
    from evolve.workflows._options import RejudgeOptions

    judged = _judge_otb(RejudgeOptions(**values))
    if judged is None:
        return
    result, report = judged
    for warning in result.warnings:
        _warn(warning)
    guided = f", guided on {', '.join(sorted(result.guidance))}" if result.guidance else ""
    _say(f"{count_noun(result.calls, 'judge call')} ({result.cached} from the cache, "
         f"{count_noun(result.failures, 'judge failure')}{guided})")
    _print_summary(run_dir, report)


def _judge_otb(options: RejudgeOptions) -> tuple[OtbJudgeResult, Any] | None:
    """``evolve otb judge``: the plan, or the judging and the rewritten report (None: nothing was judged)."""
    from evolve.otb import judge_otb, load_otb_config, plan_otb_judge
    from evolve.report import write_otb_report
    from evolve.runs import OtbFolder
    from evolve.workflows._options import with_spend

    run_dir = options.run_dir
    again = _rejudge_command("evolve otb judge", options)
    with _guarded(lambda: again, lambda: f"interrupted; judge_scores.jsonl was not written (finished calls are cached). "
                                         f"Continue with: {again}"):
        price, limited = _run_spend(options.spend(), load_otb_config, run_dir, lambda: OtbFolder(run_dir).journal())
        guidance, prompts_root = options.guidance, options.prompts_root
        _warn_guidance(guidance)
        if options.plan:
            from evolve.workflows._plan import token_counter

            counter = token_counter(load_otb_config(run_dir).endpoint)
            _show_plan(plan_otb_judge(run_dir, calibration_run=guidance, prompts_root=prompts_root, counter=counter),
                       price, options.calls_per_hour, OtbFolder(run_dir).journal_path,
                       limits=with_spend(load_otb_config(run_dir).endpoint, **options.spend()))
            return None
        _interrupt_on_sigterm()
        with _progress_bar() as bar, limited as client:
            result = judge_otb(run_dir, calibration_run=guidance, progress=_RichProgress(bar, price),
                               prompts_root=prompts_root, client=client)
        return result, write_otb_report(run_dir)
    return None  # not reached: _guarded exits on an error


@otb_app.command("report")
@grouped
def otb_report(run_dir: RunDirArgument, bootstrap: Given = REPORT) -> None:
    """Rebuild the OpenTumorBoard tables and report.html from a judged run (no model calls)."""
    from evolve.report import write_otb_report

    _print_summary(run_dir, _or_fail(write_otb_report, run_dir, **bootstrap))


@otb_app.command("import-ratings")
def otb_import_ratings(
    run_dir: Path = typer.Argument(..., help="The OpenTumorBoard run whose answers clinicians rated."),
    ratings: Path = typer.Argument(..., help="Long CSV: item_id, model, rater_id, criterion, score (an integer, "
                                   "or not_evaluable), comment."),
    out_dir: Path = typer.Option(..., "--out", help="Rating-pack folder to write (e.g. ratings/otb-clinicians)."),
    overwrite: bool = typer.Option(False, help="Replace an existing pack folder."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Turn clinician ratings of a run's answers into a rating pack of rubric otb (for evolve calibrate)."""
    from evolve.data import write_pack
    from evolve.otb import otb_rating_pack

    pack = _or_fail(otb_rating_pack, run_dir, ratings, name=out_dir.name, prompts_root=prompts_root)
    _or_fail(write_pack, pack, out_dir, overwrite=overwrite)
    out.print(f"wrote {out_dir}: {len(pack.cases)} items, {len(pack.targets)} answers, {len(pack.ratings)} ratings "
              f"(rubric otb). Next: evolve splits make {out_dir} && evolve calibrate --pack {out_dir}")
