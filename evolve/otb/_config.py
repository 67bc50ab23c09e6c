"""Configuration of an OpenTumorBoard run (``run_config.json``), layered like the others:
preset (``quick`` or ``paper``) < config file < environment < command-line options."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evolve.config import default_models, layered, validated
from evolve.runs import EndpointSettings, distinct_slugs

__all__ = ["OTB_PRESETS", "Decoding", "OtbConfig", "OtbJudgeSettings", "resolve_otb_config"]

Task = Literal["board", "turn"]


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Decoding(_Settings):
    """Decoding of a generating model (released defaults: temperature 0, top_p 1, seed 0).

    Attributes:
        temperature: Sampling temperature.
        top_p: Nucleus mass (1 = off).
        seed: Sampling seed sent with every call; None sends none.
        max_tokens_board: Output limit of a Board Simulation answer, tokens (released: 32,768).
        max_tokens_turn: Output limit of a Specialist Turn answer, tokens (released: 8,192).
    """

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = 0
    max_tokens_board: int = Field(default=32768, ge=16)
    max_tokens_turn: int = Field(default=8192, ge=16)


class OtbJudgeSettings(_Settings):
    """The judge (released: temperature 0, top_p 1, seed 0, strict JSON schema).

    Attributes:
        model: Judge model id (default: the endpoint's model).
        temperature: Sampling temperature of judge calls.
        top_p: Nucleus mass of judge calls (1 = off).
        seed: Sampling seed of every judge call.
        max_tokens_board, max_tokens_turn: Output limits (released: 1,200 / 1,024 tokens).
        four_decisions: Also rate the board's four decisions (one more call per board answer).
    """

    model: str | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int = 0
    max_tokens_board: int = Field(default=1200, ge=16)
    max_tokens_turn: int = Field(default=1024, ge=16)
    four_decisions: bool = True


class OtbConfig(_Settings):
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
    max_items: int | None = Field(default=None, ge=1)
    prompts: Literal["evolve", "released"] = "evolve"
    board_manifest: Path | None = None
    turn_manifest: Path | None = None
    models: tuple[str, ...] = Field(min_length=1)
    decoding: Decoding = Decoding()
    model_decoding: dict[str, Decoding] = {}
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
        distinct_slugs(self.models)
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
                       overrides: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> OtbConfig:
    """Build an :class:`OtbConfig` from preset < file < environment < overrides.

    Without ``models`` the endpoint's model generates; the judge model defaults to the
    endpoint's model.

    Raises:
        ConfigError: Unknown preset, unreadable file or an invalid value (named).
    """
    data = layered(OTB_PRESETS, preset=preset, config_file=config_file, overrides=overrides, environ=environ)
    return validated(OtbConfig, default_models(data), "OpenTumorBoard configuration")
