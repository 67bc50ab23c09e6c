"""Configuration and manifest of a benchmark run (consilium paper, generation defaults: every model id, prompt, parameter).

A :class:`BenchConfig` says what to generate: which cases, which generating models, which
conditions and topologies, with which decoding parameters and per-stage output limits, where
the endpoint is, and how the generated material is judged. :func:`resolve_bench_config` layers
it like :func:`evolve.config.resolve_config`: preset (``quick`` or ``paper``) < config file <
environment (``EVOLVE_BASE_URL``, ``EVOLVE_MODEL``, ``EVOLVE_PROVIDER``) < command-line options.

The run folder's ``manifest.json`` (:class:`BenchManifest`) holds the resolved configuration
together with what the run saw: the case file and its SHA-256, every prompt template of the
pipeline with its SHA-256, the pipeline and package versions and the creation time. API keys
are never written (only the *name* of the environment variable holding one).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from evolve.consilium._models import ARTIFACT_VERSION, Condition, Topology
from evolve.data import CaseColumns
from evolve.errors import RunError
from evolve.judge import JudgeSettings, with_legacy_layout
from evolve.layering import layered, validated
from evolve.llm import MAX_OUTPUT_TOKENS, MAX_SEED
from evolve.records import Record
from evolve.rubric import run_prompts_root
from evolve.runs import BenchFolder, EndpointSettings, default_models, distinct_slugs, model_slug, output_limit_problem

__all__ = [
    "BENCH_CONFIG_VERSION",
    "BENCH_PATHS",
    "BENCH_PRESETS",
    "MANIFEST_FILE",
    "BenchConfig",
    "BenchManifest",
    "GenerationSettings",
    "ModelOutputLimits",
    "OutputLimits",
    "PromptRecord",
    "load_bench_config",
    "load_bench_manifest",
    "manifest_json",
    "model_slug",
    "resolve_bench_config",
    "sha256_text",
]

BENCH_CONFIG_VERSION: Final = 2
"""2: the judge settings name their prompt layout (a version-1 run is read with ``target-first``,
the layout it was judged with)."""
"""Version of :class:`BenchConfig` as stored in ``manifest.json``."""

MANIFEST_FILE = BenchFolder.MANIFEST
"""The run manifest inside a benchmark run folder."""


def sha256_text(text: str) -> str:
    """Hex SHA-256 of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class OutputLimits(Record):
    """Output-token limits per pipeline stage (consilium paper, generation defaults), each 16..131,072
    (:data:`evolve.llm.MAX_OUTPUT_TOKENS`). They are not held to the endpoint's context here:
    the context check before a run (:func:`~evolve.consilium.check_context`) weighs each stage's
    prompt plus its limit and warns, since a cut answer fails only that call.

    Attributes:
        role_assignment: Role assignment, tokens (paper: 1,024-4,096).
        opinion: Each pre-consilium role opinion (and, in ``n+1``, each worker opinion and the
            consolidation), tokens (paper: ~16,000).
        consilium: Synthesis, every vote and every moderator decision, tokens (paper:
            16,000-32,768).
        finalizer: The final opinion, tokens.
    """

    role_assignment: int = Field(default=4096, ge=16, le=MAX_OUTPUT_TOKENS)
    opinion: int = Field(default=16000, ge=16, le=MAX_OUTPUT_TOKENS)
    consilium: int = Field(default=16000, ge=16, le=MAX_OUTPUT_TOKENS)
    finalizer: int = Field(default=16000, ge=16, le=MAX_OUTPUT_TOKENS)


