"""The configuration keys, written out from the pydantic models themselves.

Every key of a run configuration is a field of a pydantic model; its description is the
model's Google-style ``Attributes:`` entry. :func:`config_keys` walks one model (nested
settings become dotted keys such as ``budget.accepted``) and :func:`config_reference` renders
the calibration, benchmark and OpenTumorBoard configurations as the Markdown that the README's
"Configuration keys" section holds (``evolve config keys --update README.md`` rewrites it).
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from evolve.errors import ConfigError

__all__ = ["README_MARKERS", "ConfigKey", "attribute_docs", "config_keys", "config_reference", "key_reference",
           "replace_marked"]

README_MARKERS = ("<!-- config-keys:start -->", "<!-- config-keys:end -->")
"""The lines between which the README holds :func:`config_reference`'s text."""


@dataclass(frozen=True)
class ConfigKey:
    """One key of a configuration.

    Attributes:
        path: Dotted path, e.g. ``budget.accepted``; ``<model>`` stands for a key the user
            chooses (``generation.model_limits.<model>.opinion``).
        type: The accepted values, e.g. ``int``, ``"robust" | "paper"``, ``path | null``.
        default: The default as JSON (``25``, ``null``, ``"archives"``), or ``required``.
        bounds: Range or form constraints (``>= 1``, ``1..5``), empty when none.
        description: The model's docstring entry for the field (one paragraph).
        presets: The value each preset sets, by preset name (only presets that set it).
        section: The settings model the key belongs to (a nested one for dotted keys).
    """

    path: str
    type: str
    default: str
    bounds: str
    description: str
    presets: dict[str, str] = field(default_factory=dict)
    section: str = ""


def attribute_docs(model: type) -> dict[str, str]:
    """Field descriptions from the ``Attributes:`` sections of a class's docstrings (its own
    and its bases'; the class's own win). An entry may name several fields (``a, b: text``).
    Continuation lines are joined with spaces; reST roles and double backticks become
    Markdown code."""
    out: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if klass.__module__.split(".")[0] in ("pydantic", "builtins"):
            continue  # BaseModel documents its own internals
        doc = klass.__dict__.get("__doc__")
        if isinstance(doc, str):
            out.update(_parse_attributes(inspect.cleandoc(doc)))
    return out


def _parse_attributes(doc: str) -> dict[str, str]:
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Attributes:"), None)
    if start is None:
        return {}
    entries: dict[str, list[str]] = {}
    names: list[str] = []
    indent: int | None = None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        indent = width if indent is None else indent
        if width < indent:
            break
        entry = re.match(r"([A-Za-z_][\w]*(?:\s*,\s*[A-Za-z_][\w]*)*)\s*:\s*(.*)", line.strip())
        if width == indent and entry:
            names = [n.strip() for n in entry.group(1).split(",")]
            for name in names:
                entries[name] = [entry.group(2)]
        else:
            for name in names:
                entries[name].append(line.strip())
    return {name: _markdown(" ".join(words).strip()) for name, words in entries.items()}


def _markdown(text: str) -> str:
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``(.+?)``", r"`\1`", text)


