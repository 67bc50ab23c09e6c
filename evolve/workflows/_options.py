"""What the run commands were given, as options models, and the one function each that turns
them into its engine's configuration.

``evolve calibrate``, ``evolve bench run`` and ``evolve otb run`` parse their command line into
:class:`CalibrateOptions`, :class:`BenchRunOptions` and :class:`OtbRunOptions` (field names are
the options' parameter names); ``options.config()`` layers them over the preset, the config file
and the environment - or, with ``resume``, reads the run's stored configuration and applies only
what may change on a resumed run - and applies the spending options (:data:`SPEND_OPTIONS`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from evolve.errors import ConfigError, EvolveError
from evolve.records import Record

if TYPE_CHECKING:
    from evolve.config import CalibrationConfig
    from evolve.consilium import BenchConfig
    from evolve.otb import OtbConfig
    from evolve.runs import EndpointSettings

__all__ = ["SPEND_OPTIONS", "BenchJudgeOptions", "BenchRunOptions", "CalibrateOptions", "OtbRunOptions", "RejudgeOptions",
           "RunOptions", "base_url_list", "endpoint_overrides", "on_off", "refuse_on_resume", "with_batch", "with_spend"]

SPEND_OPTIONS = ("max_usd", "max_tokens", "price_in", "price_out", "price_cached_in", "price_batch_in", "price_batch_out")
"""Options that change what a run may spend and how it is priced, never what it computes:
accepted with ``--resume`` (mapped onto the endpoint by :func:`with_spend`)."""


def base_url_list(values: Optional[list[str]] | str) -> list[str]:
    """The base URLs of a repeated ``--base-url`` (each may hold several, separated by commas or
    spaces), in order, blanks dropped."""
    if values is None:
        return []
    return [url for value in ([values] if isinstance(values, str) else values)
            for url in value.replace(",", " ").split()]


def endpoint_overrides(
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
    **spend: Any,
) -> dict:
    """Endpoint fields from the shared endpoint options of the run commands (None = not given);
    a base URL selects the ``openai_compatible`` provider, several (a repeated ``--base-url``, or
    URLs separated by commas) a replica group (``base_urls``), and either replaces the URLs of a
    config file. Other keyword arguments than the :data:`SPEND_OPTIONS` are ignored."""
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


def with_batch(endpoint: EndpointSettings, batch: bool | None) -> EndpointSettings:
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


def with_spend(endpoint: EndpointSettings, **options: Any) -> EndpointSettings:
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


def _resumed_endpoint(endpoint: EndpointSettings, base_url: Optional[list[str]], max_concurrency: Optional[int]) -> EndpointSettings:
    """A stored endpoint with what a resume may change (parallelism; a replica group's URLs:
    its answers are cached under the group's name, not its URLs).

    Raises:
        ConfigError: The new URLs leave the group (one URL and no ``group`` name: its answers
            would be cached under that URL, so every finished call would be paid again).
    """
    from evolve.layering import validated
    from evolve.runs import EndpointSettings

    given = {k: v for k, v in endpoint_overrides(base_url=base_url, max_concurrency=max_concurrency).items()
             if k in ("base_url", "base_urls", "max_concurrency") and v not in (None, ())}
    if base_url:
        given.setdefault("base_urls", ())
    if not given:
        return endpoint
    resumed = validated(EndpointSettings, {**endpoint.model_dump(), **given}, "endpoint options")
    if endpoint.is_group and resumed.cache_identity() != endpoint.cache_identity():
        raise ConfigError(f"the run's answers are cached under its replica group {endpoint.cache_identity()!r}; "
                          f"--base-url {' '.join(resumed.urls)} would leave it and pay every finished call again. "
                          "Give two or more --base-url (the group's replicas, old or new) to resume.")
    return resumed


def refuse_on_resume(options: dict, *, defaults: dict, allowed: tuple[str, ...], command: str) -> None:
    """``--resume`` continues a run with its stored settings: refuse options that would be
    dropped without a word (they would change what the run computes, or its cache keys).

    Raises:
        ConfigError: Naming every such option and what to do instead.
    """
    given = sorted(f"--{name.replace('_', '-')}" for name, value in options.items()
                   if name not in allowed and value not in (None, [], ()) and value != defaults.get(name))
    if given:
        raise ConfigError(
            f"--resume continues the run with its stored settings; {', '.join(given)} would change them and "
            f"cannot be applied. Drop {'them' if len(given) > 1 else 'it'} to resume, or start a new run "
            f"(`{command}` with another --run-id)."
        )


def on_off(value: str | None, option: str) -> bool | None:
    """``on``/``off`` (also true/false, yes/no, 1/0) as a bool; None when not given.

    Raises:
        EvolveError: Any other value, naming ``option``.
    """
    if value is None:
        return None
    key = value.strip().lower()
    if key in ("on", "true", "yes", "1"):
        return True
    if key in ("off", "false", "no", "0"):
        return False
    raise EvolveError(f"{option} takes 'on' or 'off', not {value!r}.")


def _stamp() -> str:
    """The UTC time of a default run id (``20260101-120000``)."""
    return time.strftime('%Y%m%d-%H%M%S', time.gmtime())


class RunOptions(Record):
    """The options every run command shares: its configuration layers, the run folder, the
    endpoint, the spending limits and prices, ``--plan`` (None: not given)."""

    preset: str = "quick"
    config_file: Optional[Path] = None
    run_id: Optional[str] = None
    archives_dir: Optional[Path] = None
    resume: Optional[Path] = None
    prompts_root: Optional[Path] = None
    base_url: Optional[list[str]] = None
    api_key_env: Optional[str] = None
    max_concurrency: Optional[int] = None
    schema_limits: Optional[bool] = None
    local_model: Optional[str] = None
    price_in: Optional[float] = None
    price_out: Optional[float] = None
    price_cached_in: Optional[float] = None
    price_batch_in: Optional[float] = None
    price_batch_out: Optional[float] = None
    max_usd: Optional[float] = None
    max_tokens: Optional[int] = None
    plan: bool = False
    calls_per_hour: Optional[float] = None

    def given(self) -> dict[str, Any]:
        """Every option by parameter name, as given."""
        return dict(self)

    def endpoint(self, **more: Any) -> dict:
        """The endpoint fields these options set (:func:`endpoint_overrides`)."""
        return endpoint_overrides(base_url=self.base_url, api_key_env=self.api_key_env,
                                  max_concurrency=self.max_concurrency, local_model=self.local_model,
                                  schema_limits=self.schema_limits, price_in=self.price_in, price_out=self.price_out,
                                  **more)


class CalibrateOptions(RunOptions):
    """What ``evolve calibrate`` was given (see its ``--help``); :meth:`config` makes the run's
    :class:`~evolve.config.CalibrationConfig`."""

    pack: Optional[Path] = None
    workbooks: Optional[Path] = None
    cases: Optional[Path] = None
    outputs: Optional[Path] = None
    role_map: Optional[Path] = None
    case_column: Optional[list[str]] = None
    frame_manifest: Optional[Path] = None
    no_header: bool = False
    splits: Optional[Path] = None
    rubric: Optional[str] = None
    criteria: Optional[list[str]] = None
    conditions: Optional[list[str]] = None
    parallel_criteria: Optional[int] = None
    audit: Optional[bool] = None
    evaluate_holdout: Optional[bool] = None
    accepted: Optional[int] = None
    max_attempts: Optional[int] = None
    batch_size: Optional[int] = None
    train_repeats: Optional[int] = None
    reeval_repeats: Optional[int] = None
    max_train_targets: Optional[int] = None
    max_validation_targets: Optional[int] = None
    racing: Optional[str] = None
    selection: Optional[str] = None
    model: Optional[str] = None
    batch_api: Optional[bool] = None
    export_batch: Optional[Path] = None
    seed: Optional[int] = None
    min_coverage: Optional[float] = None

    def config(self, *, scratch: Path | None = None, on_warning: Callable[[str], None] = lambda _: None,
               on_imported: Callable[[str], None] = lambda _: None) -> CalibrationConfig:
        """The run's configuration: a new run's layers, or with ``resume`` the stored one.

        Args:
            scratch: Where ``--workbooks`` are imported for ``--plan`` (which writes nothing
                into the archives); None: into the run folder.
            on_warning: Called with each warning of a ``--workbooks`` import.
            on_imported: Called with the counts of a ``--workbooks`` import.

        Raises:
            EvolveError: A bad value, an option ``resume`` cannot apply, a missing input.
        """
        from evolve.config import resolve_config
        from evolve.data import load_pack

        racing_on = on_off(self.racing, "--racing")  # the options first: a typo costs nothing
        if self.selection is not None and self.selection not in ("robust", "paper"):
            raise EvolveError(f"--selection takes 'robust' or 'paper', not {self.selection!r}.")
        if self.resume is not None:
            config = self._resumed(self.resume)
        else:
            root = self._prompts_root()  # before any rubric is read
            pack, splits, run_id = self.pack, self.splits, self.run_id
            if self.workbooks is not None:
                pack, splits, run_id = self._import_workbooks(root, scratch, on_warning, on_imported)
            if pack is None:
                raise EvolveError("--pack is required (or --workbooks DIR, or --resume RUN_DIR to continue a run).")
            name = load_pack(pack, prompts_root=root).manifest.name
            config = resolve_config(preset=self.preset, config_file=self.config_file,
                                    overrides=self._overrides(pack, splits, run_id, racing_on),
                                    defaults={"splits": Path("splits") / name, "run_id": f"{name}-{_stamp()}"})
        config = config.model_copy(update={"endpoint": with_spend(config.endpoint, **self.given())})  # also on resume
        return config.model_copy(update={"endpoint": with_batch(config.endpoint, self.batch_api)})

    def _resumed(self, run_dir: Path) -> CalibrationConfig:
        """The stored configuration of the run ``--resume`` continues, with what a resume may
        change (parallelism, a replica group's URLs) applied.

        Raises:
            ConfigError: An option the resume cannot apply; another ``--base-url`` for a run on
                a single URL (its answers are cached under that URL).
        """
        from evolve.config import load_run_config

        stored = load_run_config(run_dir)
        refuse_on_resume(self.given(), defaults={"preset": "quick", "no_header": False},
                         allowed=("resume", "parallel_criteria", "max_concurrency", "base_url", *SPEND_OPTIONS,
                                  "plan", "calls_per_hour", "batch_api", "export_batch"),
                         command="evolve calibrate")
        if self.base_url and not stored.endpoint.is_group:  # a replica group's may change: see _resumed_endpoint
            raise ConfigError(f"{run_dir}: the run's answers are cached under its endpoint "
                              f"{stored.endpoint.base_url or stored.endpoint.provider!r}, so resuming on --base-url "
                              f"{' '.join(self.base_url)} would pay every finished call again. Resume without "
                              "--base-url (serve the model at the run's URL again), or start a new --run-id.")
        config = stored.model_copy(update={"archives_dir": run_dir.parent, "run_id": run_dir.name,
                                           "endpoint": _resumed_endpoint(stored.endpoint, self.base_url,
                                                                         self.max_concurrency)})
        if self.parallel_criteria is not None:  # how many archives run at once changes no result
            config = config.model_copy(update={"parallel_criteria": self.parallel_criteria})
        return config

    def _overrides(self, pack: Path, splits: Path | None, run_id: str | None, racing_on: bool | None) -> dict[str, Any]:
        """The layer of a new run's configuration these options make."""
        return {
            "run_id": run_id, "pack": pack, "splits": splits, "prompts_root": self.prompts_root,
            "rubric": self.rubric, "criteria": tuple(self.criteria) if self.criteria else None,
            "conditions": tuple(self.conditions) if self.conditions else None,
            "parallel_criteria": self.parallel_criteria, "audit": self.audit, "evaluate_holdout": self.evaluate_holdout,
            "seed": self.seed, "min_coverage": self.min_coverage, "archives_dir": self.archives_dir,
            "endpoint": self.endpoint(model=self.model), "judge": {"model": self.model},
            "budget": {
                "accepted": self.accepted, "max_attempts": self.max_attempts, "batch_size": self.batch_size,
                "train_repeats": self.train_repeats, "reeval_repeats": self.reeval_repeats,
                "max_train_targets": self.max_train_targets, "max_validation_targets": self.max_validation_targets,
            },
            "racing": {"enabled": racing_on},
            "selection": {"rule": self.selection},
        }

    def _prompts_root(self) -> Path | None:
        """The prompts root the configuration will hold (``--prompts-root`` >
        ``EVOLVE_PROMPTS_ROOT`` > the config file's ``prompts_root``), known before the pack is read."""
        from evolve.config import PRESETS
        from evolve.layering import layered

        value = layered(PRESETS, preset=self.preset, config_file=self.config_file,
                        overrides={"prompts_root": self.prompts_root}, environ=None).get("prompts_root")
        return Path(value) if value else None

    def _import_workbooks(self, root: Path | None, scratch: Path | None, on_warning: Callable[[str], None],
                          on_imported: Callable[[str], None]) -> tuple[Path, Path, str]:
        """``--workbooks``: import and split into the run folder (pack/, splits/), or into ``scratch``."""
        from evolve.calibration import prepare_workbook_inputs
        from evolve.data import parse_column_overrides

        if self.workbooks is None or self.cases is None or self.outputs is None:
            raise EvolveError("--workbooks needs --cases CASEFILE and --outputs RECORDS_DIR (the consilium records rated).")
        if self.conditions and len(self.conditions) > 1:
            raise EvolveError("--workbooks rates one consilium condition; pass a single --condition.")
        run_id = self.run_id or f"{self.workbooks.resolve().name}-{_stamp()}"
        inputs = prepare_workbook_inputs(
            self.workbooks, cases=self.cases, outputs=self.outputs,
            into=(scratch or self.archives_dir or Path("archives")) / run_id,
            condition=self.conditions[0] if self.conditions else None, role_map=self.role_map,
            case_columns=parse_column_overrides(self.case_column) if self.case_column else None,
            frame_manifest=self.frame_manifest, seed=42 if self.seed is None else self.seed, prompts_root=root,
            headerless=self.no_header)
        for warning in inputs.warnings:
            on_warning(str(warning))
        on_imported("imported " + ", ".join(f"{k} {v}" for k, v in inputs.counts.items()))
        return inputs.pack, inputs.splits, run_id


class BenchRunOptions(RunOptions):
    """What ``evolve bench run`` was given (see its ``--help``); :meth:`config` makes the run's
    :class:`~evolve.consilium.BenchConfig`."""

    cases: Optional[Path] = None
    case_column: Optional[list[str]] = None
    models: Optional[list[str]] = None
    conditions: Optional[list[str]] = None
    topologies: Optional[list[str]] = None
    workers: Optional[list[str]] = None
    consolidator: Optional[str] = None
    max_cases: Optional[int] = None
    max_rounds: Optional[int] = None
    judge: bool = True
    guidance: Optional[Path] = None
    judge_model: Optional[str] = None
    judge_repeats: Optional[int] = None
    parallel_cases: Optional[int] = None
    context_tokens: Optional[int] = None

    def config(self) -> BenchConfig:
        """The run's configuration: a new run's layers, or with ``resume`` the stored one.

        Raises:
            EvolveError: An option ``resume`` cannot apply, no ``cases``, a bad value.
        """
        from evolve.consilium import load_bench_config, resolve_bench_config

        if self.resume is not None:
            refuse_on_resume(self.given(), defaults={"preset": "quick", "judge": True},
                             allowed=("resume", "judge", "guidance", "parallel_cases", "max_concurrency", *SPEND_OPTIONS,
                                      "plan", "calls_per_hour"),
                             command="evolve bench run")
            config = load_bench_config(self.resume)
            updates: dict[str, object] = {"parallel_cases": self.parallel_cases} if self.parallel_cases is not None else {}
            if self.max_concurrency is not None:  # in flight at once: no result changes
                updates["endpoint"] = config.endpoint.model_copy(update={"max_concurrency": self.max_concurrency})
            config = config.model_copy(update=updates)
        else:
            if self.cases is None:
                raise EvolveError("--cases FILE_OR_PACK is required (or --resume RUN_DIR to continue a run).")
            config = resolve_bench_config(preset=self.preset, config_file=self.config_file, overrides=self._overrides(self.cases),
                                          defaults={"run_id": f"bench-{self.cases.stem}-{_stamp()}"})
        return config.model_copy(update={"endpoint": with_spend(config.endpoint, **self.given())})  # also on resume

    def _overrides(self, cases: Path) -> dict[str, Any]:
        """The layer of a new run's configuration these options make."""
        from evolve.data import parse_column_overrides

        return {
            "run_id": self.run_id,
            "archives_dir": self.archives_dir,
            "cases": cases,
            # a CaseColumns object, not a dict: layering drops None values, and ``title=`` maps to None
            "columns": parse_column_overrides(self.case_column) if self.case_column else None,
            "max_cases": self.max_cases,
            "models": tuple(self.models) if self.models else None,
            "conditions": tuple(self.conditions) if self.conditions else None,
            "topologies": tuple(self.topologies) if self.topologies else None,
            "workers": tuple(self.workers) if self.workers else None,
            "consolidator": self.consolidator,
            "endpoint": self.endpoint(context_tokens=self.context_tokens),
            "generation": {"max_rounds": self.max_rounds},
            "judge": {"model": self.judge_model},
            "judge_repeats": self.judge_repeats,
            "parallel_cases": self.parallel_cases,
            "prompts_root": self.prompts_root,
        }


class OtbRunOptions(RunOptions):
    """What ``evolve otb run`` was given (see its ``--help``); :meth:`config` makes the run's
    :class:`~evolve.otb.OtbConfig`."""

    board: Optional[Path] = None
    turn: Optional[Path] = None
    prompts: Optional[str] = None
    board_manifest: Optional[Path] = None
    turn_manifest: Optional[Path] = None
    models: Optional[list[str]] = None
    reasoning_models: Optional[list[str]] = None
    max_items: Optional[int] = None
    judge_model: Optional[str] = None
    judge: bool = True
    guidance: Optional[Path] = None

    def config(self) -> OtbConfig:
        """The run's configuration: a new run's layers, or with ``resume`` the stored one.

        Raises:
            EvolveError: An option ``resume`` cannot apply, a bad value.
        """
        from evolve.otb import resolve_otb_config
        from evolve.otb._judging import load_otb_config

        if self.resume is not None:
            refuse_on_resume(self.given(), defaults={"preset": "quick", "judge": True},
                             allowed=("resume", "judge", "guidance", "max_concurrency", *SPEND_OPTIONS, "plan",
                                      "calls_per_hour"),
                             command="evolve otb run")
            config = load_otb_config(self.resume)
            if self.max_concurrency is not None:
                config = config.model_copy(update={"endpoint": config.endpoint.model_copy(
                    update={"max_concurrency": self.max_concurrency})})
        else:
            config = resolve_otb_config(preset=self.preset, config_file=self.config_file, defaults={
                "run_id": f"otb-{_stamp()}"}, overrides={
                "run_id": self.run_id, "archives_dir": self.archives_dir,
                "board": self.board, "turn": self.turn, "max_items": self.max_items, "prompts": self.prompts,
                "board_manifest": self.board_manifest, "turn_manifest": self.turn_manifest,
                "models": tuple(self.models) if self.models else None,
                "reasoning_models": tuple(self.reasoning_models) if self.reasoning_models else None,
                "endpoint": self.endpoint(), "judge": {"model": self.judge_model}, "prompts_root": self.prompts_root})
        return config.model_copy(update={"endpoint": with_spend(config.endpoint, **self.given())})  # also on resume


class RejudgeOptions(Record):
    """What a command that judges a finished run again was given (``evolve bench judge``,
    ``evolve otb judge``; see their ``--help``): the run, the judge file, prices, limits and the plan.

    Attributes:
        run_dir: The run folder.
        guidance: A calibrated judge file (or its run folder) whose guidance the judge appends.
        prompts_root: Where the run's rubric is looked up, for a run without its own copy.
        plan: Print what judging would send and cost, call nothing.
        calls_per_hour: The endpoint's throughput, for the plan's hours.
        max_usd, max_tokens: Spending limits (a resumable stop).
        price_in, price_out, price_cached_in, price_batch_in, price_batch_out: USD per million tokens.
        batch_api: Send the judge calls through the endpoint's Batch API.
    """

    run_dir: Path
    guidance: Optional[Path] = None
    prompts_root: Optional[Path] = None
    plan: bool = False
    calls_per_hour: Optional[float] = None
    max_usd: Optional[float] = None
    max_tokens: Optional[int] = None
    price_in: Optional[float] = None
    price_out: Optional[float] = None
    price_cached_in: Optional[float] = None
    price_batch_in: Optional[float] = None
    price_batch_out: Optional[float] = None
    batch_api: Optional[bool] = None

    def spend(self) -> dict[str, Any]:
        """The spending options (:data:`SPEND_OPTIONS` and ``batch_api``) as keywords."""
        return self.model_dump(include={*SPEND_OPTIONS, "batch_api"})


class BenchJudgeOptions(RejudgeOptions):
    """What ``evolve bench judge`` was given: :class:`RejudgeOptions`, judge calls per target and
    criterion (``repeats``; None: the run's) and whether free-form pipelines' role components are
    judged too."""

    repeats: Optional[int] = None
    free_form_roles: bool = False