class ModelOutputLimits(Record):
    """One model's output limits, tokens (16..131,072 each); a stage left out keeps the run's limit.

    Attributes:
        role_assignment: Role assignment, tokens; None = the run's ``limits.role_assignment``.
        opinion: Each opinion (and, in ``n+1``, each worker opinion and the consolidation),
            tokens; None = the run's.
        consilium: Synthesis, votes and moderator decisions, tokens; None = the run's.
        finalizer: The final opinion, tokens; None = the run's.
    """

    role_assignment: int | None = Field(default=None, ge=16, le=MAX_OUTPUT_TOKENS)
    opinion: int | None = Field(default=None, ge=16, le=MAX_OUTPUT_TOKENS)
    consilium: int | None = Field(default=None, ge=16, le=MAX_OUTPUT_TOKENS)
    finalizer: int | None = Field(default=None, ge=16, le=MAX_OUTPUT_TOKENS)


class GenerationSettings(Record):
    """Decoding of every generating call (consilium paper, generation defaults: temperature 0, top_p 1, seed 42, 5 rounds).

    Attributes:
        temperature: Sampling temperature. 0 keeps a resumed run's requests identical, so its
            finished calls come from the response cache.
        top_p: Nucleus mass (1 = off).
        seed: Sampling seed of every call (at most :data:`evolve.llm.MAX_SEED`).
        max_rounds: Most review rounds of the consilium (1-5; consilium paper, interactive consilium).
        max_reasks: Re-asks of one call after an invalid, cut or rule-breaking answer.
        limits: Output limits per stage.
        model_limits: Output limits of particular models (model id -> the stages that differ
            from ``limits``): the paper gave each model its own (role assignment
            1,024-4,096, pre-consilium ~16k, consilium 16k-32k tokens; consilium paper, generation defaults). Every id must
            be a model of the run (generating, worker or consolidator).
        max_field_chars: Character bound on every text field of a structured answer (see
            ``PipelineSettings``); None = unbounded (the paper's setting).
        max_text_chars: Character bound on free-form texts, asked for as ``{"text": ...}``;
            None = plain text (the paper's setting).
    """

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int = Field(default=42, ge=0, le=MAX_SEED)
    max_rounds: int = Field(default=5, ge=1, le=5)
    max_reasks: int = Field(default=2, ge=0, le=10)
    limits: OutputLimits = OutputLimits()
    model_limits: dict[str, ModelOutputLimits] = {}
    max_field_chars: int | None = Field(default=None, ge=20, le=1_000_000)
    max_text_chars: int | None = Field(default=None, ge=50, le=1_000_000)


