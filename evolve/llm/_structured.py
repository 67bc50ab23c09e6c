"""Structured output: JSON-schema ``response_format`` for a pydantic model, and parsing replies.

Every structured request of `evolve` (judge verdicts, mutation proposals, drift checks,
consilium stages) is built and read here, so all of them are strict-mode safe in one way.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["fence", "parse_json_object", "response_format", "validation_problem"]

_MARKER = re.compile(r"<<<|>>>")


def fence(text: str) -> str:
    """Untrusted material (case text, model output, physicians' comments) made safe to place
    between a prompt's ``<<<NAME>>>`` ... ``<<<END NAME>>>`` markers: the marker sequences it
    contains are replaced by look-alikes, so it cannot close its block and speak as instructions.
    Leading and trailing whitespace is dropped."""
    return _MARKER.sub(lambda m: "‹‹‹" if m.group(0) == "<<<" else "›››", text.strip())


def _strict(schema: Any) -> Any:
    """A JSON schema fit for strict structured outputs: every object property required, no
    ``default`` values, no model docstrings (``description`` of ``$defs`` objects)."""
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if k != "default"}
    if out.get("type") == "object" and isinstance(out.get("properties"), dict):
        out["required"] = list(out["properties"])
        out.pop("description", None)
    return out


def response_format(model: type[BaseModel], name: str) -> dict:
    """OpenAI ``response_format`` (strict JSON schema) for a pydantic model.

    Strict-mode safe: every object property is required and defaults are dropped (hosted
    strict modes refuse optional properties), and a model's docstring - for developers, not
    for the endpoint - is left out. Each call returns a new dict (the caller may change it);
    the schema is generated once per model and name.
    """
    return json.loads(_format_text(model, name))


@functools.lru_cache(maxsize=256)
def _format_text(model: type[BaseModel], name: str) -> str:
    """:func:`response_format` as JSON text, generated once per model and name (pydantic's
    schema generation is a millisecond a call; the judges of OpenTumorBoard ask per item)."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema = _strict(schema)
    return json.dumps({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}})


def parse_json_object(text: str) -> dict:
    """Parse a JSON object from model output, tolerating a Markdown code fence around it.

    Raises:
        ValueError: No JSON object could be parsed.
    """
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", stripped)
    value = json.loads(stripped)
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


_TYPE_NAMES = {"int": "an integer", "bool": "a boolean (true or false)", "string": "a string", "float": "a number",
               "list": "a list", "dict": "an object", "model": "an object"}
_BOUNDS = {"less_than_equal": ("le", "above the maximum"), "less_than": ("lt", "not below"),
           "greater_than_equal": ("ge", "below the minimum"), "greater_than": ("gt", "not above")}


def _shown(value: Any, limit: int = 40) -> str:
    """``value`` as JSON (``"false"`` for a string, ``false`` for a boolean), cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rule(err: Any) -> str:
    """What one pydantic error says about its value: the value and the rule it breaks."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "missing":
        return "missing"
    if kind == "extra_forbidden":
        return f"{_shown(value)} is not a field of the schema"
    if kind == "literal_error":
        return f"{_shown(value)} is not one of {ctx.get('expected', '')}".rstrip()
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"{_shown(value)} is {words} {ctx.get(key)}"
    if kind == "string_too_long":
        return f"{len(value)} characters, over the limit of {ctx.get('max_length')}"
    if kind == "string_too_short":
        return f"{len(value)} characters, under the minimum of {ctx.get('min_length')}"
    if kind.endswith("_type") and kind.removesuffix("_type") in _TYPE_NAMES:
        return f"{_shown(value)} is not {_TYPE_NAMES[kind.removesuffix('_type')]}"
    message = str(err.get("msg", "")).removeprefix("Value error, ")
    if kind == "value_error" and (repr(value) in message or _shown(value) in message):
        return message  # the validator's own message names the value
    return f"{_shown(value)}: {message}"


def validation_problem(exc: ValueError, *, values: bool = True, limit: int = 4) -> str:
    """One line naming what a reply broke: for a pydantic ``ValidationError``, each field (dotted
    path; ``(answer)`` for the reply as a whole), then its value and the rule, e.g.
    ``therapy: 0 is not one of -1, 1, 2, 3, 4 or 5``, problems joined by ``"; "``; for any other
    ``ValueError`` (e.g. :func:`parse_json_object`'s), its message on one line.

    Args:
        exc: The error of reading a reply (``parse_json_object`` or ``Model.model_validate``).
        values: Quote the offending values (JSON, at most 40 characters each; a string that is too
            long or short is given by its length). False gives pydantic's own rule text without
            any value (for text sent back to a model, which must not quote identifiers).
        limit: At most this many problems are named; with ``values`` the rest are counted
            (``+N more``).

    Returns:
        A single line (with ``values``, runs of whitespace and newlines become one space; a
        message other than a ``ValidationError``'s is cut to 200 characters).
    """
    if not isinstance(exc, ValidationError):
        return " ".join(str(exc).split())[:200]
    errors = exc.errors()
    parts = []
    for err in errors[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "(answer)"
        parts.append(f"{where}: {_rule(err) if values else err['msg']}")
    if not values:  # the consilium's re-ask text, unchanged (it is part of cached requests)
        return "; ".join(parts)
    more = len(errors) - limit
    line = "; ".join(parts) + (f"; +{more} more" if more > 0 else "")
    return " ".join(line.split())
