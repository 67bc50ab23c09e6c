"""Layered settings: a preset, a config file, the environment and command-line options merged
into one nested dict, then validated into a settings record with errors in words.

Every engine's configuration (calibration, benchmark, OpenTumorBoard) is resolved the same way,
lowest to highest: preset < config file < environment (``EVOLVE_BASE_URL``, ``EVOLVE_MODEL``,
``EVOLVE_PROVIDER``, ``EVOLVE_PROMPTS_ROOT``) < options (:func:`layered`); :func:`validated`
turns the first invalid field into a :class:`~evolve.errors.ConfigError` that names it, its
allowed range and where to fix it.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError

from evolve.errors import ConfigError, path_problem

__all__ = ["PROMPTS_ROOT_ENV", "allowed_range", "env_overrides", "layered", "merge", "readable_error", "validated"]

_M = TypeVar("_M", bound=BaseModel)

PROMPTS_ROOT_ENV: Final = "EVOLVE_PROMPTS_ROOT"
"""Environment variable naming the folder of rubrics (``--prompts-root``; a config's
``prompts_root``)."""


def merge(base: dict[str, Any], over: dict[str, Any], where: str = "") -> dict[str, Any]:
    """``over`` on top of ``base``, section by section (``None`` values in ``over`` are ignored).

    Raises:
        ConfigError: A section (an object such as ``budget``) was given a plain value, which
            would otherwise silently replace the whole section with its defaults.
    """
    out = dict(base)
    for key, value in over.items():
        name = f"{where}{key}"
        prior = out.get(key)
        if isinstance(value, dict):
            if prior is not None and not isinstance(prior, dict):
                raise ConfigError(f"configuration field '{name}' must be an object of settings, got {prior!r}; "
                                  "fix the config file (e.g. \"budget\": {\"accepted\": 4}).")
            out[key] = merge(prior if isinstance(prior, dict) else {}, value, f"{name}.")
        elif value is not None:
            if isinstance(prior, dict):
                raise ConfigError(f"configuration field '{name}' must be an object of settings, got {value!r}; "
                                  "fix the config file (e.g. \"budget\": {\"accepted\": 4}).")
            out[key] = value
    return out


_BOUND_ERRORS: Final = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")
_BOUND_WORDS: Final = {"ge": "at least {}", "gt": "more than {}", "le": "at most {}", "lt": "less than {}"}


def _field_info(model: Any, loc: tuple[Any, ...]) -> Any:
    """The pydantic ``FieldInfo`` at ``loc`` inside ``model`` (through nested models, optional
    fields and dict values), or None."""
    info = None
    annotation: Any = model
    for part in loc:
        model_class = next((a for a in (annotation, *get_args(annotation))
                            if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if model_class is not None and isinstance(part, str) and part in model_class.model_fields:
            info = model_class.model_fields[part]
            annotation = info.annotation
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]  # a dict key: step into the value type
        else:
            return None
    return info


def _known_keys(model: Any, loc: tuple[Any, ...]) -> list[str] | None:
    """The field names of the model at ``loc`` inside ``model`` (``()``: ``model`` itself), or None."""
    annotation = model if not loc else getattr(_field_info(model, loc), "annotation", None)
    found = next((a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel)),
                 None)
    return list(found.model_fields) if found is not None else None


def allowed_range(model: Any, loc: tuple[Any, ...]) -> str | None:
    """The bounds of the numeric field at ``loc`` of ``model`` in words (``"at least 16 and at
    most 131072"``), or None when it has none."""
    info = _field_info(model, loc)
    if info is None:
        return None
    words = [_BOUND_WORDS[name].format(getattr(meta, name)) for meta in info.metadata
             for name in _BOUND_WORDS if getattr(meta, name, None) is not None]
    return " and ".join(words) or None


def readable_error(error: Any, model: type[BaseModel] | None = None) -> str:
    """A pydantic validation error of a configuration, in words a user can act on.

    A value out of its bounds is named with the whole allowed range when ``model`` (the
    configuration class validated) is given: ``1000000000 is out of range: it must be at least
    16 and at most 131072``.
    """
    if error.get("type") == "string_pattern_mismatch" and error.get("loc", ())[-1:] == ("run_id",):
        return ("a run id is a folder name of letters, digits, '.', '_' and '-' (not '.' or '..', which would "
                "put the run outside the archives folder); choose another --run-id")
    if error.get("type") == "extra_forbidden" and model is not None:
        if (known := _known_keys(model, tuple(error.get("loc", ()))[:-1])) is not None:
            key = str(error.get("loc", ("",))[-1])
            near = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            return f"unknown key {key!r}: {hint}the keys here are {', '.join(known)}"
    if error.get("type") in _BOUND_ERRORS:
        allowed = (allowed_range(model, tuple(error.get("loc", ()))) if model is not None else None) \
            or str(error.get("msg", "")).removeprefix("Input should be ")
        return f"{error.get('input')!r} is out of range: it must be {allowed}"
    return str(error.get("msg", "")).removeprefix("Value error, ")


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Overrides from the environment: the endpoint from ``EVOLVE_BASE_URL`` (several replicas'
    URLs separated by commas or spaces), ``EVOLVE_MODEL``,
    ``EVOLVE_PROVIDER``, and ``prompts_root`` from ``EVOLVE_PROMPTS_ROOT``."""
    env = os.environ if environ is None else environ
    found: dict[str, Any] = {}
    if env.get(PROMPTS_ROOT_ENV, "").strip():
        found["prompts_root"] = env[PROMPTS_ROOT_ENV].strip()
    endpoint: dict[str, Any] = {}
    if urls := env.get("EVOLVE_BASE_URL", "").replace(",", " ").split():  # several: replicas, by commas or spaces
        endpoint["base_url"], endpoint["base_urls"] = urls[0], tuple(urls) if len(urls) > 1 else ()
        endpoint["provider"] = "openai_compatible"
    if env.get("EVOLVE_MODEL"):
        endpoint["model"] = env["EVOLVE_MODEL"]
    if env.get("EVOLVE_PROVIDER"):
        endpoint["provider"] = env["EVOLVE_PROVIDER"]
    return {**found, "endpoint": endpoint} if endpoint else found


def validated(model: type[_M], data: dict[str, Any], what: str) -> _M:
    """``model.model_validate(data)``, with a validation error turned into one
    :class:`ConfigError` naming the field (``what``: how to name the configuration).

    Raises:
        ConfigError: The first invalid field, in words, and where to fix it.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        where = f"{what} field '{loc}'" if loc else what
        raise ConfigError(f"{where}: {readable_error(first, model)}. Fix the value in the config file or on the command "
                          "line.") from exc


def layered(
    presets: dict[str, dict[str, Any]],
    *,
    preset: str | None,
    config_file: Path | None,
    overrides: dict[str, Any] | None,
    environ: dict[str, str] | None,
    defaults: dict[str, Any] | None = None,
    config_data: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge preset < config file < environment < overrides into one nested dict (unvalidated).

    Shared by the calibration's ``resolve_config``, the benchmark's ``resolve_bench_config`` and
    OpenTumorBoard's configuration.

    ``defaults``: top-level values taken only where no layer gives one (a command's dated run id
    or ``splits/<pack name>``, which a config file's own must not lose to).

    ``config_data``: a configuration given as a dict (Python callers), at the config file's
    layer, on top of the file when both are given.

    Raises:
        ConfigError: Unknown preset or unreadable config file.
    """
    data: dict[str, Any] = {}
    if preset is not None:
        if preset not in presets:
            raise ConfigError(f"unknown preset {preset!r}; choose one of {sorted(presets)}.")
        data = merge(data, presets[preset])
    if config_file is not None:
        if (problem := path_problem(config_file)) is not None:
            raise ConfigError(f"{config_file}: cannot read config JSON: the config file {problem}. Pass a JSON file of "
                              "settings, or leave out --config.")
        try:
            loaded = json.loads(Path(config_file).read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{config_file}: cannot read config JSON ({exc}); fix or remove the file.") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"{config_file}: a config file holds one JSON object of settings (e.g. "
                              f"{{\"budget\": {{\"accepted\": 4}}}}), not {type(loaded).__name__} {loaded!r:.80}.")
        data = merge(data, loaded)
    data = merge(data, dict(config_data or {}))
    data = merge(data, env_overrides(environ))
    data = merge(data, overrides or {})
    return {**{k: v for k, v in (defaults or {}).items() if data.get(k) is None}, **data}
