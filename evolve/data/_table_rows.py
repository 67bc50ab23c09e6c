"""Rows of a table from nested JSON records: the paths of ``import_table(rows=..., where=...)``.

A *path* is a dotted list of steps into one JSON record, read from its top:

* a key (``question``, ``metadata.field``);
* ``*`` - every item of a list, or every value of an object;
* ``@key`` - only as the last step, right after a ``*``: the object key (or, for a list, the
  item's position counted from 1) that the ``*`` stepped through.

The rows path (``--rows answers.*.claims.*``) turns each record into one row per element it
reaches; a record where it reaches nothing (a key missing, ``null``, an empty list or object)
yields no row and is counted. A column path is read from the top of the record, and each of
its ``*`` stands for the element its row came from, so the path up to a ``*`` must repeat the
rows path (``answers.*.annotator_id``, ``answers.*.@key``). A key holding a dot cannot be
addressed. Steps are matched exactly (case and spaces count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evolve.errors import DataError, Problems

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["KEY_STEP", "WILDCARD", "NestedRows", "RecordPath", "nested_rows", "parse_record_path", "parse_where"]

WILDCARD = "*"
KEY_STEP = "@key"


@dataclass(frozen=True)
class RecordPath:
    """A parsed path: ``steps`` (keys and ``*``), and whether it ends in ``@key``."""

    text: str
    steps: tuple[str, ...]
    key_of: bool = False


def parse_record_path(text: str, *, option: str, allow_key: bool = True) -> RecordPath:
    """Parse a dotted path (``answers.*.claims.*``, ``answers.*.@key``).

    Args:
        text: The path.
        option: How to name it in an error, e.g. ``"--rows"``.
        allow_key: Whether a final ``@key`` step is allowed (not in the rows path).

    Raises:
        DataError: An empty step, or ``@key`` not directly after a final ``*``.
    """
    raw = text.strip()
    steps = tuple(raw.split("."))
    if not raw or any(not s for s in steps):
        raise DataError(f"{option} {text!r}: a path is keys and '*' joined by dots, none empty, e.g. "
                        "'answers.*.claims.*'.")
    key_of = steps[-1] == KEY_STEP
    body = steps[:-1] if key_of else steps
    if KEY_STEP in body or (key_of and (not allow_key or not body or body[-1] != WILDCARD)):
        where = "" if allow_key else " (not in --rows)"
        raise DataError(f"{option} {text!r}: '{KEY_STEP}' may only end a path, right after a '*'{where}, e.g. "
                        "'answers.*.@key' names the key each answer is stored under.")
    return RecordPath(raw, body, key_of)


def parse_where(items: Sequence[str]) -> list[tuple[str, str]]:
    """Parse ``COLUMN=VALUE`` strings (the CLI's ``--where``) into pairs; the value may be empty.

    Raises:
        DataError: A string without ``=`` or with an empty column.
    """
    out = []
    for item in items:
        column, sep, value = item.partition("=")
        if not sep or not column.strip():
            raise DataError(f"--where {item!r}: expected COLUMN=VALUE, e.g. --where 'metadata.field=Healthcare / Medicine'.")
        out.append((column.strip(), value.strip()))
    return out


def _follows(rows: RecordPath, column: RecordPath) -> bool:
    """True when every ``*`` of the column path is one of the rows path's (same steps up to it)."""
    stars = [i for i, step in enumerate(column.steps) if step == WILDCARD]
    return not stars or column.steps[: stars[-1] + 1] == rows.steps[: stars[-1] + 1]


def _kind(value: Any) -> str:
    return {dict: "JSON object", list: "list", str: "text", bool: "true/false"}.get(type(value), type(value).__name__)


def _join(label: str, key: str | int) -> str:
    return f"{label}[{key}]" if isinstance(key, int) else f"{label}.{key}" if label else key


@dataclass(frozen=True)
class _Element:
    keys: tuple[str | int, ...]  # per '*' of the rows path: the object key, or the list position from 1
    label: str  # the concrete path, e.g. answers.gpt4.claims[3]


def _expand(record: Mapping[str, Any], rows: RecordPath, where: str, problems: Problems,
            order: tuple) -> list[_Element]:
    """Every element the rows path reaches in one record (a step into a wrong type is a problem)."""
    out: list[_Element] = []

    def walk(value: Any, i: int, keys: tuple[str | int, ...], label: str) -> None:
        if i == len(rows.steps):
            out.append(_Element(keys, label))
            return
        if value is None:
            return
        step, at = rows.steps[i], label or "the record"
        if step == WILDCARD and isinstance(value, (dict, list)):
            items = value.items() if isinstance(value, dict) else enumerate(value, start=1)
            for key, item in items:
                walk(item, i + 1, (*keys, key), _join(label, key))
        elif step != WILDCARD and isinstance(value, dict):
            if step in value:
                walk(value[step], i + 1, keys, _join(label, step))
        else:
            wanted = "a list or object to step into with '*'" if step == WILDCARD else f"an object with key {step!r}"
            fix = "Use '*' to step into a list's items." if isinstance(value, list) else "Correct --rows."
            problems.add(f"{where}, {at}", f"--rows {rows.text!r} expects {wanted} here, but it holds a {_kind(value)}",
                         fix, order=order)

    walk(record, 0, (), "")
    return out


def _resolve(record: Mapping[str, Any], path: RecordPath, keys: tuple[str | int, ...]) -> tuple[bool, Any]:
    """``(found, value)`` of a column path in the row whose element has ``keys``."""
    value: Any = record
    star = 0
    for step in path.steps:
        if step == WILDCARD:  # the container the row's element came from (the path repeats --rows)
            key = keys[star]
            star += 1
            value = value[key - 1] if isinstance(key, int) else value[key]
        elif isinstance(value, dict) and step in value:
            value = value[step]
        else:
            return False, None
    return (True, str(keys[star - 1])) if path.key_of else (True, value)


@dataclass(frozen=True)
class NestedRows:
    """The rows reached in nested records, as a flat table.

    Attributes:
        frame: One row per element reached; one column per path found in at least one row.
        locations: Per row, e.g. ``"a.jsonl, line 3, answers.gpt4.claims[2]"``.
        n_records: Records read.
        n_records_without_rows: Records where the rows path reached nothing.
    """

    frame: pd.DataFrame
    locations: list[str]
    n_records: int
    n_records_without_rows: int


def nested_rows(
    records: Sequence[Mapping[str, Any]], locations: Sequence[str], rows: str, columns: Sequence[str],
    candidates: Sequence[str], problems: Problems,
) -> NestedRows:
    """Turn records into rows at the rows path, with the given column paths as columns.

    Args:
        records: The JSON records (one per line of the files).
        locations: Per record, e.g. ``"a.jsonl, line 3"``.
        rows: The rows path.
        columns: Paths that must be found in at least one row (mapped columns, ``--where`` columns).
        candidates: Paths read when present (a field's default column names); absent ones are left out.
        problems: Where every problem is recorded (a wrong type on the way, a cell holding an
            object or a list, a column path found in no row, a ``*`` that is not one of the rows path's).

    Raises:
        DataError: A malformed path.
    """
    import pandas as pd

    rows_path = parse_record_path(rows, option="--rows", allow_key=False)
    paths = {text: parse_record_path(text, option=f"column {text!r}") for text in dict.fromkeys([*columns, *candidates])}
    for text, path in paths.items():
        if not _follows(rows_path, path):
            raise DataError(f"column {text!r}: a '*' in a column stands for the element its row came from, so the "
                            f"path up to each '*' must repeat --rows {rows!r} (e.g. {rows_path.text}.NAME).")
    cells: list[dict[str, Any]] = []
    where: list[str] = []
    found: set[str] = set()
    n_without = 0
    for n, (record, loc) in enumerate(zip(records, locations, strict=True)):
        elements = _expand(record, rows_path, loc, problems, (n,))
        n_without += not elements
        for element in elements:
            row_at = f"{loc}, {element.label}" if element.label else loc
            row: dict[str, Any] = {}
            for text, path in paths.items():
                hit, value = _resolve(record, path, element.keys)
                found.update([text] if hit else [])
                if isinstance(value, (dict, list)):
                    problems.add(f"{row_at}, column {text!r}", f"holds a {_kind(value)}, not a value",
                                 "Point the path at a text or number inside it (keys joined by dots).", order=(n,))
                    value = None
                row[text] = value
            cells.append(row)
            where.append(row_at)
    for text in columns:
        if text not in found:
            problems.add(f"column {text!r}", f"the path is found in no row of --rows {rows!r} ({len(cells)} rows from "
                         f"{len(records)} records)", "Check the spelling of each key (case counts); a column path starts "
                         "at the top of the record.")
    present = [t for t in paths if t in found]
    frame = pd.DataFrame([{t: r[t] for t in present} for r in cells], columns=present)
    return NestedRows(frame, where, len(records), n_without)
