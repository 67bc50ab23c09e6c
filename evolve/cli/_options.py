"""The options several commands share, each defined once, and the option groups that carry them.

An option group is a set of typer options that reaches a command as one value: a parameter whose
default is an :class:`OptionGroup` (``endpoint: Given = ENDPOINT``) stands, in the command line
built by :func:`grouped`, for the group's options in the group's order, and the command receives
their values as one :class:`Given`. The options' names, defaults and help are the group's, so a
command's ``--help`` lists them where the group parameter stands.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

__all__ = ["ENDPOINT", "MAX_N_BOOT", "PLAN", "SPEND", "Given", "OptionGroup", "flat", "grouped", "in_range", "table_layout"]


def table_layout(value: str | None) -> Literal["long", "wide"] | None:
    """``--layout`` of a table (``ratings import table``, ``judge``), checked; None when not given.

    Raises:
        ConfigError: Neither long nor wide.
    """
    if value not in (None, "long", "wide"):
        from evolve.errors import ConfigError

        raise ConfigError(f"--layout {value!r}: choose long or wide.")
    return "wide" if value == "wide" else "long" if value == "long" else None


def in_range(low: float, high: float) -> Callable[[Any], Any]:
    """A typer callback refusing a number outside ``low..high`` with the value, the range and the
    option named (typer's own ``min``/``max`` message names neither the value nor both bounds)."""
    def check(value: Any) -> Any:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value} is out of range: it must be from {low} to {high}.")
        return value
    return check


MAX_N_BOOT = 100_000
"""Most bootstrap replicates a report command accepts (the default is 2,000)."""


class Given(dict[str, Any]):
    """The values of one option group as the command line gave them, by parameter name (also
    readable as attributes: ``endpoint.base_url``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class OptionGroup:
    """Typer options that reach a command as one :class:`Given` (see :func:`grouped`).

    Args:
        options: Parameter name -> its ``Annotated[type, typer.Option(...)]`` alias, in the order
            ``--help`` lists them.
        defaults: Defaults other than None, by parameter name.
    """

    def __init__(self, options: dict[str, Any], defaults: dict[str, Any] | None = None) -> None:
        self.options = dict(options)
        self.defaults = {name: (defaults or {}).get(name) for name in self.options}

    def but(self, *, drop: tuple[str, ...] = (), **options: Any) -> OptionGroup:
        """This group without the options ``drop``, with ``options`` replacing (in place) or
        following its own."""
        kept = {name: alias for name, alias in self.options.items() if name not in drop}
        return OptionGroup({**kept, **options}, {n: d for n, d in self.defaults.items() if d is not None})

    def parameters(self) -> list[inspect.Parameter]:
        """The group's options as keyword parameters of a command's signature."""
        return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=alias, default=self.defaults[name])
                for name, alias in self.options.items()]


def grouped(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with each parameter whose default is an :class:`OptionGroup` spread into the
    group's options (for typer, which reads the signature) and gathered back into one
    :class:`Given` when the command runs. Put it below ``@app.command()``."""
    hints = typing.get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, list[str]] = {}
    for p in inspect.signature(command).parameters.values():
        if isinstance(p.default, OptionGroup):
            groups[p.name] = list(p.default.options)
            parameters += p.default.parameters()
        else:
            parameters.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation)))

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        for name, members in groups.items():
            values[name] = Given({member: values.pop(member) for member in members})
        return command(**values)

    del run.__wrapped__  # typer reads the spread signature below, not the command's own
    run.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


def flat(values: dict[str, Any]) -> dict[str, Any]:
    """A command's parameters (its ``locals()``) with each group's values in place of the group."""
    return {k: v for name, value in values.items()
            for k, v in (value.items() if isinstance(value, Given) else [(name, value)])}


# --- endpoint: where the model calls go (calibrate, audit, judge, bench run, otb run) ---
BaseUrlOption = Annotated[Optional[list[str]], typer.Option(
    help="OpenAI-compatible base URL (replaces the embedded model). Repeat it (or separate URLs by commas) for several "
         "replicas of one model: calls about one case go to one replica, a failing one is taken out.")]