class BenchConfig(Record):
    """Resolved configuration of one benchmark run (stored in ``manifest.json``).

    Attributes:
        version: Config format version.
        run_id: Folder name under ``archives_dir``.
        archives_dir: Where run folders go.
        cases: A case file (``.jsonl``/``.csv``/``.parquet``, read by
            :func:`evolve.data.load_cases` with ``columns``) or a rating-pack folder (its
            ``cases.jsonl`` is read; e.g. ``ratings/savage``).
        columns: Column mapping of a case file (ignored for a pack folder).
        max_cases: Use only the first N cases, in source order; None = all.
        models: Generating models; each pipeline uses one model for every stage (role
            assignment, opinions, consilium, finalizer). At least one; slugs must differ.
        conditions: ``free-form`` and/or ``structured`` (consilium paper, pre-consilium opinions).
        topologies: ``single`` and/or ``n+1`` (N worker models write the opinions, a
            consolidator merges them; the paper used 3+1).
        workers: Worker models of ``n+1`` (at least one when ``n+1`` is requested): each
            proposes a panel and writes every role's opinion.
        consolidator: Consolidating model of ``n+1``: merges the workers' panels and opinions
            and runs the consilium and the finalizer (the paper's 3+1); None = the pipeline's
            model.
        endpoint: Where calls go (the embedded model by default).
        generation: Decoding parameters and output limits of the pipeline.
        judge: Judge decoding (model, temperature, top_p, output limit). The judge model
            defaults to the endpoint's model.
        judge_repeats: Judge calls per (target, criterion), with seeds ``judge_seed + repeat``.
        judge_seed: Seed of the first judge repeat (every repeat's seed stays within
            :data:`evolve.llm.MAX_SEED`).
        parallel_cases: (case, model) units generated at once in threads over the shared
            client; does not change what is computed.
        cache_path: SQLite response cache; None = ``<cache dir>/responses.sqlite``.
        prompts_root: Folder of rubric folders looked up before the shipped rubrics for the
            judge rubric ``consilium``; None = ``EVOLVE_PROMPTS_ROOT`` if set, else the shipped one.
    """

    version: Literal[1, 2] = BENCH_CONFIG_VERSION
    run_id: str = Field(pattern=r"^[A-Za-z0-9._\-]*[A-Za-z0-9_\-][A-Za-z0-9._\-]*$")  # a folder name, never "." or ".."
    archives_dir: Path = Path("archives")
    cases: Path
    columns: CaseColumns = CaseColumns()
    max_cases: int | None = Field(default=None, ge=1, le=10_000_000)
    models: tuple[str, ...] = Field(min_length=1)
    conditions: tuple[Condition, ...] = ("free-form", "structured")
    topologies: tuple[Topology, ...] = ("single",)
    workers: tuple[str, ...] = ()
    consolidator: str | None = None
    endpoint: EndpointSettings = EndpointSettings()
    generation: GenerationSettings = GenerationSettings()
    judge: JudgeSettings = JudgeSettings()
    judge_repeats: int = Field(default=1, ge=1, le=20)
    judge_seed: int = Field(default=42, ge=0, le=MAX_SEED - 20)
    parallel_cases: int = Field(default=1, ge=1, le=64)
    cache_path: Path | None = None
    prompts_root: Path | None = None

    @field_validator("models", "conditions", "topologies", "workers")
    @classmethod
    def _no_repeats(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({v for v in value if value.count(v) > 1})
        if repeated:
            raise ValueError(f"{repeated} given more than once; list each once")
        return value

    @model_validator(mode="before")
    @classmethod
    def _version_1_keeps_its_layout(cls, data: Any) -> Any:
        """A version-1 run was judged with the ``target-first`` prompt layout."""
        return with_legacy_layout(data, older_than=2)

    @model_validator(mode="after")
    def _consistent(self) -> BenchConfig:
        if not self.conditions:
            raise ValueError("conditions: give at least one of 'free-form', 'structured'")
        if not self.topologies:
            raise ValueError("topologies: give at least one of 'single', 'n+1'")
        if "n+1" in self.topologies and not self.workers:
            raise ValueError("topology 'n+1' needs worker models (--worker M, repeatable; the paper used 3)")
        if self.workers and "n+1" not in self.topologies:
            raise ValueError("worker models are only used by topology 'n+1'; add --topology n+1 or drop --worker")
        used = {*self.models, *self.workers, *([self.consolidator] if self.consolidator else [])}
        unknown = sorted(set(self.generation.model_limits) - used)
        if unknown:
            raise ValueError(f"generation.model_limits names {unknown}, which this run does not use (its models: "
                             f"{sorted(used)}); spell the model id as given to --model/--worker")
        distinct_slugs(self.models)
        if (problem := output_limit_problem(self.endpoint, "judge.max_tokens", self.judge.max_tokens)) is not None:
            raise ValueError(problem)
        return self

    @property
    def run_dir(self) -> Path:
        """``archives_dir / run_id``."""
        return self.archives_dir / self.run_id

    def pipeline_settings(self):
        """The :class:`~evolve.consilium._pipeline.PipelineSettings` of this run.

        Imported lazily: the pipeline module is only needed when generating.
        """
        from evolve.consilium._pipeline import PipelineSettings, StageLimits

        g = self.generation
        run_limits = g.limits.model_dump()
        return PipelineSettings(
            temperature=g.temperature, top_p=g.top_p, seed=g.seed, max_rounds=g.max_rounds, max_reasks=g.max_reasks,
            limits=StageLimits(**run_limits), schema_limits=self.endpoint.schema_limits,
            model_limits={m: StageLimits(**{**run_limits, **own.model_dump(exclude_none=True)})
                          for m, own in g.model_limits.items()},
            max_field_chars=g.max_field_chars, max_text_chars=g.max_text_chars,
        )


BENCH_PRESETS: dict[str, dict[str, Any]] = {
    # consilium paper, generation defaults: temperature 0, top_p 1, seed 42, 5 rounds; role assignment 4,096, pre-consilium
    # 16,000, consilium 16,000 output tokens (the paper gave some models 16,384 / 32,768: set
    # generation.model_limits in a config file); judge as in consilium paper, judge calls (8,000 tokens).
    "paper": {
        "generation": {
            "temperature": 0.0, "top_p": 1.0, "seed": 42, "max_rounds": 5, "max_reasks": 2,
            "limits": {"role_assignment": 4096, "opinion": 16000, "consilium": 16000, "finalizer": 16000},
        },
        "judge": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 8000, "rationale_max_chars": 1200},
        "judge_repeats": 1,
    },
    # A demo on the embedded model: 3 cases, short outputs, 2 rounds, so a handful of cases
    # finishes on 2 CPU cores; judge output as in the calibration quick preset. Texts are
    # bounded in characters (JSON-schema maxLength) so the small model closes its answers
    # within the token limits instead of being cut.
    "quick": {
        "max_cases": 3,
        "generation": {
            "temperature": 0.0, "top_p": 1.0, "seed": 42, "max_rounds": 2, "max_reasks": 2,
            "limits": {"role_assignment": 600, "opinion": 600, "consilium": 500, "finalizer": 700},
            "max_field_chars": 240, "max_text_chars": 900,
        },
        "judge": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 160, "rationale_max_chars": 120},
        "judge_repeats": 1,
    },
}
"""Preset values by name (lowest layer of :func:`resolve_bench_config`)."""


