"""Whether a reply fits the JSON schema its request sent (the response cache's rule).

A structured reply is stored only when it is what was asked for: a JSON object valid against
the schema of ``response_format`` *as sent* (without ``maxLength``/``minLength`` when the
provider was told to leave them out). Anything else - a score outside the scale, a string for
a boolean, an extra key - still reaches the caller, who records its own failure, but is never
replayed by a resumed run.

Validation is the ``jsonschema`` package (JSON Schema 2020-12, ``$defs``/``$ref`` included),
with JSON types read strictly: an integer is a JSON integer (``3``, not ``3.0`` nor ``true``),
a number is finite (no ``NaN``/``Infinity``), as the toolkit's readers take them.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any

__all__ = ["schema_violation", "sent_schema"]


def _strict_types() -> Any:
    """A 2020-12 validator class whose ``integer`` and ``number`` are the JSON ones, strictly."""
    from jsonschema import Draft202012Validator, validators

    def integer(_checker: Any, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def number(_checker: Any, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return not isinstance(value, float) or math.isfinite(value)

    checker = Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": integer, "number": number})
    return validators.extend(Draft202012Validator, type_checker=checker)


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """The compiled validator of a schema (its canonical JSON is the cache key).

    Raises:
        jsonschema.SchemaError: The schema itself is not valid JSON Schema.
    """
    cls = _strict_types()
    schema = json.loads(schema_json)
    cls.check_schema(schema)
    return cls(schema)


def sent_schema(response_format: dict[str, Any] | None, *, schema_limits: bool = True) -> dict[str, Any] | None:
    """The JSON schema of a ``json_schema`` ``response_format`` as the endpoint received it.

    Args:
        response_format: The request's ``response_format``.
        schema_limits: Whether the provider sends ``maxLength``/``minLength`` (see
            :class:`~evolve.llm.OpenAICompatibleProvider`); False strips them, as it does.

    Returns:
        The schema, or None when the format is not a ``json_schema`` with a schema object (a
        ``json_object`` request, say: any JSON object fits it).
    """
    from evolve.llm._providers import strip_length_limits

    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    schema = (response_format.get("json_schema") or {}).get("schema")
    if not isinstance(schema, dict):
        return None
    return schema if schema_limits else strip_length_limits(schema)


def schema_violation(value: Any, schema: dict[str, Any]) -> str | None:
    """Why ``value`` (parsed JSON) does not fit ``schema``, or None when it does.

    Returns:
        The first violation in words (``"$.score: 7 is greater than the maximum of 5"``), or
        ``"the schema itself is invalid: ..."`` - a schema that cannot be checked is never
        taken as fitting.
    """
    from jsonschema import SchemaError
    from jsonschema.exceptions import best_match

    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except SchemaError as exc:
        return f"the schema itself is invalid: {exc.message}"
    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    return f"{error.json_path}: {error.message}"[:300]
