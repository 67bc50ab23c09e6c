"""``evolve judge``: a calibrated judge on new outputs."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from evolve.cli._app import (
    ApiKeyEnvOption,
    BaseUrlOption,
    BatchApiOption,
    CallsPerHourOption,
    ExportBatchOption,
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
    SchemaLimitsOption,
    _endpoint_overrides,
    _fail,
    _interrupt_on_sigterm,
    _price,
    _progress_bar,
    _RichProgress,
    _show_plan,
    _with_batch,
    err,
    out,
)
from evolve.errors import EvolveError


def judge(
    targets: Path = typer.Argument(..., help="What to score: a rating pack folder, or a table (.csv/.jsonl/.parquet/.xlsx) "
                                   "with at least case_text and target_text columns (rated when it has a rater column)."),
    judge_path: Path = typer.Option(..., "--judge", help="A calibration run folder (archives/RUN) or its judge.json."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Run folder name (default: judge-<targets>-<UTC time>)."),
    archives_dir: Path = typer.Option(Path("archives"), "--archives-dir", help="Where run folders go."),
    column: Optional[list[str]] = typer.Option(None, "--column", help="Table column mapping FIELD=COLUMN, as `evolve ratings "
                                               "import table` (repeatable), e.g. --column case_text=question."),
    not_evaluable: Optional[list[str]] = typer.Option(None, "--not-evaluable", help="Rated tables: a cell value meaning "
                                                      "'not evaluable' (repeatable)."),
    score_map: Optional[list[str]] = typer.Option(None, "--score-map", help="Rated tables: CRITERION:LABEL=N maps a "
                                                  "rating label to a score (repeatable), as `evolve ratings import table`."),
    rows: Optional[str] = typer.Option(None, "--rows", help=".jsonl tables: one row per element this dotted path reaches in "
                                       "each record, e.g. 'answers.*.claims.*' (as `evolve ratings import table`)."),
    where: Optional[list[str]] = typer.Option(None, "--where", help="COLUMN=VALUE: keep only rows whose cell is exactly VALUE "
                                              "(repeatable), e.g. 'metadata.field=Healthcare / Medicine'."),
    cases: Optional[Path] = typer.Option(None, "--cases", help="A case-id file (one id per line, or a .csv/.jsonl with "
                                         "case_id): score only those cases, e.g. splits/NAME/holdout.txt."),
    criteria: Optional[list[str]] = typer.Option(None, "--criteria", "--criterion", help="Criterion to score (repeatable; "
                                                 "default: every criterion of the judge file)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run --run-id (finished calls are free from the cache)."),
    base_url: BaseUrlOption = None,
    model: Optional[str] = typer.Option(None, help="Model id to send instead of the judge file's (warned: not the validated judge)."),
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
    batch_api: BatchApiOption = None,
    export_batch: ExportBatchOption = None,
    n_boot: NBootOption = 2000,
    html: HtmlOption = True,
    plan: PlanOption = False,
    calls_per_hour: CallsPerHourOption = None,
) -> None:
    """Score new outputs with a calibrated judge (the prompts, seeds and repeats it was validated with) and write
    archives/<run_id>/: calls.csv, items.csv, report.md, report.html, summary.json. Prints each criterion's mean with
    its interval and the physician-anchored mean."""
    from evolve.data import parse_score_map, parse_table_columns, parse_where
    from evolve.layering import validated
    from evolve.runs import EndpointSettings
    from evolve.workflows import JudgeRunOptions, run_judge

    options = None
    try:
        endpoint = validated(EndpointSettings, _endpoint_overrides(
            base_url=base_url, model=model, api_key_env=api_key_env, max_concurrency=max_concurrency,
            local_model=local_model, schema_limits=schema_limits, price_in=price_in, price_out=price_out,
            price_cached_in=price_cached_in, price_batch_in=price_batch_in, price_batch_out=price_batch_out,
            max_usd=max_usd, max_tokens=max_tokens),
            "endpoint options")
        endpoint = _with_batch(endpoint, batch_api)
        options = JudgeRunOptions(
            targets=targets, judge=judge_path, run_id=run_id, archives_dir=archives_dir,
            columns=parse_table_columns(column or []), not_evaluable=tuple(not_evaluable or ()),
            score_map=parse_score_map(score_map or []), rows=rows,
            where=tuple(f"{c}={v}" for c, v in parse_where(where or [])), cases=cases,
            criteria=tuple(criteria) if criteria else None, resume=resume, endpoint=endpoint, model=model,
            n_boot=n_boot, html=html)
        folder = options.folder()
        options = options.model_copy(update={"run_id": folder.name, "archives_dir": folder.parent})
        if plan:
            from evolve.runs import ScoringFolder
            from evolve.workflows import plan_judge_run

            _show_plan(plan_judge_run(options), _price(price_in, price_out, endpoint), calls_per_hour,
                       ScoringFolder(folder).journal_path if resume else None, limits=endpoint)
            return
        if export_batch is not None:
            from evolve.cli._batch import export_note
            from evolve.workflows._batch import export_batch as write_batch
            from evolve.workflows._batch import judge_batch_requests

            n = write_batch(judge_batch_requests(options), endpoint, export_batch)
            out.print(export_note(n, export_batch), highlight=False, soft_wrap=True)
            return
        _interrupt_on_sigterm()
        with _progress_bar() as bar:
            summary = run_judge(options, progress=_RichProgress(bar, endpoint.price()),
                                on_warning=lambda w: err.print(f"warning: {w}", highlight=False, soft_wrap=True),
                                on_note=lambda n: err.print(f"note: {n}", highlight=False, soft_wrap=True))
    except EvolveError as exc:
        _fail(exc, resume=_resume_hint(targets, judge_path, options))
    except KeyboardInterrupt:
        err.print(f"interrupted; continue with: {_resume_hint(targets, judge_path, options)}")
        raise typer.Exit(code=130) from None
    for line in summary.describe().splitlines():
        out.print(line, highlight=False, soft_wrap=True)
    out.print(f"wrote {summary.run_dir}/report.md{', report.html' if html else ''}, items.csv and calls.csv", highlight=False,
              soft_wrap=True)


def _resume_hint(targets: Path, judge_path: Path, options) -> str | None:
    """The command that continues this run: the one given (every mapping option included, so the
    settings match), with the run folder named and ``--resume``."""
    if options is None or options.run_id is None:
        return None
    args = [a for a in sys.argv[1:] if a != "--resume"] if sys.argv[1:2] == ["judge"] else \
        ["judge", str(targets), "--judge", str(judge_path)]
    if not any(a == "--run-id" or a.startswith("--run-id=") for a in args):
        args += ["--run-id", options.run_id, "--archives-dir", str(options.archives_dir)]
    return shlex.join(["evolve", *args, "--resume"])
