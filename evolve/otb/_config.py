"""Configuration of an OpenTumorBoard run (``run_config.json``), layered like the others:
preset (``quick`` or ``paper``) < config file < environment < command-line options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from evolve.layering import layered, validated
from evolve.llm import MAX_OUTPUT_TOKENS, MAX_SEED
from evolve.records import Record
from evolve.rubric import run_prompts_root
from evolve.runs import EndpointSettings, OtbFolder, default_models, distinct_slugs, output_limit_problem

__all__ = ["OTB_PATHS", "OTB_PRESETS", "OTB_RUBRIC_ID", "Decoding", "OtbConfig", "OtbJudgeSettings", "otb_config_json", "read_otb_config",
           "resolve_otb_config"]

Task = Literal["board", "turn"]

OTB_RUBRIC_ID = "otb"
"""The rubric of OpenTumorBoard ratings and calibrations (``judge_prompts/otb``); a run keeps a copy."""


class Decoding(Record):
    """Decoding of a generating model (released defaults: temperature 0, top_p 1, seed 0).

    Attributes:
        temperature: Sampling temperature.
        top_p: Nucleus mass (1 = off).
        seed: Sampling seed sent with every call; None sends none.
        max_tokens_board: Output limit of a Board Simulation answer, tokens (released: 32,768).
        max_tokens_turn: Output limit of a Specialist Turn answer, tokens (released: 8,192).

    Output limits are 16..131,072 (:data:`evolve.llm.MAX_OUTPUT_TOKENS`); a generating limit is
    not held to the endpoint's context (the released defaults exceed the embedded server's
    slot: an answer that reaches the context is cut and recorded as a failure).
    """

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = Field(default=0, ge=0, le=MAX_SEED)
    max_tokens_board: int = Field(default=32768, ge=16, le=MAX_OUTPUT_TOKENS)
    max_tokens_turn: int = Field(default=8192, ge=16, le=MAX_OUTPUT_TOKENS)


class OtbJudgeSettings(Record):
    """The judge (released: temperature 0, top_p 1, seed 0, strict JSON schema).

    Attributes:
        model: Judge model id (default: the endpoint's model).
        temperature: Sampling temperature of judge calls.
        top_p: Nucleus mass of judge calls (1 = off).
        seed: Sampling seed of every judge call.
        max_tokens_board, max_tokens_turn: Output limits (released: 1,200 / 1,024 tokens;
            16..131,072 and at most the endpoint's context where it is known).
        four_decisions: Also rate the board's four decisions (one more call per board answer).
    """

    model: str | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    max_tokens_board: int = Field(default=1200, ge=16, le=MAX_OUTPUT_TOKENS)
    max_tokens_turn: int = Field(default=1024, ge=16, le=MAX_OUTPUT_TOKENS)
    four_decisions: bool = True


class OtbConfig(Record):
    """One OpenTumorBoard run.

    Attributes:
        version: Config format version.
        run_id: Folder name under ``archives_dir``.
        archives_dir: Where run folders go.
        board: A ``task1_*.jsonl[.gz]`` file (Board Simulation), or None.
        turn: A ``task2_*.jsonl[.gz]`` file (Specialist Turn), or None.
        max_items: Use only the first N records of each task, in file order; None = all.
        prompts: ``evolve`` (our prompts in the released layout) or ``released`` (the exact
            prompts stored in the released test manifests, ``board_manifest``/``turn_manifest``,
            for numbers comparable with the paper's).
        board_manifest, turn_manifest: ``test_inputs/{board_simulation,specialist_turn}.caption.jsonl``
            (ShareGPT); needed by ``prompts="released"`` for each task run.
        models: Generating models; each answers every item.
        decoding: Default decoding of every model.
        model_decoding: Decoding of particular models (the paper used each model's own).
        reasoning_models: Models of the run declared reasoning models (released response mode
            ``reasoning_final``): an answer is read only after its boundary (reasoning the
            provider returned apart, a "Final Answer" heading, ``</think>``); output without one
            is unfinished reasoning, a format failure rather than judged.
        endpoint: Where calls go (the embedded model by default).
        judge: The judge.
        cache_path: SQLite response cache; None = ``<cache dir>/responses.sqlite``.
        prompts_root: Folder of rubric folders looked up before the shipped rubrics for rubric
            ``otb`` (which names the criteria of a ``--guidance`` calibration run); None =
            ``EVOLVE_PROMPTS_ROOT`` if set, else the shipped one.
    """

    version: Literal[1] = 1
    run_id: str = Field(pattern=r"^[A-Za-z0-9._\-]*[A-Za-z0-9_\-][A-Za-z0-9._\-]*$")
    archives_dir: Path = Path("archives")
    board: Path | None = None
    turn: Path | None = None
    max_items: int | None = Field(default=None, ge=1, le=10_000_000)
    prompts: Literal["evolve", "released"] = "evolve"
    board_manifest: Path | None = None
    turn_manifest: Path | None = None
    models: tuple[str, ...] = Field(min_length=1)
    decoding: Decoding = Decoding()
    model_decoding: dict[str, Decoding] = {}
    reasoning_models: tuple[str, ...] = ()
    endpoint: EndpointSettings = EndpointSettings()
    judge: OtbJudgeSettings = OtbJudgeSettings()
    cache_path: Path | None = None
    prompts_root: Path | None = None

    @model_validator(mode="after")
    def _consistent(self) -> OtbConfig:
        if self.board is None and self.turn is None:
            raise ValueError("give a Board Simulation file (--board task1_*.jsonl) and/or a Specialist Turn file "
                             "(--turn task2_*.jsonl)")
        if self.prompts == "released":
            lacking = [f"--{t}-manifest" for t, _ in self.tasks() if self.manifest(t) is None]
            if lacking:
                raise ValueError(f"prompts 'released' reads the stored prompts of the released test manifests; give "
                                 f"{' and '.join(lacking)} (test_inputs/*.caption.jsonl)")
        unknown = sorted(set(self.model_decoding) - set(self.models))
        if unknown:
            raise ValueError(f"model_decoding names {unknown}, which this run does not generate with")
        strangers = sorted(set(self.reasoning_models) - set(self.models))
        if strangers:
            raise ValueError(f"reasoning_models names {strangers}, which this run does not generate with")
        distinct_slugs(self.models)
        for key in ("max_tokens_board", "max_tokens_turn"):
            if (problem := output_limit_problem(self.endpoint, f"judge.{key}", getattr(self.judge, key))) is not None:
                raise ValueError(problem)
        return self

    @property
    def run_dir(self) -> Path:
        """``archives_dir / run_id``."""
        return self.archives_dir / self.run_id

    def tasks(self) -> list[tuple[Task, Path]]:
        """The tasks of the run and their files, board first."""
        out: list[tuple[Task, Path]] = []
        if self.board is not None:
            out.append(("board", self.board))
        if self.turn is not None:
            out.append(("turn", self.turn))
        return out

    def manifest(self, task: Task) -> Path | None:
        """The released test manifest of a task, if given."""
        return self.board_manifest if task == "board" else self.turn_manifest

    def response_mode(self, model: str) -> str:
        """``reasoning_final`` for a declared reasoning model, else ``instruction_following``
        (the released names)."""
        return "reasoning_final" if model in self.reasoning_models else "instruction_following"

    def decoding_of(self, model: str) -> Decoding:
        """The model's own decoding, else the run's."""
        return self.model_decoding.get(model, self.decoding)


OTB_PRESETS: dict[str, dict[str, Any]] = {
    # the released settings: temperature 0, top_p 1, seed 0; 32,768 / 8,192 output tokens;
    # judge 1,200 / 1,024 tokens
    "paper": {"decoding": {"temperature": 0.0, "top_p": 1.0, "seed": 0, "max_tokens_board": 32768, "max_tokens_turn": 8192},
              "judge": {"max_tokens_board": 1200, "max_tokens_turn": 1024}},
    # a demo on the embedded 0.5B model: 2 items per task, short answers
    "quick": {"max_items": 2,
              "decoding": {"temperature": 0.0, "top_p": 1.0, "seed": 0, "max_tokens_board": 700, "max_tokens_turn": 200},
              "judge": {"max_tokens_board": 300, "max_tokens_turn": 300}},
}


def resolve_otb_config(*, preset: str | None = "quick", config_file: Path | None = None,
                       overrides: dict[str, Any] | None = None, environ: dict[str, str] | None = None,
                       defaults: dict[str, Any] | None = None) -> OtbConfig:
    """Build an :class:`OtbConfig` from preset < file < environment < overrides.

    Without ``models`` the endpoint's model generates; the judge model defaults to the
    endpoint's model. ``defaults``: top-level values taken only where no layer gives one (see
    :func:`~evolve.layering.layered`).

    Raises:
        ConfigError: Unknown preset, unreadable file or an invalid value (named).
    """
    data = layered(OTB_PRESETS, preset=preset, config_file=config_file, overrides=overrides, environ=environ,
                   defaults=defaults)
    return validated(OtbConfig, default_models(data), "OpenTumorBoard configuration")


OTB_PATHS = ("archives_dir", "board", "turn", "board_manifest", "turn_manifest", "cache_path", "prompts_root")
"""The path fields of :class:`OtbConfig`; ``run_config.json`` stores the relative ones relative to
the run folder (:meth:`~evolve.runs.RunFolder.portable`)."""


def otb_config_json(config: OtbConfig) -> str:
    """``run_config.json`` of a run: the configuration, its relative paths relative to the run
    folder (so :func:`read_otb_config` finds them from any current folder)."""
    data = OtbFolder(config.run_dir).portable_fields(json.loads(config.model_dump_json()), OTB_PATHS)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def read_otb_config(run_dir: Path | str, *, own_rubric: bool = True) -> OtbConfig:
    """The configuration stored in a run folder, placed at ``run_dir`` (``archives_dir`` and
    ``run_id`` follow the folder), its relative paths resolved from the run folder (runs written
    before they were stored that way: from the current folder).

    Args:
        run_dir: The run folder.
        own_rubric: Point ``prompts_root`` at the run's own copy of its rubric (``judge_prompts/``)
            when it has one, so every reader of the run uses the rubric it started with.

    Raises:
        RunError: Missing or unreadable file (``OtbFolder.read_json``).
        ValidationError: Not a valid configuration.
    """
    folder = OtbFolder(run_dir)
    data = folder.read_json(folder.CONFIG)
    config = OtbConfig.model_validate(folder.resolved_fields(data, OTB_PATHS) if isinstance(data, dict) else data)
    update: dict[str, Any] = {"archives_dir": folder.path.parent, "run_id": folder.path.name}
    if own_rubric:
        update["prompts_root"] = run_prompts_root(folder.prompts_root, config.prompts_root)
    return config.model_copy(update=update)