def _settings_model(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin in (tuple, list) and args:
        return f"list[{_type_name(args[0])}]"
    if origin in (dict, Mapping):
        return f"object[{_type_name(args[0])} -> {_type_name(args[1])}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(info: FieldInfo) -> str:
    low = high = ""
    parts = []
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low = f">= {item.ge}"
        elif isinstance(item, annotated_types.Gt):
            low = f"> {item.gt}"
        elif isinstance(item, annotated_types.Le):
            high = f"<= {item.le}"
        elif isinstance(item, annotated_types.Lt):
            high = f"< {item.lt}"
        elif isinstance(item, annotated_types.MinLen):
            parts.append("non-empty" if item.min_length == 1 else f"at least {item.min_length} long")
    return ", ".join([*(b for b in (low, high) if b), *parts])


def _json(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, default=str)


def _default(info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    return "required" if value is PydanticUndefined else _json(value)


def _preset_values(path: str, presets: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    found = {}
    for name, values in presets.items():
        node: Any = values
        for part in path.split("."):
            node = node.get(part, PydanticUndefined) if isinstance(node, Mapping) else PydanticUndefined
        if node is not PydanticUndefined and not isinstance(node, Mapping):
            found[name] = _json(node)
    return found


def config_keys(model: type[BaseModel], *, presets: Mapping[str, Mapping[str, Any]] | None = None,
                prefix: str = "") -> list[ConfigKey]:
    """Every key of a configuration model, depth first in field order.

    A field holding a settings model becomes a section (its own key, described by its own
    docstring entry or else the settings model's first paragraph, then its fields under
    ``key.``); a field mapping names to settings (``model_limits``) gets ``key.<model>.``.

    Args:
        model: The configuration model (e.g. ``CalibrationConfig``).
        presets: Preset values by preset name (e.g. ``evolve.config.PRESETS``), nested as in a
            config file.
        prefix: Dotted path of ``model`` inside an enclosing configuration.

    Returns:
        One :class:`ConfigKey` per key, sections included.
    """
    docs = attribute_docs(model)
    keys = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        annotation = info.annotation
        nested = _settings_model(annotation)
        keys.append(ConfigKey(path=path, type=_type_name(annotation), default=_default(info), bounds=_bounds(info),
                              description=docs.get(name) or (_summary(nested) if nested else ""),
                              presets=_preset_values(path, presets or {}), section=model.__name__))
        if nested is not None:
            keys += config_keys(nested, presets=presets, prefix=f"{path}.")
        elif typing.get_origin(annotation) is dict and (nested := _settings_model(typing.get_args(annotation)[1])):
            keys += config_keys(nested, presets=presets, prefix=f"{path}.<{name.split('_')[0]}>.")
    return keys


def _summary(model: type) -> str:
    doc = model.__dict__.get("__doc__")
    return _markdown(inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ")) if isinstance(doc, str) else ""


def _line(key: ConfigKey) -> str:
    facts = [f"`{key.type}`"]
    if key.bounds:
        facts.append(key.bounds)
    facts.append("required" if key.default == "required" else f"default `{key.default}`")
    if key.presets:
        facts.append(", ".join(f"{name} `{value}`" for name, value in key.presets.items()))
    return f"- `{key.path}` ({'; '.join(facts)}): {key.description}"


def key_reference(model: type[BaseModel], *, title: str, intro: str = "",
                  presets: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """One configuration's keys as Markdown: a heading, the top-level keys, then one group per
    settings section (its docstring's first paragraph, then its keys)."""
    lines = [f"### {title}", ""] + ([intro, ""] if intro else [])
    groups: dict[str, list[ConfigKey]] = {}
    sections = {}
    for key in config_keys(model, presets=presets):
        if key.type == "object":
            sections[key.path] = key.description
        else:
            groups.setdefault(key.path.rsplit(".", 1)[0] if "." in key.path else "", []).append(key)
    for group, keys in groups.items():
        if group:
            owner = _section_model(model, group)
            lines += ["", f"`{group}`: {sections.get(group) or (_summary(owner) if owner else '')}".rstrip(), ""]
        lines += [_line(k) for k in keys]
    return "\n".join(lines).rstrip() + "\n"


def _section_model(model: type[BaseModel], group: str) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in group.split("."):
        if current is None:
            return None
        if part.startswith("<"):
            continue
        annotation = current.model_fields[part].annotation
        nested = _settings_model(annotation)
        if nested is None and typing.get_origin(annotation) is dict:
            nested = _settings_model(typing.get_args(annotation)[1])
        current = nested
    return current


def _configurations() -> Iterator[tuple[str, str, type[BaseModel], Mapping[str, Mapping[str, Any]]]]:
    from evolve.config import PRESETS, CalibrationConfig
    from evolve.consilium import BENCH_PRESETS, BenchConfig
    from evolve.otb import OTB_PRESETS, OtbConfig

    yield ("Calibration (`evolve calibrate`, `evolve.calibrate`)",
           "`config.json` of a calibration run; `evolve calibrate --config FILE` and `evolve.config.resolve_config` "
           "read any subset of it.", CalibrationConfig, PRESETS)
    yield ("Benchmark (`evolve bench run`)",
           "`manifest.json`'s `config` of a benchmark run; `evolve bench run --config FILE` and "
           "`evolve.consilium.resolve_bench_config` read any subset of it.", BenchConfig, BENCH_PRESETS)
    yield ("OpenTumorBoard (`evolve otb run`)",
           "`run_config.json` of an OpenTumorBoard run; `evolve otb run --config FILE` and "
           "`evolve.otb.resolve_otb_config` read any subset of it.", OtbConfig, OTB_PRESETS)


def config_reference() -> str:
    """The Markdown reference of every key of the calibration, benchmark and OpenTumorBoard
    configurations (type, bounds, default, the value each preset sets, description), as the
    README's "Configuration keys" section holds it."""
    parts = ["Generated from the configuration models (`evolve config keys`); a config file holds any subset, "
             "nested as the dotted keys say (`{\"budget\": {\"accepted\": 4}}`). Layers, lowest first: the "
             "preset's value (shown after the default), the config file, the environment (`EVOLVE_BASE_URL`, "
             "`EVOLVE_MODEL`, `EVOLVE_PROVIDER`), the command line or the Python call.\n"]
    for title, intro, model, presets in _configurations():
        parts.append(key_reference(model, title=title, intro=intro, presets=presets))
    return "\n".join(parts)


def replace_marked(text: str, body: str, markers: Sequence[str] = README_MARKERS, *, where: str = "README.md") -> str:
    """``text`` with what lies between the two marker lines replaced by ``body``.

    Raises:
        ConfigError: A marker is missing, repeated or out of order.
    """
    start, end = markers
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ConfigError(f"{where}: needs exactly one {start!r} line followed by one {end!r} line around the "
                          "generated section; add them where the section goes.")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body.rstrip()}\n{end}{tail}"