RunBaseUrlOption = Annotated[Optional[list[str]], typer.Option(
    help="OpenAI-compatible base URL (default: the run's endpoint); repeat it for several replicas.")]
ModelOption = Annotated[Optional[str], typer.Option(help="Model id sent to the endpoint.")]
RunModelOption = Annotated[Optional[str], typer.Option(help="Model id sent to the endpoint (default: the run's).")]
JudgeModelOption = Annotated[Optional[str], typer.Option(
    help="Model id to send instead of the judge file's (warned: not the validated judge).")]
ApiKeyEnvOption = Annotated[Optional[str], typer.Option(help="Environment variable holding the API key.")]
MaxConcurrencyOption = Annotated[Optional[int], typer.Option(help="Requests in flight.")]
SchemaLimitsOption = Annotated[Optional[bool], typer.Option(
    "--schema-limits/--no-schema-limits",
    help="Send maxLength in output schemas (default on; turn off for hosted strict modes that reject it).")]
RunSchemaLimitsOption = Annotated[Optional[bool], typer.Option(
    "--schema-limits/--no-schema-limits", help="Send maxLength in output schemas (default: the run's setting).")]
LocalModelOption = Annotated[Optional[str], typer.Option(help="Embedded model (qwen2.5-coder-0.5b | qwen2.5-coder-1.5b).")]
ContextTokensOption = Annotated[Optional[int], typer.Option(
    "--context-tokens", callback=in_range(256, 10_000_000),
    help="Context window of one request at the endpoint, tokens (prompt and output). Every stage's prompt "
         "is checked against it before any call (default: the embedded server's 8,192-token slot; "
         "unknown, so unchecked, for other endpoints).")]

ENDPOINT: Any = OptionGroup({"base_url": BaseUrlOption, "model": ModelOption, "api_key_env": ApiKeyEnvOption,
                             "max_concurrency": MaxConcurrencyOption, "schema_limits": SchemaLimitsOption,
                             "local_model": LocalModelOption})
"""The endpoint of a run (``calibrate``); mapped onto its settings by ``endpoint_overrides``."""
RUN_ENDPOINT: Any = ENDPOINT.but(base_url=RunBaseUrlOption, model=RunModelOption, schema_limits=RunSchemaLimitsOption)
"""The endpoint of more work on a finished run (``audit``): each option defaults to the run's."""
JUDGE_ENDPOINT: Any = ENDPOINT.but(model=JudgeModelOption)
"""The endpoint of ``evolve judge`` (its model defaults to the judge file's)."""
GENERATION_ENDPOINT: Any = ENDPOINT.but(drop=("model",))
"""The endpoint of ``otb run`` (its ``--model`` names the generating models)."""
BENCH_ENDPOINT: Any = GENERATION_ENDPOINT.but(context_tokens=ContextTokensOption)
"""The endpoint of ``bench run``: also its context window."""

# --- spend: prices of the progress line, limits, the Batch API (also allowed with --resume: they change no result) ---
PriceInOption = Annotated[Optional[float], typer.Option(
    "--price-in", callback=in_range(0, 10_000), help="Price of input (prompt) tokens, USD per million tokens: progress then shows USD spent and "
    "expected (with --price-out; default: endpoint.price_in of the config).")]
PriceOutOption = Annotated[Optional[float], typer.Option(
    "--price-out", callback=in_range(0, 10_000), help="Price of output (completion) tokens, USD per million tokens (with --price-in; "
    "default: endpoint.price_out of the config).")]
PriceCachedInOption = Annotated[Optional[float], typer.Option(
    "--price-cached-in", callback=in_range(0, 10_000), help="Price of input tokens the server serves from its prefix cache "
    "(reported as cached_tokens), USD per million tokens (with --price-in/--price-out; default: endpoint.price_cached_in, "
    "else the input price).")]
