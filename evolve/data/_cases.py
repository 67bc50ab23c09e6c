"""Loader for NEJM-MedQA-style case files: one clinical case per row, keyed by its DOI.

A case file is what a consilium is run on and what the physicians' workbooks refer to: one
row per case with its DOI, title, case text and reference answer. It is read with pandas from
``.jsonl``, ``.csv`` or ``.parquet`` and turned into :class:`~evolve.data.Case` records in source
order. Which column holds which field is given by a :class:`CaseColumns` mapping (defaults
below; the CLI sets it with ``--column field=column``).

The reference answer is part of the :class:`~evolve.data.Case` (the judge may see it for the
conclusion criterion), but never part of what a *generating* model sees: use
:func:`generation_input` to build that input (consilium paper, pre-consilium opinions).
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from evolve.data._models import _ID_PATTERN, Case
from evolve.data._pack import MAX_REPORTED_PROBLEMS
from evolve.data._util import TEXT_PROBLEM_FIX, cell_text, is_missing, text_problem
from evolve.errors import DataError, Problems, path_problem, require_extra
from evolve.records import Record

__all__ = [
    "CASE_FILE_SUFFIXES",
    "CaseColumns",
    "case_file",
    "generation_input",
    "load_cases",
    "parse_column_overrides",
    "read_case_rows",
]

CASE_FILE_SUFFIXES: tuple[str, ...] = (".jsonl", ".csv", ".parquet")
"""File name endings :func:`load_cases` can read."""

_ID_RE = re.compile(_ID_PATTERN)


class CaseColumns(Record):
    """Which column of a case file holds which :class:`~evolve.data.Case` field.

    Column names are matched exactly (case-sensitive). A mapped column that is absent from the
    file is an error; map ``title`` or ``answer`` to ``None`` when the file has no such column.

    Attributes:
        doi: Column with the case's DOI; it becomes ``case_id`` unless ``case_id`` is set.
            Not read when ``case_id`` is set.
        title: Column with the case title (``None``: no title column, titles stay empty).
        text: Column with the case text (must be non-empty in every row).
        answer: Column with the reference answer / diagnosis (``None``: no such column); an
            empty cell gives ``reference_answer=None``.
        case_id: Column with a case id to use instead of the DOI (``None``: the file's
            ``case_id`` column if it has one, else the DOI - the same rule as
            ``evolve splits make --cases``, which then keeps each DOI's cases on one side).
    """

    doi: str = Field(default="doi", min_length=1)
    title: str | None = "title"
    text: str = Field(default="case_text", min_length=1)
    answer: str | None = "answer"
    case_id: str | None = None

    @property
    def id_field(self) -> str:
        """The mapping field whose column gives the case id (``case_id`` or ``doi``)."""
        return "case_id" if self.case_id is not None else "doi"

    @property
    def id_column(self) -> str:
        """The column that gives the case id."""
        return self.case_id if self.case_id is not None else self.doi

    def required(self) -> dict[str, str]:
        """``field -> column`` for every column the loader reads, in a fixed order."""
        out = {self.id_field: self.id_column}
        if self.title is not None:
            out["title"] = self.title
        out["text"] = self.text
        if self.answer is not None:
            out["answer"] = self.answer
        return out


def parse_column_overrides(items: Sequence[str], base: CaseColumns | None = None) -> CaseColumns:
    """Build a :class:`CaseColumns` from ``field=column`` strings (the CLI's ``--column``).

    An empty column (``title=``) maps an optional field (``title``, ``answer``, ``case_id``) to
    ``None``.

    Args:
        items: Strings such as ``"text=case_text"`` or ``"case_id=id"``.
        base: Mapping to start from (default: :class:`CaseColumns` defaults).

    Raises:
        DataError: A string without ``=``, an unknown field, or an empty column for a required
            field (``doi``, ``text``).
    """
    base = base or CaseColumns()
    fields = list(CaseColumns.model_fields)
    update: dict[str, str | None] = {}
    for item in items:
        name, sep, column = item.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or name not in fields:
            raise DataError(
                f"--column {item!r}: expected FIELD=COLUMN with FIELD one of {fields}, "
                "e.g. --column text=case_text."
            )
        if not column and name in ("doi", "text"):
            raise DataError(f"--column {item!r}: field {name!r} needs a column name, e.g. --column {name}=my_column.")
        update[name] = column or None
    return base.model_copy(update=update)


def read_jsonl_rows(path: Path, issues: Problems, text: str | None = None) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    """Rows of a JSONL file as ``(location, record)`` pairs and the keys seen (first-seen order).

    Args:
        path: The file; read as UTF-8 unless ``text`` is given (its name locates problems).
        issues: Collects a problem for each line that is not a JSON object.
        text: The file's decoded text, when the caller has already read it.
    """
    rows: list[tuple[str, dict[str, Any]]] = []
    columns: dict[str, None] = {}
    text = path.read_text(encoding="utf-8-sig") if text is None else text
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            issues.add(
                f"{path.name}, line {lineno}", f"malformed JSON at column {exc.colno} ({exc.msg})",
                "Write exactly one JSON object per line.",
            )
            continue
        if not isinstance(raw, dict):
            issues.add(
                f"{path.name}, line {lineno}", f"expected a JSON object, got {type(raw).__name__}",
                "Write exactly one JSON object per line.",
            )
            continue
        columns.update(dict.fromkeys(raw))
        rows.append((f"line {lineno}", raw))
    return list(columns), rows


def _read_frame(path: Path, data: bytes | None) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    """Rows of a CSV (header = row 1) or parquet file (first row = row 1) as ``(location, record)``."""
    import pandas as pd  # here, not at import: `evolve ratings check` starts 1 s faster without it

    source = path if data is None else io.BytesIO(data)
    if path.suffix.lower() == ".csv":
        frame = pd.read_csv(source, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        first = 2
    else:
        require_extra("parquet", f"{path}: reading a Parquet file")
        frame = pd.read_parquet(source)
        first = 1
    columns = [str(c) for c in frame.columns]
    frame.columns = columns
    return columns, [(f"row {i + first}", {str(k): v for k, v in rec.items()}) for i, rec in enumerate(frame.to_dict("records"))]


def read_case_rows(path: Path, issues: Problems, *, data: bytes | None = None) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    """The columns and rows of a ``.jsonl``, ``.csv`` or ``.parquet`` case file.

    The one parser of case files: :func:`load_cases` turns its rows into cases,
    :func:`evolve.splits.read_case_ids` into the ids a frame is chosen from. Rows are located as
    a person finds them: ``line N`` (JSONL, blank lines skipped), ``row N`` (CSV, the header is
    row 1; parquet, from 1). Cells are kept as stored (CSV cells are always text).

    Args:
        path: The case file (its suffix picks the format).
        issues: Collects a problem for each JSONL line that is not a JSON object; raised by the caller.
        data: The file's bytes, when the caller has already read them (e.g. to hash them).

    Returns:
        The column names (JSONL: every key, in first-seen order) and ``(location, record)`` pairs.

    Raises:
        DataError: Of the class ``issues`` raises, naming the file, when it cannot be read or
            decoded, or when reading parquet without the ``parquet`` extra.
    """
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            text = None if data is None else data.decode("utf-8-sig")
            return read_jsonl_rows(path, issues, text)
        return _read_frame(path, data)
    except (UnicodeDecodeError, ValueError, OSError, ImportError) as exc:
        raise issues.error(
            f"{path}: cannot read the file ({type(exc).__name__}: {exc}). Check that it is a valid "
            f"{suffix[1:]} file (UTF-8 text for .jsonl/.csv)."
        ) from exc


def _value_kind(value: Any) -> str:
    """How a non-text cell reads to a user: ``a number (12345)``, ``true/false``, ``a list`` ..."""
    if isinstance(value, bool):
        return f"a true/false value ({str(value).lower()})"
    if isinstance(value, (int, float)) or type(value).__module__ == "numpy":
        return f"a number ({value})"
    return f"a {type(value).__name__}"


def _row_values_are_text(where: str, row: dict[str, Any], mapping: CaseColumns, issues: Problems) -> bool:
    """Check that every mapped cell of a row is text (or empty) and free of control characters.

    A JSON number or a parquet numeric column is refused, not turned into text: a case text
    ``12345`` is nearly always a mapping mistake, and a consilium run on it is paid for nothing.
    CSV cells are always text. Returns ``False`` (with a problem recorded) when a cell is refused.
    """
    ok = True
    for name, column in mapping.required().items():
        value = row.get(column)
        if is_missing(value):
            continue
        at = f"{where}, column {column!r}"
        if not isinstance(value, str):
            issues.add(
                at, f"field {name!r} holds {_value_kind(value)}, not text",
                f"Store it as text (in quotes in JSONL, a string column in parquet), or map {name!r} to "
                f"the right column with {_map(name)}.",
            )
            ok = False
        elif (problem := text_problem(value)) is not None:
            issues.add(at, f"field {name!r} {problem}", TEXT_PROBLEM_FIX)
            ok = False
    return ok


def case_file(path: Path | str) -> Path:
    """The case file a path names: a folder (a rating pack, a bench run) means its
    ``cases.jsonl``; anything else is returned as given."""
    path = Path(path)
    return path / "cases.jsonl" if path.is_dir() else path


def _map(field: str) -> str:
    """How to map ``field`` to a column, on the command line and in Python."""
    return f"--column {field}=<column> (Python: mapping=CaseColumns({field}='<column>'))"


def load_cases(path: Path | str, *, mapping: CaseColumns | None = None) -> list[Case]:
    """Read a case file (``.jsonl``, ``.csv`` or ``.parquet``) into cases, in source order.

    Files in evolve's own case format - a rating pack's or a bench run's ``cases.jsonl``
    (fields ``case_id``, ``title``, ``text``, ``reference_answer``) - are read as such when no
    mapping is given and the file has ``case_id`` and ``text`` but no ``case_text``; a folder
    means its ``cases.jsonl`` (``ratings/savage``, ``archives/<bench run>``).

    Each row becomes ``Case(case_id=<DOI or mapped id>, title, text,
    reference_answer=<answer or None>, source="<file name> <row N | line N>")``. Rows are
    numbered as a human finds them: JSONL by line (1-based), CSV by spreadsheet row (the
    header is row 1), parquet by record (1-based). Blank JSONL lines are skipped. Leading and
    trailing whitespace of the id is removed; text, title and answer are kept as written.

    Args:
        path: The case file, or a folder holding ``cases.jsonl``.
        mapping: Column mapping (default: ``doi``, ``title``, ``case_text``, ``answer``; the
            DOI is the case id).

    Returns:
        One :class:`~evolve.data.Case` per row, in file order.

    Raises:
        DataError: The file is missing, a directory without ``cases.jsonl``, a symbolic-link
            loop or otherwise unreadable (:func:`evolve.errors.path_problem`), or of an unknown type; a mapped column is absent
            (the message lists the file's columns and the ``--column`` fix); a row has an
            empty id or text; a mapped cell is not text (a JSON number, ``true``, a list - it
            is never converted) or holds a control or bidirectional-override character
            (:func:`~evolve.data.text_problem`); an id does not match the case-id pattern
            ``^[A-Za-z0-9][A-Za-z0-9._:/-]*$``; two rows share an id (both rows are named).
            All row problems are collected into one error.
    """
    given, path = Path(path), case_file(path)
    own_format = mapping is None
    mapping = mapping or CaseColumns()
    if path != given and not os.path.lexists(path):  # a folder without the file (a loop is named below)
        raise DataError(f"{given}: a folder without cases.jsonl. Pass the case file inside it (.jsonl, .csv or "
                        ".parquet), or a rating-pack / bench-run folder holding cases.jsonl.")
    if (problem := path_problem(path)) is not None:
        what = "case file not found" if problem == "does not exist" else f"the case file {problem}"
        raise DataError(f"{path}: {what}. Pass a .jsonl, .csv or .parquet file with one case per row "
                        "(or a rating-pack / bench-run folder holding cases.jsonl).")
    suffix = path.suffix.lower()
    if suffix not in CASE_FILE_SUFFIXES:
        raise DataError(
            f"{path}: unsupported case file type {suffix or '(none)'!r}. Save the cases as one of "
            f"{list(CASE_FILE_SUFFIXES)}."
        )
    issues = Problems(f"cannot load cases from {path}", DataError, MAX_REPORTED_PROBLEMS)
    columns, rows = read_case_rows(path, issues)
    if not columns and not rows:
        issues.raise_if_any()
        raise DataError(f"cannot load cases from {path}: the file is empty (no header, no case). Give a case file with "
                        "one case per row or JSON line.")

    if own_format and {"case_id", "text"} <= set(columns) and "case_text" not in columns:
        mapping = CaseColumns(case_id="case_id", text="text", title="title" if "title" in columns else None,
                              answer="reference_answer" if "reference_answer" in columns else None)
    if mapping.case_id is None and "case_id" in columns:
        mapping = mapping.model_copy(update={"case_id": "case_id"})
    missing = {name: col for name, col in mapping.required().items() if col not in columns}
    # a DOI column mapped on purpose is checked even when case_id gives the ids; the default name
    # is not (a mapping stored with a run and read back has every field set)
    if "doi" in mapping.model_fields_set and mapping.doi not in columns and (
            mapping.case_id is None or mapping.doi != CaseColumns.model_fields["doi"].default):
        missing.setdefault("doi", mapping.doi)
    for name, col in missing.items():
        optional = f" (or --column {name}= if the file has none)" if name in ("title", "answer") else ""
        issues.add(
            f"{path.name}, column {col!r}",
            f"column {col!r} for field {name!r} is missing; the file has columns {columns}",
            f"Rename the column, or map the field with {_map(name)}{optional}.",
        )
    issues.raise_if_any()

    cases: list[Case] = []
    first_seen: dict[str, str] = {}
    for loc, row in rows:
        where = f"{path.name}, {loc}"
        if not _row_values_are_text(where, row, mapping, issues):
            continue
        case_id = cell_text(row.get(mapping.id_column))
        text = row.get(mapping.text)
        ok = True
        if not case_id:
            issues.add(
                f"{where}, column {mapping.id_column!r}", "empty case id",
                f"Fill in the {mapping.id_field} or remove the row.",
            )
            ok = False
        elif not _ID_RE.match(case_id):
            issues.add(
                f"{where}, column {mapping.id_column!r}",
                f"case id {case_id!r} is not a valid id (it must start with an ASCII letter or digit and contain only "
                "ASCII letters, digits and . _ : / -)",
                f"Correct the id, or take ids from another column with {_map('case_id')}.",
            )
            ok = False
        elif case_id in first_seen:
            issues.add(
                f"{where}, column {mapping.id_column!r}",
                f"duplicate case id {case_id!r} (first in {first_seen[case_id]})",
                "Give every case its own id or remove the repeated row.",
            )
            ok = False
        else:
            first_seen[case_id] = loc
        if is_missing(text):
            issues.add(f"{where}, column {mapping.text!r}", "empty case text", "Fill in the case text or remove the row.")
            ok = False
        if not ok:
            continue
        answer = row.get(mapping.answer) if mapping.answer is not None else None
        title = row.get(mapping.title) if mapping.title is not None else None
        try:
            cases.append(
                Case(
                    case_id=case_id,
                    title="" if is_missing(title) else str(title).strip(),
                    text=str(text),
                    reference_answer=None if is_missing(answer) else str(answer),
                    source=f"{path.name} {loc}",
                )
            )
        except ValidationError as exc:  # pragma: no cover - fields were checked above
            for err in exc.errors():
                issues.add(where, f"field {'.'.join(map(str, err['loc']))}: {err['msg']}", "Correct the value.")
    issues.raise_if_any()
    if not cases:
        raise DataError(f"{path}: the file holds no cases. Add one case per row.")
    return cases


def generation_input(case: Case) -> dict[str, str]:
    """What a *generating* model may see of a case: its id (the DOI), title and text.

    The reference answer is deliberately left out: the consilium roles work from the same case
    input without the answer (consilium paper, pre-consilium opinions), so no prompt built from this mapping can leak it.

    Args:
        case: The case.

    Returns:
        ``{"case_id": ..., "title": ..., "text": ...}`` (exactly these three keys).
    """
    return {"case_id": case.case_id, "title": case.title, "text": case.text}

