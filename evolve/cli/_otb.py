"""``evolve otb``: OpenTumorBoard's Specialist Turn and Board Simulation (generate, judge, report)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from evolve.cli._app import (
    SPEND_OPTIONS,
    ApiKeyEnvOption,
    BaseUrlOption,
    BatchApiOption,
    BootSeedOption,
    CallsPerHourOption,
    HtmlOption,
    LocalModelOption,
    MaxConcurrencyOption,
    MaxTokensOption,
    MaxUsdOption,
    NBootOption,
    PlanOption,
    PriceBatchInOption,
    PriceBatchOutOption,
    PriceCachedInOption,
    PriceInOption,
    PriceOutOption,
    PromptsRootOption,
    RunPromptsRootOption,
    SchemaLimitsOption,
    _endpoint_overrides,
    _fail,
    _interrupt_on_sigterm,
    _price,
    _progress_bar,
    _refuse_options_on_resume,
    _RichProgress,
    _run_spend,
    _show_plan,
    _with_spend,
    count_noun,
    err,
    in_range,
    out,
)
from evolve.errors import EvolveError
from evolve.runs import OtbFolder

otb_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="OpenTumorBoard: Specialist Turn and Board Simulation, judged and reported.")


def _print_summary(run_dir: Path, report: dict | None) -> None:
    for r in (report or {}).get("tables", {}).get("main", []):
        mean = (": no scored item of" if r["mean"] is None
                else f" {r['mean']:.2f} [{r['mean_low']:.2f}, {r['mean_high']:.2f}] over")
        name = "conclusion alignment" if r["task"] == "board" else "clinical equivalence"
        out.print(f"{r['task']} {r['model']}: {name}{mean} {count_noun(r['items'], 'item')} ({r['format_failures']} "
                  f"malformed, {count_noun(r['judge_failures'], 'judge failure')})", highlight=False, soft_wrap=True)
        if r["judge_failures"] and not r["scored"]:
            err.print(f"warning: {r['task']} {r['model']}: every judge call failed; the reasons are in "
                      f"{run_dir / 'judge_scores.jsonl'} (outcome judge_failure, error)", highlight=False, soft_wrap=True)
    if report is not None:
        out.print(f"OpenTumorBoard report: {run_dir / 'otb_report.md'}", highlight=False, soft_wrap=True)


@otb_app.command("run")
def otb_run(
    board: Optional[Path] = typer.Option(None, "--board", help="Board Simulation records (task1_*.jsonl or .jsonl.gz)."),
    turn: Optional[Path] = typer.Option(None, "--turn", help="Specialist Turn records (task2_*.jsonl or .jsonl.gz)."),
    prompts: Optional[str] = typer.Option(None, "--prompts", help="'evolve' (default: our prompts in the released "
                                          "layout) or 'released' (the prompts stored in the released test manifests)."),
    board_manifest: Optional[Path] = typer.Option(None, "--board-manifest",
                                                  help="Released test_inputs/board_simulation.caption.jsonl (for --prompts released)."),
    turn_manifest: Optional[Path] = typer.Option(None, "--turn-manifest",
                                                 help="Released test_inputs/specialist_turn.caption.jsonl (for --prompts released)."),
    preset: str = typer.Option("quick", help="'quick' (2 items per task, short answers, for the embedded model) or "
                               "'paper' (the released limits: 32,768 / 8,192 output tokens, judge 1,200 / 1,024)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="JSON file with OpenTumorBoard config fields."),
    models: Optional[list[str]] = typer.Option(None, "--model", help="Generating model (repeatable). Default: the endpoint's."),
    reasoning_models: Optional[list[str]] = typer.Option(None, "--reasoning-model", help="A --model that reasons before "
        "answering (repeatable): its output without an answer boundary (separated reasoning, a 'Final Answer' heading, "
        "</think>) is a format failure, not judged."),
    max_items: Optional[int] = typer.Option(None, "--max-items", callback=in_range(1, 10_000_000), help="First N records of each task (quick: 2)."),
    judge_model: Optional[str] = typer.Option(None, "--judge-model", help="Judge model (default: the endpoint's)."),
    judge: bool = typer.Option(True, "--judge/--no-judge", help="Judge and report after generating (default on)."),
    guidance: Optional[Path] = typer.Option(None, "--guidance", help="Judge file of rubric otb whose validated winners guide "
        "the judge: a calibration run folder (archives/<run_id>) or its judge.json."),
    run_id: Optional[str] = typer.Option(None, help="Run folder name (default: otb-<UTC time>)."),
    archives_dir: Optional[Path] = typer.Option(None, help="Where run folders go (default: archives)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue this run folder with its stored settings."),
    base_url: BaseUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    max_concurrency: MaxConcurrencyOption = None,
    schema_limits: SchemaLimitsOption = None,
    local_model: LocalModelOption = None,
    price_in: PriceInOption = None,
    price_out: PriceOutOption = None,
    price_cached_in: PriceCachedInOption = None,
    price_batch_in: PriceBatchInOption = None,
    price_batch_out: PriceBatchOutOption = None,
    max_usd: MaxUsdOption = None,
    max_tokens: MaxTokensOption = None,
    prompts_root: PromptsRootOption = None,
    plan: PlanOption = False,
    calls_per_hour: CallsPerHourOption = None,
) -> None:
    """Answer Board Simulation and/or Specialist Turn items, judge the answers and write the tables.

    Writes archives/<run_id>/: run_config.json, <task>/<model>/responses.jsonl (released layout),
    errors.jsonl, summary.json, judge_scores.jsonl, metrics.csv, otb_report.md, otb_report.json
    and otb_table.csv.
    """
    options = dict(locals())
    from evolve.otb import resolve_otb_config
    from evolve.otb._judging import load_otb_config
    from evolve.workflows import run_otb

    config = None
    try:
        if resume is not None:
            _refuse_options_on_resume(options, defaults={"preset": "quick", "judge": True},
                                      allowed=("resume", "judge", "guidance", "max_concurrency", *SPEND_OPTIONS,
                                               "plan", "calls_per_hour"),
                                      command="evolve otb run")
            config = load_otb_config(resume)
            if max_concurrency is not None:
                config = config.model_copy(update={"endpoint": config.endpoint.model_copy(update={"max_concurrency": max_concurrency})})
        else:
            endpoint = _endpoint_overrides(base_url=base_url, api_key_env=api_key_env, max_concurrency=max_concurrency,
                                           local_model=local_model, schema_limits=schema_limits, price_in=price_in,
                                           price_out=price_out)
            config = resolve_otb_config(preset=preset, config_file=config_file, overrides={
                "run_id": run_id or f"otb-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}", "archives_dir": archives_dir,
                "board": board, "turn": turn, "max_items": max_items, "prompts": prompts,
                "board_manifest": board_manifest, "turn_manifest": turn_manifest, "models": tuple(models) if models else None,
                "reasoning_models": tuple(reasoning_models) if reasoning_models else None,
                "endpoint": endpoint, "judge": {"model": judge_model}, "prompts_root": prompts_root})
        config = config.model_copy(update={"endpoint": _with_spend(config.endpoint, **options)})  # also on --resume
        price = _price(price_in, price_out, config.endpoint)
        if plan:
            _plan_otb_run(config, judge=judge, guidance=guidance, resume=resume is not None, price=price,
                          calls_per_hour=calls_per_hour)
            return
        _interrupt_on_sigterm()
        with _progress_bar() as bar:
            result = run_otb(config, judge=judge, resume=resume is not None, calibration_run=guidance,
                             progress=_RichProgress(bar, price))
    except EvolveError as exc:
        _fail(exc, resume=f"evolve otb run --resume {config.run_dir}" if config is not None else None)
    except KeyboardInterrupt:
        where = config.run_dir if config is not None else "<run folder>"
        err.print(f"interrupted; continue with: evolve otb run --resume {where}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=130) from None
    for (task, model), c in result.generated.items():
        out.print(f"{task} {model}: {c.answered} answered, {c.reused} reused, {c.malformed} malformed, {c.failed} failed "
                  "calls", highlight=False, soft_wrap=True)
        for e in c.errors[:3]:
            err.print(f"warning: {task} {model}: {e}", highlight=False, soft_wrap=True)
    for warning in result.judge.warnings if result.judge else []:
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)
    _print_summary(result.run_dir, result.report)
    if any(c.failed for c in result.generated.values()):
        err.print(f"some calls failed (in errors.jsonl); ask them again with: evolve otb run --resume {result.run_dir}",
                  highlight=False, soft_wrap=True)


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
def otb_judge(
    run_dir: Path = typer.Argument(..., help="An OpenTumorBoard run folder (archives/<run_id>)."),
    guidance: Optional[Path] = typer.Option(None, "--guidance", help="Judge file of rubric otb whose validated winners guide "
        "the judge: a calibration run folder (archives/<run_id>) or its judge.json."),
    price_in: PriceInOption = None,
    price_out: PriceOutOption = None,
    price_cached_in: PriceCachedInOption = None,
    price_batch_in: PriceBatchInOption = None,
    price_batch_out: PriceBatchOutOption = None,
    max_usd: MaxUsdOption = None,
    max_tokens: MaxTokensOption = None,
    batch_api: BatchApiOption = None,
    prompts_root: RunPromptsRootOption = None,
    plan: PlanOption = False,
    calls_per_hour: CallsPerHourOption = None,
) -> None:
    """Judge a run's answers again (finished calls come from the cache) and rewrite its report."""
    options = dict(locals())  # the options as given (before any local name is bound)
    from evolve.otb import judge_otb, load_otb_config, plan_otb_judge
    from evolve.report import write_otb_report

    try:
        price, limited = _run_spend(options, load_otb_config, run_dir, lambda: OtbFolder(run_dir).journal())
        if plan:
            from evolve.workflows._plan import token_counter

            counter = token_counter(load_otb_config(run_dir).endpoint)
            _show_plan(plan_otb_judge(run_dir, calibration_run=guidance, prompts_root=prompts_root, counter=counter),
                       price, calls_per_hour, OtbFolder(run_dir).journal_path,
                       limits=_with_spend(load_otb_config(run_dir).endpoint, **options))
            return
        _interrupt_on_sigterm()
        with _progress_bar() as bar, limited as client:
            result = judge_otb(run_dir, calibration_run=guidance, progress=_RichProgress(bar, price), prompts_root=prompts_root,
                               client=client)
        report = write_otb_report(run_dir)
    except EvolveError as exc:
        _fail(exc, resume=f"evolve otb judge {run_dir}")
    except KeyboardInterrupt:
        err.print("interrupted; judge_scores.jsonl was not written (finished calls are cached: run it again)")
        raise typer.Exit(code=130) from None
    for warning in result.warnings:
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)
    guided = f", guided on {', '.join(sorted(result.guidance))}" if result.guidance else ""
    out.print(f"{count_noun(result.calls, 'judge call')} ({result.cached} from the cache, "
              f"{count_noun(result.failures, 'judge failure')}{guided})",
              highlight=False, soft_wrap=True)
    _print_summary(run_dir, report)


@otb_app.command("report")
def otb_report(
    run_dir: Path = typer.Argument(..., help="An OpenTumorBoard run folder (archives/<run_id>)."),
    n_boot: NBootOption = 2000,
    seed: BootSeedOption = 0,
    html: HtmlOption = True,
) -> None:
    """Rebuild the OpenTumorBoard tables and report.html from a judged run (no model calls)."""
    from evolve.report import write_otb_report

    try:
        report = write_otb_report(run_dir, n_boot=n_boot, seed=seed, html=html)
    except EvolveError as exc:
        _fail(exc)
    _print_summary(run_dir, report)


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

    try:
        pack = otb_rating_pack(run_dir, ratings, name=out_dir.name, prompts_root=prompts_root)
        write_pack(pack, out_dir, overwrite=overwrite)
    except EvolveError as exc:
        _fail(exc)
    out.print(f"wrote {out_dir}: {len(pack.cases)} items, {len(pack.targets)} answers, {len(pack.ratings)} ratings "
              f"(rubric otb). Next: evolve splits make {out_dir} && evolve calibrate --pack {out_dir}",
              highlight=False, soft_wrap=True)