PriceBatchInOption = Annotated[Optional[float], typer.Option(
    "--price-batch-in", callback=in_range(0, 10_000), help="Price of input tokens sent through a Batch API, USD per million "
    "tokens (with --price-batch-out; default: endpoint.price_batch_in, else the input price).")]
PriceBatchOutOption = Annotated[Optional[float], typer.Option(
    "--price-batch-out", callback=in_range(0, 10_000), help="Price of output tokens of Batch API calls, USD per million "
    "tokens (with --price-batch-in; default: endpoint.price_batch_out, else the output price).")]
# A hard spending limit of the whole run (every process, resumptions included; allowed with --resume: raise it to continue).
MaxUsdOption = Annotated[Optional[float], typer.Option(
    "--max-usd", callback=in_range(0, 10_000_000), help="Stop the run cleanly (resumable) before a model call could take "
    "its spending past this many USD at --price-in/--price-out (needs prices). Cache hits are free. To continue, raise it "
    "and run the command again (with --resume where the command takes it): finished calls are not paid twice.")]
MaxTokensOption = Annotated[Optional[int], typer.Option(
    "--max-tokens", callback=in_range(0, 10**13), help="Stop the run cleanly (resumable) before a model call could take "
    "the tokens it paid for (prompt and completion) past this number. Cache hits are free. To continue, raise it and "
    "run the command again (with --resume where the command takes it): finished calls are not paid twice.")]
# The Batch API path (calibrate, judge): result-neutral, so also allowed with --resume.
BatchApiOption = Annotated[Optional[bool], typer.Option(
    "--batch/--no-batch", help="Send the calls that can wait through the endpoint's OpenAI-style Batch API, answered "
    "within its 24 h window at batch prices (--price-batch-in/--price-batch-out): calibrate's initial evaluation, "
    "finalist re-judging, re-evaluation and held-out scoring (racing and mutation stay interactive); every judge call "
    "of `evolve judge`, `bench judge` and `otb judge`. Each batch is journaled before it is polled, so running the "
    "command again (--resume where it takes it) polls it instead of paying again. Needs an endpoint with a Batch API "
    "(the run's --base-url; the embedded server has none).")]
ExportBatchOption = Annotated[Optional[Path], typer.Option(
    "--export-batch", help="Write the requests this command would send that are known before it runs (calibrate: the "
    "initial prompts' and the no-guidance baseline's judge calls; judge: all) as Batch API JSONL for an offline runner "
    "(vLLM: python -m vllm.entrypoints.openai.run_batch -i FILE -o results.jsonl --model MODEL) and exit; then "
    "`evolve batch import results.jsonl --requests FILE`. Give the --base-url and --model the run will use.")]

SPEND: Any = OptionGroup({"price_in": PriceInOption, "price_out": PriceOutOption, "price_cached_in": PriceCachedInOption,
                          "price_batch_in": PriceBatchInOption, "price_batch_out": PriceBatchOutOption,
                          "max_usd": MaxUsdOption, "max_tokens": MaxTokensOption, "batch_api": BatchApiOption,
                          "export_batch": ExportBatchOption})
"""Prices, spending limits and the Batch API of a run (``calibrate``, ``judge``)."""
JUDGE_SPEND: Any = SPEND.but(drop=("export_batch",))
"""Spend of judging an existing run again (``bench judge``, ``otb judge``)."""
GENERATION_SPEND: Any = JUDGE_SPEND.but(drop=("batch_api",))
"""Spend of the benchmark runners (``bench run``, ``otb run``: no Batch API)."""
AUDIT_SPEND: Any = GENERATION_SPEND.but(drop=("price_batch_in", "price_batch_out"))
"""Spend of ``audit`` (interactive calls only)."""

# --- plan: print the calls, tokens, USD and hours, call nothing ---
PlanOption = Annotated[bool, typer.Option(
    "--plan", help="Print what this command would send, by phase - calls, prompt and completion tokens, USD at the "
    "prices given, hours at --calls-per-hour - and exit: no model call, nothing written.")]
