"""``evolve judge``: a calibrated judge on new outputs."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from evolve.cli._app import _guarded, _interrupt_on_sigterm, _price, _progress_bar, _RichProgress, _say, _show_plan, _warn
from evolve.cli._options import (
    JUDGE_ENDPOINT,
    JUDGE_FOLDER,
    PLAN,
    SPEND,
    Given,
    HtmlOption,
    NBootOption,
    OptionGroup,
    flat,
    grouped,
    table_layout,
)

if TYPE_CHECKING:
    from evolve.runs import EndpointSettings
    from evolve.workflows import JudgeRunOptions, ScoringSummary

SELECTION: Any = OptionGroup({
    "column": Annotated[Optional[list[str]], typer.Option(
        "--column", help="Table column mapping FIELD=COLUMN, as `evolve ratings import table` (repeatable), e.g. "
        "--column case_text=question.")],
    "not_evaluable": Annotated[Optional[list[str]], typer.Option(
        "--not-evaluable", help="Rated tables: a cell value meaning 'not evaluable' (repeatable).")],
    "score_map": Annotated[Optional[list[str]], typer.Option(
        "--score-map", help="Rated tables: CRITERION:LABEL=N maps a rating label to a score (repeatable), as `evolve "
        "ratings import table`.")],
    "rows": Annotated[Optional[str], typer.Option(
        "--rows", help=".jsonl tables: one row per element this dotted path reaches in each record, e.g. "
        "'answers.*.claims.*' (as `evolve ratings import table`).")],
    "where": Annotated[Optional[list[str]], typer.Option(
        "--where", help="COLUMN=VALUE: keep only rows whose cell is exactly VALUE (repeatable), e.g. "
        "'metadata.field=Healthcare / Medicine'.")],
    "layout": Annotated[Optional[str], typer.Option(
        "--layout", help="Rated tables: long (one rating per row) or wide (one score column per criterion); default: "
        "wide when --column maps criterion:<id>, else long.")],
    "skip_empty": Annotated[bool, typer.Option(
        "--skip-empty", help="Rated tables: skip empty score cells (they are counted) instead of failing.")],
    "cases": Annotated[Optional[Path], typer.Option(
        "--cases", help="A case-id file (one id per line, or a .csv/.jsonl with case_id): score only those cases, e.g. "
        "splits/NAME/holdout.txt.")],
    "criteria": Annotated[Optional[list[str]], typer.Option(
        "--criteria", "--criterion", help="Criterion to score (repeatable; default: every criterion of the judge file).")],
}, {"skip_empty": False})
"""How the targets are read (a table's columns and cells) and which of them are scored."""


@grouped
def judge(
    targets: Path = typer.Argument(..., help="What to score: a rating pack folder, or a table (.csv/.jsonl/.parquet/.xlsx) "
                                   "with at least case_text and target_text columns (rated when it has a rater column)."),
    judge_path: Path = typer.Option(..., "--judge", help="A calibration run folder (archives/RUN) or its judge.json."),
    folder: Given = JUDGE_FOLDER,
    selection: Given = SELECTION,
    resume: bool = typer.Option(False, "--resume", help="Continue the run --run-id (finished calls are free from the cache)."),
    endpoint: Given = JUDGE_ENDPOINT,
    spend: Given = SPEND,
    n_boot: NBootOption = None,
    html: HtmlOption = True,
    plan: Given = PLAN,
) -> None:
    """Score new outputs with a calibrated judge (the prompts, seeds and repeats it was validated with) and write
    archives/<run_id>/: calls.csv, items.csv, report.md, report.html, summary.json. Prints each criterion's mean with
    its interval and the physician-anchored mean."""
    summary = _score(flat(locals()))
    if summary is None:
        return
    for line in summary.describe().splitlines():
        _say(line)
    _say(f"wrote {summary.run_dir}/report.md{', report.html' if html else ''}, items.csv and calls.csv")



def _score(values: dict[str, Any]) -> ScoringSummary | None:
    """``evolve judge``: the plan, the exported batch or the scoring (None: nothing was scored)."""
    from evolve.workflows import run_judge

    options = None

    def hint() -> str | None:
        return _resume_hint(values["targets"], values["judge_path"], options)

    with _guarded(hint, lambda: f"interrupted; continue with: {hint()}"):
        endpoint = _endpoint(values)
        options = _judge_options(values, endpoint)
        if values["plan"] or values["export_batch"] is not None:
            _plan_or_export(options, endpoint, values)
            return None
        _interrupt_on_sigterm()
        with _progress_bar() as bar:
            return run_judge(options, progress=_RichProgress(bar, endpoint.price()), on_warning=_warn,
                             on_note=lambda n: _warn(n, "note"))
    return None  # not reached: _guarded exits on an error


def _endpoint(values: dict[str, Any]) -> EndpointSettings:
    """The endpoint the options give (the judge file's fills in the rest when the run starts).

    Raises:
        ConfigError: The options make an invalid endpoint; ``--batch`` with the embedded server.
    """
    from evolve.layering import validated
    from evolve.runs import EndpointSettings
    from evolve.workflows._options import endpoint_overrides, with_batch

    endpoint = validated(EndpointSettings, endpoint_overrides(**{k: v for k, v in values.items() if k in _ENDPOINT_KEYS}),
                         "endpoint options")
    return with_batch(endpoint, values["batch_api"])


_ENDPOINT_KEYS = ("base_url", "model", "api_key_env", "max_concurrency", "local_model", "schema_limits", "price_in",
                  "price_out", "price_cached_in", "price_batch_in", "price_batch_out", "max_usd", "max_tokens")
"""The options of ``evolve judge`` that set its endpoint."""


def _judge_options(values: dict[str, Any], endpoint: EndpointSettings) -> JudgeRunOptions:
    """The scoring run's options, its folder named (``--run-id``, else one made from the targets).

    Raises:
        ConfigError: A malformed column mapping, score map or row filter.
    """
    from evolve.data import parse_score_map, parse_table_columns, parse_where
    from evolve.workflows import JudgeRunOptions

    options = JudgeRunOptions(
        targets=values["targets"], judge=values["judge_path"], run_id=values["run_id"], archives_dir=values["archives_dir"],
        columns=parse_table_columns(values["column"] or []), not_evaluable=tuple(values["not_evaluable"] or ()),
        score_map=parse_score_map(values["score_map"] or []), rows=values["rows"],
        where=tuple(f"{c}={v}" for c, v in parse_where(values["where"] or [])), layout=table_layout(values["layout"]),
        skip_empty=values["skip_empty"], cases=values["cases"],
        criteria=tuple(values["criteria"]) if values["criteria"] else None, resume=values["resume"], endpoint=endpoint,
        model=values["model"], n_boot=values["n_boot"], html=values["html"])
    folder = options.folder()
    return options.model_copy(update={"run_id": folder.name, "archives_dir": folder.parent})


def _plan_or_export(options: JudgeRunOptions, endpoint: EndpointSettings, values: dict[str, Any]) -> None:
    """``evolve judge --plan`` (print what it would send) or ``--export-batch`` (write it as Batch API JSONL)."""
    if values["plan"]:
        from evolve.runs import ScoringFolder
        from evolve.workflows import plan_judge_run

        _show_plan(plan_judge_run(options), _price(values["price_in"], values["price_out"], endpoint),
                   values["calls_per_hour"], ScoringFolder(options.folder()).journal_path if values["resume"] else None,
                   limits=endpoint)
        return
    from evolve.cli._batch import export_note
    from evolve.workflows._batch import export_batch, judge_batch_requests

    export = export_batch(judge_batch_requests(options), endpoint, values["export_batch"], cache_path=options.cache_path)
    _say(export_note(export, values["export_batch"]))


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
