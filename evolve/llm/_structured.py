"""Structured output: JSON-schema ``response_format`` for a pydantic model, and parsing replies.

Every structured request of `evolve` (judge verdicts, mutation proposals, drift checks,
consilium stages) is built and read here, so all of them are strict-mode safe in one way.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

__all__ = ["fence", "parse_json_object", "response_format"]

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
    for the endpoint - is left out.
    """
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema = _strict(schema)
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


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