CallsPerHourOption = Annotated[Optional[float], typer.Option(
    "--calls-per-hour", callback=in_range(1, 100_000_000), help="With --plan: calls the endpoint answers per hour "
    "(default: the throughput measured in the run's journal, when planning more work on an existing run).")]

PLAN: Any = OptionGroup({"plan": PlanOption, "calls_per_hour": CallsPerHourOption}, {"plan": False})
"""``--plan`` and its throughput (``calibrate``, ``judge``, ``bench run/judge``, ``otb run/judge``)."""

# --- output: where a run's folder goes and where rubrics are looked up ---
CalibrationRunIdOption = Annotated[Optional[str], typer.Option(help="Run folder name (default: <pack>-<UTC time>).")]
BenchRunIdOption = Annotated[Optional[str], typer.Option(help="Run folder name (default: bench-<cases>-<UTC time>).")]
OtbRunIdOption = Annotated[Optional[str], typer.Option(help="Run folder name (default: otb-<UTC time>).")]
JudgeRunIdOption = Annotated[Optional[str], typer.Option(
    "--run-id", help="Run folder name (default: judge-<targets>-<UTC time>).")]
ArchivesDirOption = Annotated[Optional[Path], typer.Option(help="Where run folders go (default: archives).")]
JudgeArchivesDirOption = Annotated[Path, typer.Option("--archives-dir", help="Where run folders go.")]

BENCH_FOLDER: Any = OptionGroup({"run_id": BenchRunIdOption, "archives_dir": ArchivesDirOption})
"""The run folder of ``bench run``."""
OTB_FOLDER: Any = OptionGroup({"run_id": OtbRunIdOption, "archives_dir": ArchivesDirOption})
"""The run folder of ``otb run``."""
JUDGE_FOLDER: Any = OptionGroup({"run_id": JudgeRunIdOption, "archives_dir": JudgeArchivesDirOption},
                                {"archives_dir": Path("archives")})
"""The run folder of ``evolve judge``."""

# Where rubrics are looked up first (evolve.rubric.rubric_source): every command that loads a rubric.
PromptsRootOption = Annotated[Optional[Path], typer.Option(
    "--prompts-root", help="Folder of your own rubric folders (<rubric id>/rubric.json, protocol.md, guidance/), looked up "
    "before the shipped rubrics (default: $EVOLVE_PROMPTS_ROOT, else the shipped rubrics only).")]
# Readers of finished runs: a run keeps its own rubric copy (<run>/judge_prompts); older runs have none.
RunPromptsRootOption = Annotated[Optional[Path], typer.Option(
    "--prompts-root", help="For a run made before runs kept their own rubric copy (<run>/judge_prompts): folder of rubric "
    "folders looked up before the shipped rubrics (default: the run's recorded prompts_root). A run with a copy reads it.")]
# `rubric check`: an id is looked up here, then in the shipped rubrics.
RubricPromptsRootOption = Annotated[Optional[Path], typer.Option(
    "--prompts-root", help="Folder of your own rubrics, looked up before the shipped ones (default: $EVOLVE_PROMPTS_ROOT).")]

# --- report: the bootstrap of the report commands ---
HtmlOption = Annotated[bool, typer.Option("--html/--no-html", help="Also write report.html: the figures, then the same tables, in one self-contained page.")]
CompareHtmlOption = Annotated[bool, typer.Option("--html/--no-html", help="Also write report.html (figures, then the tables).")]
NBootOption = Annotated[Optional[int], typer.Option(callback=in_range(1, MAX_N_BOOT), help=(
    "Bootstrap replicates per interval (cases resampled; default: $EVOLVE_REPORT_REPLICATES, else 2000)."))]
BootSeedOption = Annotated[int, typer.Option(callback=in_range(0, 2**32 - 1), help="Bootstrap seed.")]

REPORT: Any = OptionGroup({"n_boot": NBootOption, "seed": BootSeedOption, "html": HtmlOption},
                          {"n_boot": None, "seed": 0, "html": True})
"""The bootstrap and page of the report commands (``report``, ``bench report``, ``otb report``)."""