def resolve_bench_config(
    *,
    preset: str | None = "quick",
    config_file: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
) -> BenchConfig:
    """Build a :class:`BenchConfig` from preset < file < environment < overrides.

    Model defaults: without ``models`` the endpoint's model generates; without an endpoint
    model the first generating model becomes the endpoint's model; the judge model defaults to
    the endpoint's model.

    Args:
        preset: ``quick``, ``paper`` or None.
        config_file: JSON file with any subset of the config fields.
        overrides: Nested dict of values (None values are ignored), e.g. from the CLI.
        environ: Environment to read (default: ``os.environ``).
        defaults: Top-level values taken only where no layer gives one (see :func:`~evolve.layering.layered`).

    Raises:
        ConfigError: Unknown preset, unreadable file or invalid values (names the field).
    """
    data = layered(BENCH_PRESETS, preset=preset, config_file=config_file, overrides=overrides, environ=environ,
                   defaults=defaults)
    return validated(BenchConfig, default_models(data), "benchmark configuration")


class PromptRecord(Record):
    """One prompt template of the pipeline, as the run used it.

    Attributes:
        sha256: Hex SHA-256 of ``text``.
        text: The template.
    """

    sha256: str
    text: str


class BenchManifest(Record):
    """``manifest.json`` of a benchmark run: the configuration and what the run saw (consilium paper, generation defaults).

    Attributes:
        version: Manifest format version.
        created: When the run started (UTC, ISO 8601).
        package_version: ``evolve.__version__``.
        pipeline_version: The pipeline's ``PIPELINE_VERSION``.
        config: The resolved configuration (API keys are never part of it).
        models: Generating models, in run order, with their file-name slugs.
        endpoint: Provider, base URL and default model of the endpoint (no key).
        decoding: Temperature, top_p, seed and round limit of every generating call.
        limits: Output-token limits per stage.
        prompts: Every prompt template of the pipeline by name, with its SHA-256.
        pipeline: The pipeline's own description: its settings and the response formats
            (JSON schemas) of the structured stages.
        cases_path: The case file (or pack folder) read.
        cases_file: The file actually hashed (the case file, or the pack's ``cases.jsonl``).
        cases_sha256: Hex SHA-256 of ``cases_file``.
        case_ids: The run's cases, in source order (after ``max_cases``).
    """

    version: Literal[1] = ARTIFACT_VERSION
    created: str
    package_version: str
    pipeline_version: str
    config: BenchConfig
    models: dict[str, str]
    endpoint: dict[str, str | None]
    decoding: dict[str, float | int]
    limits: OutputLimits
    prompts: dict[str, PromptRecord]
    pipeline: dict[str, Any] = {}
    cases_path: str
    cases_file: str
    cases_sha256: str
    case_ids: tuple[str, ...]

    @classmethod
    def build(
        cls,
        config: BenchConfig,
        *,
        pipeline_version: str,
        catalog: dict[str, str],
        description: dict[str, Any] | None = None,
        cases_file: Path,
        case_ids: tuple[str, ...],
    ) -> BenchManifest:
        """The manifest of a run starting now (see the attributes)."""
        from evolve import __version__

        g = config.generation
        ep = config.endpoint
        return cls(
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            package_version=__version__,
            pipeline_version=str(pipeline_version),
            config=config,
            models={m: model_slug(m) for m in config.models},
            endpoint={"provider": ep.provider, "base_url": ep.base_url, "model": ep.model,
                      "local_model": ep.local_model if ep.provider == "embedded" else None},
            decoding={"temperature": g.temperature, "top_p": g.top_p, "seed": g.seed, "max_rounds": g.max_rounds},
            limits=g.limits,
            prompts={name: PromptRecord(sha256=sha256_text(text), text=text) for name, text in sorted(catalog.items())},
            pipeline=json.loads(json.dumps(description or {})),
            cases_path=str(config.cases),
            cases_file=str(cases_file),
            cases_sha256=hashlib.sha256(Path(cases_file).read_bytes()).hexdigest(),
            case_ids=case_ids,
        )


