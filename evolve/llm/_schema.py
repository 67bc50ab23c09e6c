"""Whether a reply fits the JSON schema its request sent (the response cache's rule).

A structured reply is stored only when it is what was asked for: a JSON object valid against
the schema of ``response_format`` *as sent* (without ``maxLength``/``minLength`` when the
provider was told to leave them out). Anything else - a score outside the scale, a string for
a boolean, an extra key - still reaches the caller, who records its own failure, but is never
replayed by a resumed run.

The toolkit's readers keep the same rule for lengths (:func:`validate_reply`): a reply is
read against exactly the limits that were sent. With ``maxLength``/``minLength`` sent, a
rationale longer than its limit is a failure (re-asked where the stage re-asks), never
clipped; with them left out the model was never told, so any length is read whole. Either way
what a reader accepts fits the schema as sent, and so is cached.

Validation is the ``jsonschema`` package (JSON Schema 2020-12, ``$defs``/``$ref`` included),
with JSON types read strictly: an integer is a JSON integer (``3``, not ``3.0`` nor ``true``),
a number is finite (no ``NaN``/``Infinity``), as the toolkit's readers take them.
"""

from __future__ import annotations

import json
import math
import types
import typing
from copy import copy
from functools import lru_cache
from typing import Any, TypeVar

from annotated_types import MaxLen, MinLen
from pydantic import BaseModel, create_model

__all__ = ["limits_sent", "schema_violation", "sent_schema", "validate_reply"]

M = TypeVar("M", bound=BaseModel)


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


def limits_sent(client: Any) -> bool:
    """Whether ``client``'s provider sends ``maxLength``/``minLength`` (its ``schema_limits``).

    Args:
        client: An :class:`~evolve.llm.Client` (or anything with a ``provider``); a provider
            without the setting sends the schema whole (True).
    """
    return getattr(getattr(client, "provider", None), "schema_limits", True) is not False


def validate_reply(data: Any, model: type[M], *, schema_limits: bool = True) -> M:
    """Read a parsed structured reply as ``model``, enforcing exactly the length limits sent.

    ``model`` is the pydantic model whose JSON schema was sent. With ``schema_limits`` its
    string ``max_length``/``min_length`` apply: a longer rationale is a validation error,
    never clipped (the house rule: a reply is validated, never coerced). Without them the
    schema went out with no ``maxLength``/``minLength`` (:func:`sent_schema`), so strings are
    read at any length; every other constraint (types, choices, list sizes, extra keys) holds.

    Args:
        data: The parsed JSON object.
        model: The reply model (nested models and lists of them included).
        schema_limits: Whether the length limits were sent (:func:`limits_sent`).

    Returns:
        An instance of ``model`` (without limits: of a subclass of it with the same fields).

    Raises:
        pydantic.ValidationError: The reply does not fit.
    """
    reader = model if schema_limits else _without_string_limits(model)
    return reader.model_validate(data)  # type: ignore[return-value]


def _is_str(annotation: Any) -> bool:
    return annotation is str or str in typing.get_args(annotation)


@lru_cache(maxsize=128)
def _without_string_limits(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` without the length bounds of its string fields, nested models included (a
    subclass, so ``isinstance`` and the model's own methods still hold); list sizes are kept
    (``strip_length_limits`` keeps ``minItems``/``maxItems`` too)."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation = _unlimited(info.annotation)
        kept = [m for m in info.metadata if not (_is_str(info.annotation) and isinstance(m, MaxLen | MinLen))]
        if annotation is info.annotation and len(kept) == len(info.metadata):
            continue
        field = copy(info)
        field.annotation, field.metadata = annotation, kept
        fields[name] = (annotation, field)
    if not fields:
        return model
    return create_model(model.__name__, __base__=model, __module__=model.__module__, **fields)


def _unlimited(annotation: Any) -> Any:
    """``annotation`` with every model in it replaced by its unlimited twin (``list[RoleReply]``,
    ``Inner | None``, ...); anything else unchanged (the same object)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _without_string_limits(annotation)
    args = typing.get_args(annotation)
    if not args:
        return annotation
    new = tuple(_unlimited(a) for a in args)
    if all(a is b for a, b in zip(new, args, strict=True)):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        return typing.Union[new]  # noqa: UP007 - built at run time
    return origin[new if len(new) > 1 else new[0]]
