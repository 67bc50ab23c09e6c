"""Every field of ``rubric.json``, as a Markdown table generated from the models themselves
(:class:`~evolve.rubric.Rubric`, :class:`~evolve.rubric.Criterion`), so the README's table cannot
drift from the code."""

from __future__ import annotations

import json
import re
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from evolve.rubric._models import Criterion, Rubric

__all__ = ["rubric_field_reference"]

_SCALARS = {str: "string", int: "integer", bool: "true/false", float: "number", type(None): "null"}


def _type_name(annotation: Any) -> str:
    """A JSON reader's name for a field's type: ``string``, ``list of string``, ``integer or null``..."""
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"`{annotation.__name__}` (table below)"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is dict:
        return f"object ({_type_name(args[0])} → {_type_name(args[1])})"
    if origin in (tuple, list):
        return f"list of {_type_name(args[0])}"
    return str(annotation)


def _descriptions(model: type[BaseModel]) -> dict[str, str]:
    """The ``Attributes:`` section of a model's Google-style docstring: field -> one-line text."""
    doc = model.__doc__ or ""
    section = doc.split("Attributes:", 1)[1] if "Attributes:" in doc else ""
    out: dict[str, str] = {}
    current = None
    for line in section.splitlines():
        m = re.match(r"^ {8}(\w+): (.*)$", line)
        if m:
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current and line.strip():
            out[current] += " " + line.strip()
    return out


def _constraint(info: Any) -> str:
    parts = []
    for item in info.metadata:
        pattern = getattr(item, "pattern", None)
        if pattern:
            parts.append(f"matching `{pattern}`")
        ge = getattr(item, "ge", None)
        if ge is not None:
            parts.append(f"≥ {ge}")
    return f", {', '.join(parts)}" if parts else ""


def _table(model: type[BaseModel]) -> list[str]:
    desc = _descriptions(model)
    rows = [f"| `{model.__name__}` field | type | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        default = "required" if info.default is PydanticUndefined else f"`{json.dumps(info.default)}`"
        text = desc.get(name, "").replace("``", "`").replace("|", "\\|")
        rows.append(f"| `{name}` | {_type_name(info.annotation)}{_constraint(info)} | {default} | {text} |")
    return rows


def rubric_field_reference() -> str:
    """Every field of a ``rubric.json`` (the rubric, then each of its criteria) as Markdown.

    Two tables (field, JSON type, default or ``required``, meaning), generated from the models'
    fields and the ``Attributes:`` of their docstrings; the README embeds this text.

    Returns:
        The tables, ending with a newline.
    """
    return "\n".join([*_table(Rubric), "", *_table(Criterion)]) + "\n"