BENCH_PATHS: Final = ("archives_dir", "cases", "cache_path", "prompts_root")
"""The path fields of :class:`BenchConfig`; ``manifest.json`` stores the relative ones relative to
the run folder (:meth:`~evolve.runs.RunFolder.portable`)."""


def manifest_json(manifest: BenchManifest) -> str:
    """``manifest.json`` of a run: the manifest, the relative paths of its configuration relative
    to the run folder (so :func:`load_bench_manifest` finds them from any current folder)."""
    data = json.loads(manifest.model_dump_json())
    data["config"] = BenchFolder(manifest.config.run_dir).portable_fields(data["config"], BENCH_PATHS)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def load_bench_manifest(run_dir: Path | str) -> BenchManifest:
    """Read ``manifest.json`` of a benchmark run folder.

    Relative paths of its configuration are resolved from the run folder (runs written before
    they were stored that way: from the current folder), see :meth:`~evolve.runs.RunFolder.resolve`.

    Raises:
        RunError: Missing or invalid file (not a benchmark run folder).
    """
    folder = BenchFolder(run_dir)
    path = folder / MANIFEST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("config"), dict):
            data["config"] = folder.resolved_fields(data["config"], BENCH_PATHS)
        return BenchManifest.model_validate(data)
    except (OSError, ValueError) as exc:  # ValidationError and JSONDecodeError are ValueErrors
        raise RunError(
            f"{path}: cannot read the benchmark manifest ({exc}). Pass a folder written by `evolve bench run`."
        ) from exc


def load_bench_config(run_dir: Path | str) -> BenchConfig:
    """The configuration stored in a run folder's ``manifest.json``, placed at ``run_dir``
    (``archives_dir`` and ``run_id`` follow the folder, so a moved run folder still resumes).

    ``prompts_root`` is the run's own copy of its rubric (``judge_prompts/``) when it has one,
    so judging and resuming read the rubric the run started with.

    Raises:
        RunError: Missing or invalid manifest.
    """
    run_dir = Path(run_dir)
    config = load_bench_manifest(run_dir).config
    root = run_prompts_root(BenchFolder(run_dir).prompts_root, config.prompts_root)
    return config.model_copy(update={"archives_dir": run_dir.parent, "run_id": run_dir.name, "prompts_root": root})
