"""Import any table of ratings (CSV, JSONL, Parquet, XLSX) into a rating pack.

Two layouts are read:

* **long** - one rating per row: columns for the case, the target, the rater, the criterion
  and the score (plus optional texts, comment, component, model, condition);
* **wide** - one row per (target, rater) with one score column per rubric criterion (by
  default every column named like a criterion id of the rubric; or mapped with
  ``criterion:<criterion_id>=COLUMN``).

Which column holds which field is a mapping ``field -> column`` (:data:`TABLE_FIELDS`); a field
that is not mapped is read from a column named like the field (or like the pack format's own
name for it, e.g. ``case_id``), if the table has one. A score cell holds an integer, a label
listed in a score map (``{criterion: {label: score}}``, ``"*"`` for every criterion) or a
*not evaluable* value. Every problem is collected - named by row (a spreadsheet's: the header
is row 1) and column - and raised together as one :class:`~evolve.errors.PackError`; nothing
is returned, so nothing is written, unless the whole table is valid.

:func:`import_table` also reads several files of one format as one table, turns nested JSON
records into rows (``rows="answers.*.claims.*"``; column names are then dotted paths into the
record, see :mod:`evolve.data._table_rows`) and keeps only the rows matching ``where``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evolve.data._cases import _value_kind, read_jsonl_rows
from evolve.data._models import _ID_PATTERN, Case, PackManifest, Rating, RubricRef, Target
from evolve.data._pack import MAX_REPORTED_PROBLEMS, RatingPack, validate_pack
from evolve.data._table_rows import nested_rows, parse_where
from evolve.data._util import cell_text, is_missing, sha256_file, unreadable_table
from evolve.errors import TEXT_PROBLEM_FIX, DataError, PackError, Problems, path_problem, require_extra, text_problem
from evolve.markdown import count_noun
from evolve.records import Record
from evolve.rubric import Criterion, Rubric, RubricBundle, load_rubric

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "TABLE_FIELDS",
    "TABLE_IMPORTER",
    "TABLE_SUFFIXES",
    "TableCounts",
    "TableImport",
    "import_frame",
    "import_table",
    "parse_score_map",
    "parse_table_columns",
    "parse_where",
    "read_table",
]

TABLE_IMPORTER = "evolve.data.import_table/1"
TABLE_SUFFIXES: tuple[str, ...] = (".csv", ".jsonl", ".parquet", ".xlsx")
"""File name endings :func:`import_table` reads."""

TABLE_FIELDS: dict[str, str] = {
    "case": "case id (default column: case or case_id; absent: derived from the case text)",
    "case_text": "case text the judge sees, e.g. the question (required)",
    "case_title": "short case title (default column: case_title or title)",
    "target": "target id (default column: target or target_id; absent: derived from case, component, "
              "target text and statement)",
    "target_text": "the rated text, e.g. an answer (required)",
    "statement": "a statement the text is judged against (K-QA: a gold statement; ExpertQA: one claim)",
    "reference": "reference answer of the case (default column: reference or reference_answer)",
    "rater": "rater id (default column: rater or rater_id; required)",
    "criterion": "criterion id of the rubric (long layout; required there)",
    "score": "integer score, a mapped label or a not-evaluable value (long layout; required there)",
    "comment": "the rater's comment (wide layout: one per row, or comment:<criterion>=COLUMN)",
    "component": "rubric component of the target (optional when the rubric has one component)",
    "model": "the model that wrote the target",
    "condition": "the producing condition of the target",
}
"""Every column-mapping field with a one-line description (what ``--column FIELD=COLUMN`` takes)."""

_DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "case": ("case", "case_id"),
    "case_title": ("case_title", "title"),
    "target": ("target", "target_id"),
    "reference": ("reference", "reference_answer"),
    "rater": ("rater", "rater_id"),
}
_REQUIRED = ("case_text", "target_text", "rater")
_LONG_ONLY = ("criterion", "score")
_ID_RE = re.compile(_ID_PATTERN)
_INT_RE = re.compile(r"^[+-]?\d+$")
_ANY = "*"


class TableCounts(Record):
    """What a table import read, and where every rating cell went.

    ``n_cells == n_scored + n_not_evaluable + n_skipped_empty`` always holds: a cell is one
    row of a long table, or one criterion column of one row of a wide table.

    With :func:`import_table`, ``n_rows_read == n_rows_blank + n_rows_not_selected + n_rows``.

    Attributes:
        n_rows: Data rows imported (blank rows and rows not matching ``where`` are not counted).
        n_cells: Rating cells read.
        n_scored: Cells that became a numeric rating.
        n_not_evaluable: Cells that became a *not evaluable* rating.
        n_skipped_empty: Empty score cells skipped (only with ``skip_empty``).
        skipped_by_criterion: Skipped empty cells per criterion (empty criterion cells of a
            long table count under ``""``).
        n_cases: Cases in the pack.
        n_targets: Targets in the pack.
        n_files: Files read (:func:`import_table`).
        n_records: JSON records read when rows come from nested records (``rows=``), else 0.
        n_records_without_rows: Of those, records where the rows path reached nothing.
        n_rows_blank: Rows with every cell empty, skipped.
        n_rows_not_selected: Rows not matching ``where``, skipped.
        where: The ``COLUMN=VALUE`` conditions rows had to match.
        unused_not_evaluable: ``not_evaluable`` values that matched no cell (a sign that the
            table writes the mark otherwise, or that a reader turned it into an empty cell).
    """

    n_rows: int
    n_cells: int
    n_scored: int
    n_not_evaluable: int
    n_skipped_empty: int
    skipped_by_criterion: dict[str, int]
    n_cases: int
    n_targets: int
    n_files: int = 1
    n_records: int = 0
    n_records_without_rows: int = 0
    n_rows_blank: int = 0
    n_rows_not_selected: int = 0
    where: tuple[str, ...] = ()
    unused_not_evaluable: tuple[str, ...] = ()

    @property
    def n_rows_read(self) -> int:
        """Rows read: blank + not matching ``where`` + imported."""
        return self.n_rows_blank + self.n_rows_not_selected + self.n_rows

    def describe(self) -> str:
        """One sentence with every count, e.g. for a pack's description."""
        skipped = (f"; {count_noun(self.n_skipped_empty, 'empty score cell')} skipped ("
                   + ", ".join(f"{k or 'no criterion'}: {v}" for k, v in self.skipped_by_criterion.items()) + ")"
                   if self.n_skipped_empty else "")
        rows = f"{count_noun(self.n_rows, 'row')}, "
        if self.n_records or self.n_rows_blank or self.where:
            rows = (f"{count_noun(self.n_rows_read, 'row')} read"
                    + (f", {self.n_rows_blank} blank" if self.n_rows_blank else "")
                    + (f", {self.n_rows_not_selected} not matching --where {' '.join(map(repr, self.where))}" if self.where else "")
                    + f", {self.n_rows} imported; ")
        records = (f"{count_noun(self.n_records, 'record')} ({self.n_records_without_rows} without rows), "
                   if self.n_records else "")
        files = f"{self.n_files} files, " if self.n_files > 1 else ""
        unused = (f"; not-evaluable {'value' if len(self.unused_not_evaluable) == 1 else 'values'} "
                  f"{', '.join(map(repr, self.unused_not_evaluable))} matched no cell" if self.unused_not_evaluable else "")
        return (f"{files}{records}{rows}{count_noun(self.n_cells, 'rating cell')}: {count_noun(self.n_scored, 'score')}, "
                f"{self.n_not_evaluable} not evaluable{skipped}; {count_noun(self.n_cases, 'case')}, "
                f"{count_noun(self.n_targets, 'target')}{unused}")


@dataclass(frozen=True)
class TableImport:
    """A validated pack made from a table, and the counts of what was read.

    Attributes:
        pack: The rating pack (in memory; ``path`` is ``None``).
        counts: Rows and cells read, and where each went.
    """

    pack: RatingPack
    counts: TableCounts


def _map(field: str) -> str:
    """How to map ``field`` to a column, on the command line and in Python."""
    return f"--column {field}=COLUMN (Python: columns={{{field!r}: 'COLUMN'}})"


# --------------------------------------------------------------------------------------------
# Option parsing (the CLI's --column and --score-map)
# --------------------------------------------------------------------------------------------


def parse_table_columns(items: Sequence[str]) -> dict[str, str]:
    """Parse ``FIELD=COLUMN`` strings into a mapping (also ``criterion:<id>=COLUMN`` and
    ``comment:<id>=COLUMN`` for a wide table).

    Raises:
        DataError: A string without ``=``, an empty column, an unknown field, or a field given twice.
    """
    out: dict[str, str] = {}
    for item in items:
        name, sep, column = item.partition("=")
        name, column = name.strip(), column.strip()
        base = name.split(":", 1)[0]
        if not sep or not column or base not in TABLE_FIELDS or (":" in name and base not in ("criterion", "comment")):
            raise DataError(
                f"--column {item!r}: expected FIELD=COLUMN with FIELD one of {list(TABLE_FIELDS)} (or "
                "criterion:<criterion_id>=COLUMN / comment:<criterion_id>=COLUMN for a wide table), "
                "e.g. --column case_text=question."
            )
        if name in out:
            raise DataError(f"--column {item!r}: field {name!r} is mapped twice; keep one --column {name}=...")
        out[name] = column
    return out


def parse_score_map(items: Sequence[str]) -> dict[str, dict[str, int]]:
    """Parse ``CRITERION:LABEL=N`` strings into ``{criterion: {label: N}}`` (``*:LABEL=N``: every criterion).

    The label is everything between the first ``:`` and the last ``=``, so labels may hold spaces.

    Raises:
        DataError: A malformed string, a non-integer N, or one label mapped twice.
    """
    out: dict[str, dict[str, int]] = {}
    for item in items:
        criterion, sep, rest = item.partition(":")
        label, sep2, number = rest.rpartition("=")
        criterion, label, number = criterion.strip(), label.strip(), number.strip()
        if not sep or not sep2 or not criterion or not label or not _INT_RE.match(number):
            raise DataError(
                f"--score-map {item!r}: expected CRITERION:LABEL=N with an integer N, e.g. "
                "--score-map 'correctness:Definitely correct=3' (or '*:Yes=1' for every criterion)."
            )
        labels = out.setdefault(criterion, {})
        if label in labels:
            raise DataError(f"--score-map {item!r}: label {label!r} of {criterion!r} is mapped twice; keep one.")
        labels[label] = int(number)
    return out


# --------------------------------------------------------------------------------------------
# Reading a file into a frame
# --------------------------------------------------------------------------------------------


def read_table(path: Path | str) -> tuple[pd.DataFrame, list[str]]:
    """Read a table file into a frame of its cells, and each row's location for messages.

    CSV (UTF-8) and XLSX (first sheet) rows are numbered as a spreadsheet shows them (the
    header is row 1); JSONL rows by file line; Parquet rows by record (1-based). Blank rows
    are kept here (the importer skips them) so the numbers stay right.

    Returns:
        ``(frame, locations)`` with ``locations[i]`` such as ``"ratings.csv, row 5"``.

    Raises:
        PackError: The file is missing, of another type, unreadable, or has no rows.
    """
    import zipfile

    import pandas as pd

    path = Path(path)
    suffix = path.suffix.lower()
    _check_file(path)
    try:
        if suffix == ".jsonl":
            return _read_jsonl_table(path)
        if suffix == ".csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig", skip_blank_lines=False)
            return frame, [f"{path.name}, row {i + 2}" for i in range(len(frame))]
        if suffix == ".xlsx":
            frame = pd.read_excel(path, sheet_name=0, dtype=object, keep_default_na=False, na_values=[""])
            return frame, [f"{path.name}, row {i + 2}" for i in range(len(frame))]
        require_extra("parquet", f"{path}: reading a Parquet file")
        frame = pd.read_parquet(path)
        return frame, [f"{path.name}, record {i + 1}" for i in range(len(frame))]
    except pd.errors.EmptyDataError:
        raise PackError(f"{path}: the file is empty. Write a header row, then one row per rating.") from None
    except UnicodeDecodeError as exc:
        raise PackError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}). Save it as UTF-8 (CSV UTF-8).") from None
    except (pd.errors.ParserError, ValueError, zipfile.BadZipFile, KeyError, OSError, ImportError) as exc:
        raise PackError(unreadable_table(path, exc, "Check that the file is what its name says.",
                                         kind=f"a {suffix[1:]} table")) from None


def _check_file(path: Path) -> None:
    if (problem := path_problem(path)) is not None:
        what = "table not found" if problem == "does not exist" else f"the table {problem}"
        raise PackError(f"{path}: {what}. Pass a {', '.join(TABLE_SUFFIXES)} file with one rating (long) or "
                        "one rated target (wide) per row.")
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise PackError(f"{path}: unsupported table type {suffix or '(none)'!r}. Save the table as one of "
                        f"{list(TABLE_SUFFIXES)}.")


def _read_jsonl_table(path: Path) -> tuple[pd.DataFrame, list[str]]:
    import pandas as pd

    records, locations = _read_jsonl_records(path)
    return pd.DataFrame.from_records(records), locations


def _read_jsonl_records(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The JSON objects of a JSONL file, and ``"<name>, line <n>"`` of each (blank lines skipped;
    read as case files are, by :func:`evolve.data._cases.read_jsonl_rows`)."""
    problems = Problems(f"cannot import table {path}", PackError, MAX_REPORTED_PROBLEMS)
    _, rows = read_jsonl_rows(path, problems)
    problems.raise_if_any()
    return [raw for _, raw in rows], [f"{path.name}, {where}" for where, _ in rows]


def import_table(
    paths: Path | str | Sequence[Path | str],
    *,
    rubric: Rubric | RubricBundle | Path | str,
    name: str | None = None,
    columns: Mapping[str, str] | None = None,
    layout: Literal["long", "wide"] = "long",
    not_evaluable: Sequence[str] = (),
    score_map: Mapping[str, Mapping[str, int]] | None = None,
    skip_empty: bool = False,
    prompts_root: Path | str | None = None,
    rows: str | None = None,
    where: Mapping[str, str] | Sequence[tuple[str, str] | str] = (),
    rated: bool | None = True,
) -> TableImport:
    """Read one or more ratings table files into a validated rating pack (in memory; nothing is written).

    Args:
        paths: One file, or several of one format read as one table (rows in the order given;
            CSV, XLSX and Parquet files must have the same columns): ``.csv`` (UTF-8),
            ``.jsonl``, ``.parquet`` or ``.xlsx`` (first sheet).
        rubric: The rubric: a rubric id (under ``prompts_root``, then the shipped rubrics), a rubric folder
            (a ``Path``), a :class:`~evolve.rubric.Rubric` or a :class:`~evolve.rubric.RubricBundle`.
        name: Pack name (default: the files' stems joined by ``-``).
        columns, layout, not_evaluable, score_map, skip_empty: As for :func:`import_frame`.
        prompts_root: Where to look the rubric id up first (then the shipped rubrics).
        rows: JSONL only: a dotted path with ``*`` steps (e.g. ``"answers.*.claims.*"``); each
            record becomes one row per element it reaches (``*``: every item of a list or value
            of an object); a record where it reaches nothing yields no row and is counted. Column
            names (``columns``, ``where`` and the fields' default names) are then dotted paths
            from the top of the record, each ``*`` standing for the element the row came from
            (``"answers.*.annotator_id"``); ``"answers.*.@key"`` is the key (or list position,
            from 1) that ``*`` stepped through. Without ``rows`` a column name is matched as is.
        where: ``{column: value}`` (or pairs, or ``"COLUMN=VALUE"`` strings): keep only rows whose cell, as stripped text,
            equals the value, for every condition. Rows read = blank + not matching + imported.
        rated: As for :func:`import_frame` (``False``: targets without ratings, for scoring).

    Returns:
        The pack and the counts of what was read; the manifest records each file's sha256,
        and its source the rows path and conditions.

    Raises:
        PackError: A file cannot be read, files differ in format or columns, a path is found
            in no row, no row matches ``where``, or any cell is invalid (all problems listed,
            each with its file, row or line (and element) and column or path).
        DataError: A malformed path or condition.
        RubricError: The rubric id cannot be loaded.
    """
    files = _table_files(paths)
    pairs = where.items() if isinstance(where, Mapping) else [parse_where([w])[0] if isinstance(w, str) else w
                                                                for w in where]
    conditions = [(str(c), str(v)) for c, v in pairs]
    rub = _resolve_rubric(rubric, prompts_root)
    heading = f"cannot import table{'s' if len(files) > 1 else ''} {', '.join(str(f) for f in files)}"
    problems = Problems(heading, PackError, MAX_REPORTED_PROBLEMS)
    mapped = dict(columns or {})
    n_records = n_without = 0
    if rows is None:
        frame, locations = _read_flat(files, problems)
        for column, _ in conditions:
            if column not in frame.columns:
                problems.add(f"--where {column!r}", f"no such column; the table has columns {[str(c) for c in frame.columns]}",
                             "Name a column of the table.")
    else:
        records, record_locations = _read_records(files)
        nested = nested_rows(records, record_locations, rows, [*mapped.values(), *(c for c, _ in conditions)],
                             _default_columns(mapped, layout, rub), problems)
        frame, locations, n_records, n_without = (nested.frame, nested.locations, nested.n_records,
                                                  nested.n_records_without_rows)
    problems.raise_if_any()
    n_read = len(frame)
    frame, locations, n_blank, n_not_selected = _select(frame, locations, conditions, heading)
    source = (f"table{'s' if len(files) > 1 else ''} {', '.join(f.name for f in files)}"
              + (f"; rows {rows}" if rows else "") + "".join(f"; where {c}={v}" for c, v in conditions))
    result = import_frame(
        frame, rubric=rub, name=name or _pack_name("-".join(f.stem for f in files)), columns=columns,
        layout=layout, not_evaluable=not_evaluable, score_map=score_map, skip_empty=skip_empty,
        prompts_root=prompts_root, locations=locations, source=source, source_sha256=_checksums(files),
        heading=heading, rated=rated,
    )
    counts = result.counts.model_copy(update={
        "n_files": len(files), "n_records": n_records, "n_records_without_rows": n_without, "n_rows_blank": n_blank,
        "n_rows_not_selected": n_not_selected, "where": tuple(f"{c}={v}" for c, v in conditions)})
    assert counts.n_rows_read == n_read, (counts, n_read)
    pack = result.pack
    manifest = pack.manifest.model_copy(update={"description": f"Imported ratings: {counts.describe()}."})
    return TableImport(pack=RatingPack(path=None, manifest=manifest, cases=pack.cases, targets=pack.targets,
                                       ratings=pack.ratings), counts=counts)


def _table_files(paths: Path | str | Sequence[Path | str]) -> list[Path]:
    """The files as paths: at least one, none twice, all of one format."""
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not files:
        raise PackError("no table file given. Pass one or more .csv/.jsonl/.parquet/.xlsx files.")
    twice = sorted({str(f) for f in files if files.count(f) > 1})
    if twice:
        raise PackError(f"{twice[0]}: the file is given twice; its rows would be imported twice. Pass each file once.")
    kinds = sorted({f.suffix.lower() for f in files})
    if len(kinds) > 1:
        raise PackError(f"the files are of different types {kinds}; pass files of one format (convert the others), "
                        f"e.g. all {kinds[0]}.")
    return files


def _checksums(files: Sequence[Path]) -> dict[str, str]:
    names = [f.name for f in files]
    return {(f.name if names.count(f.name) == 1 else str(f)): sha256_file(f) for f in files}


def _read_flat(files: Sequence[Path], problems: Problems) -> tuple[pd.DataFrame, list[str]]:
    """The files read one after another as one table (CSV/XLSX/Parquet files must share their columns)."""
    import pandas as pd

    frames: list[pd.DataFrame] = []
    locations: list[str] = []
    for path in files:
        frame, where = read_table(path)
        first = {str(c) for c in frames[0].columns} if frames else None
        here = {str(c) for c in frame.columns}
        if first is not None and path.suffix.lower() != ".jsonl" and here != first:
            problems.add(f"{path.name}, header", f"its columns differ from {files[0].name}'s (missing: "
                         f"{sorted(first - here)}, extra: {sorted(here - first)})", "Give every file the same header row.")
        frames.append(frame)
        locations += where
    return (pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]), locations


def _read_records(files: Sequence[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    records: list[dict[str, Any]] = []
    locations: list[str] = []
    for path in files:
        _check_file(path)
        if path.suffix.lower() != ".jsonl":
            raise PackError(f"{path}: --rows reads nested JSON records, one per line of a .jsonl file; a "
                            f"{path.suffix.lower()} table is flat. Drop --rows, or pass .jsonl files.")
        more, where = _read_jsonl_records(path)
        records += more
        locations += where
    return records, locations


def _default_columns(columns: Mapping[str, str], layout: str, rubric: Rubric) -> list[str]:
    """Column names read when present: each unmapped field's default names (and, wide, the criterion ids)."""
    names = [c for f in TABLE_FIELDS if f not in columns for c in _DEFAULT_COLUMNS.get(f, (f,))]
    if layout == "wide" and not any(k.startswith("criterion:") for k in columns):
        names += [c.criterion_id for c in rubric.criteria]
    return names


def _select(frame: pd.DataFrame, locations: Sequence[str], conditions: Sequence[tuple[str, str]],
            heading: str) -> tuple[pd.DataFrame, list[str], int, int]:
    """Drop blank rows and rows not matching every condition; ``(frame, locations, n_blank, n_not_selected)``.

    Raises:
        PackError: Conditions were given and no row matches them (the message lists values seen).
    """
    blank, keep = 0, []
    for i, record in enumerate(frame.to_dict("records")):
        if all(is_missing(v) for v in record.values()):
            blank += 1
        elif all(cell_text(record.get(column)) == value for column, value in conditions):
            keep.append(i)
    n_not = len(frame) - blank - len(keep)
    if conditions and not keep and n_not:
        seen = {c: sorted({cell_text(v) for v in frame[c]})[:12] for c, _ in conditions}
        raise PackError(f"{heading}: no row matches --where {' '.join(f'{c}={v}' for c, v in conditions)} ({n_not} "
                        f"rows read). Values present: {seen}. Match one exactly (case and spaces count).")
    return frame.iloc[keep].reset_index(drop=True), [locations[i] for i in keep], blank, n_not


def _pack_name(stem: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._\-]+", "-", stem).strip("-._")
    return cleaned or "table"


# --------------------------------------------------------------------------------------------
# The frame importer
# --------------------------------------------------------------------------------------------


def _resolve_rubric(rubric: Any, prompts_root: Path | str | None) -> Rubric:
    if isinstance(rubric, Rubric):
        return rubric
    inner = getattr(rubric, "rubric", None)  # a rubric bundle (rubric, protocol, guidance)
    if isinstance(inner, Rubric):
        return inner
    if isinstance(rubric, Path):  # a rubric folder (<root>/<rubric id>/rubric.json)
        if not (rubric / "rubric.json").is_file():
            raise DataError(f"{rubric}: no rubric.json in this folder; give a rubric folder (as `evolve rubric new` "
                            "writes one), a rubric id with prompts_root=, a Rubric or a RubricBundle.")
        return load_rubric(rubric.name, root=rubric.parent)
    if isinstance(rubric, str):
        return load_rubric(rubric, root=Path(prompts_root) if prompts_root is not None else None)
    raise DataError(f"rubric must be a rubric id (with prompts_root= for your own rubrics), a rubric folder (a Path), "
                    f"a Rubric or a RubricBundle, not {type(rubric).__name__}.")


@dataclass
class _Mapping:
    fields: dict[str, str]  # field -> column present in the table
    criteria: dict[str, str]  # wide: criterion id -> score column
    comments: dict[str, str]  # wide: criterion id -> comment column
    component: str | None  # the constant component when no component column


def _resolve_mapping(
    present: Sequence[str], columns: Mapping[str, str], layout: str, rubric: Rubric, problems: Problems, file: str,
    *, rated: bool = True,
) -> _Mapping:
    """Which column holds which field; every problem (unknown field, absent column) is recorded
    (unrated: only the case and target fields are required, no score column is looked for)."""
    have = set(present)
    fix_cols = f"the table has columns {list(present)}"
    out = _Mapping({}, {}, {}, None)
    known = {c.criterion_id for c in rubric.criteria}
    for key, column in columns.items():
        base, _, crit = key.partition(":")
        if base not in TABLE_FIELDS or (crit and base not in ("criterion", "comment")):
            problems.add(f"{file}, mapping {key!r}", f"unknown field; the fields are {list(TABLE_FIELDS)}",
                         "Use one of them (criterion:<id> / comment:<id> for a wide table).")
            continue
        if crit and layout != "wide":
            problems.add(f"{file}, mapping {key!r}", "per-criterion columns apply to the wide layout only",
                         f"Use --layout wide, or map {base}={column} for a long table.")
            continue
        if layout == "wide" and key in _LONG_ONLY:
            problems.add(f"{file}, mapping {key!r}", "a wide table has one score column per criterion, not "
                         f"one {key} column", "Map criterion:<criterion_id>=COLUMN instead, or use --layout long.")
            continue
        if crit and crit not in known:
            problems.add(f"{file}, mapping {key!r}", f"criterion {crit!r} is not in rubric {rubric.id!r} "
                         f"(known: {sorted(known)})", "Use a criterion id of the rubric.")
            continue
        if column not in have:
            problems.add(f"{file}, column {column!r}", f"column {column!r} for field {key!r} is missing; {fix_cols}",
                         f"Rename the column or map the field to another one with {_map(key)}.")
            continue
        target = out.criteria if base == "criterion" and crit else out.comments if crit else out.fields
        target[crit or key] = column
    for name in TABLE_FIELDS:
        if name in out.fields or name in columns or (layout == "wide" and name in _LONG_ONLY):
            continue
        hit = next((c for c in _DEFAULT_COLUMNS.get(name, (name,)) if c in have), None)
        if hit is not None:
            out.fields[name] = hit
    required = (_REQUIRED + (_LONG_ONLY if layout == "long" else ())) if rated else _REQUIRED[:2]
    for name in required:
        if name not in out.fields and name not in columns:
            problems.add(f"{file}, header", f"no column for field {name!r} ({TABLE_FIELDS[name]}); {fix_cols}",
                         f"Map it with {_map(name)}.")
    if rated and layout == "wide" and not any(k.startswith("criterion:") for k in columns):
        out.criteria = {c.criterion_id: c.criterion_id for c in rubric.criteria if c.criterion_id in have}
        for crit_id, column in _near_criteria(rubric, have, out.criteria):
            problems.add(f"{file}, column {column!r}", f"named almost like criterion {crit_id!r} of rubric {rubric.id!r}, "
                         "which has no column of its own: its scores would be left out",
                         f"Rename the column to {crit_id!r}, or map it with --column criterion:{crit_id}={column} "
                         f"(Python: columns={{'criterion:{crit_id}': {column!r}}}).")
        if not out.criteria:
            per_rater = sorted(c for c in have if any(k.lower() in c.lower() and k.lower() != c.lower() for k in known))
            reshape = (f" Columns such as {', '.join(map(repr, per_rater[:3]))} look like one column per rater and "
                       "criterion, which no mapping reads (a wide row is one rater's): reshape the table to one row per "
                       "rater first, e.g. with pandas.melt, then read it long or wide." if per_rater else "")
            problems.add(f"{file}, header", f"no column is named like a criterion of rubric {rubric.id!r} "
                         f"({sorted(known)}); {fix_cols}", f"Map each score column with {_map('criterion:<id>')}.{reshape}")
    if "component" not in out.fields and "component" not in columns:
        if len(rubric.components) == 1:
            out.component = next(iter(rubric.components))
        else:
            problems.add(f"{file}, header", f"no component column, and rubric {rubric.id!r} has several components "
                         f"({sorted(rubric.components)})", f"Add a component column, or map one with {_map('component')}.")
    return out


def _near_criteria(rubric: Rubric, have: Collection[str], matched: Mapping[str, str]) -> list[tuple[str, str]]:
    """(criterion id, column) for each criterion of a wide table without a column of its name but
    with one named like it but for case, spaces, hyphens and underscores (``Safety`` for ``safety``)."""
    def norm(name: str) -> str:
        return re.sub(r"[\s_-]+", "", name).lower()

    by_norm = {norm(c): c for c in have if c not in matched.values()}
    return [(c.criterion_id, by_norm[norm(c.criterion_id)]) for c in rubric.criteria
            if c.criterion_id not in matched and norm(c.criterion_id) in by_norm]


def _text(value: Any) -> str:
    """A text cell as written ('' when empty)."""
    return "" if is_missing(value) else str(value)


def _short_hash(*parts: str) -> str:
    return hashlib.sha1("\x00".join(parts).encode("utf-8")).hexdigest()[:12]


@dataclass
class _Rows:
    """Cases, targets and ratings read so far, with where each was first seen."""

    rubric: Rubric
    mapping: _Mapping
    not_evaluable: frozenset[str]
    score_map: Mapping[str, Mapping[str, int]]
    skip_empty: bool
    problems: Problems
    rated: bool = True
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    targets: dict[str, dict[str, Any]] = field(default_factory=dict)
    ratings: list[Rating] = field(default_factory=list)
    seen: dict[tuple[str, str, str], str] = field(default_factory=dict)
    n_rows: int = 0
    n_cells: int = 0
    n_not_evaluable: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    marks_used: set[str] = field(default_factory=set)  # not_evaluable values some cell held
    spaced: dict[tuple[str, ...], tuple[str, str]] = field(default_factory=dict)  # derived ids by texts without spacing

    def bad(self, where: str, column: str | None, message: str, fix: str, order: int) -> None:
        self.problems.add(f"{where}, column {column!r}" if column else where, message, fix, order=(order,))

    def get(self, row: Mapping[str, Any], name: str) -> Any:
        column = self.mapping.fields.get(name)
        return None if column is None else row.get(column)

    def add(self, row: Mapping[str, Any], where: str, order: int) -> None:
        """Read one row; its problems are recorded."""
        if all(is_missing(v) for v in row.values()):
            return
        self.n_rows += 1
        if not self._texts_are_text(row, where, order):
            return
        case_id = self._case(row, where, order)
        target_id = self._target(row, case_id, where, order) if case_id else None
        if not self.rated:  # targets only (evolve judge): no rater, no rating cells
            return
        rater = cell_text(self.get(row, "rater"))
        if not rater:
            self.bad(where, self.mapping.fields.get("rater"), "empty rater id", "Fill in who rated the row.", order)
        cells = self._rating_cells(row, where, order)
        for criterion, value, comment, column in cells:
            self._rating(case_id, target_id, rater, criterion, value, comment, column, where, order)

    def _texts_are_text(self, row: Mapping[str, Any], where: str, order: int) -> bool:
        """Whether the row's text cells hold plain text: a JSON or spreadsheet number in a case or
        target text, statement or reference is refused (never turned into a text to judge), and
        so is a control or bidirectional-override character in any text cell or comment."""
        ok = True
        for name in ("case_text", "target_text", "statement", "reference"):
            value = self.get(row, name)
            if not is_missing(value) and not isinstance(value, str):
                self.bad(where, self.mapping.fields.get(name), f"{name} holds {_value_kind(value)}, not text",
                         f"Store it as text (in quotes in JSON, a text cell in a spreadsheet), or map {name} to the "
                         f"right column with {_map(name)}.", order)
                ok = False
        columns = [self.mapping.fields.get(n) for n in ("case_text", "case_title", "target_text", "statement",
                                                        "reference", "comment")]
        for column in [c for c in columns if c is not None] + list(self.mapping.comments.values()):
            if (problem := text_problem(row.get(column))) is not None:
                self.bad(where, column, f"the text {problem}", TEXT_PROBLEM_FIX, order)
                ok = False
        return ok

    def _agree(self, store: dict[str, Any], values: dict[str, Any], kind: str, key: str, where: str, order: int) -> None:
        """Check a repeated case/target against its first row (filling fields first left empty)."""
        for name, value in values.items():
            old = store.get(name)
            if value in ("", None):
                continue
            if old in ("", None):
                store[name] = value
            elif old != value:
                self.bad(where, self.mapping.fields.get(name, name),
                         f"{kind} {key!r} has a different {name} here than in {store['_where']}",
                         f"Give every row of one {kind} the same {name}, or give the rows different {kind} ids.", order)

    def _case(self, row: Mapping[str, Any], where: str, order: int) -> str | None:
        text = _text(self.get(row, "case_text"))
        raw_id = cell_text(self.get(row, "case"))
        col = self.mapping.fields.get("case")
        if not text.strip():
            self.bad(where, self.mapping.fields.get("case_text"), "empty case text", "Fill in the case text.", order)
            if not raw_id:
                return None
        case_id = raw_id if col is not None else f"c-{_short_hash(text)}"
        if col is None and not self._one_spacing(("case", text), case_id, "case_text", "case", where, order):
            return None
        if not case_id:
            self.bad(where, col, "empty case id", "Fill in the case id.", order)
            return None
        if not _ID_RE.match(case_id):
            self.bad(where, col, f"case id {case_id!r} is not a valid id (ASCII letters, digits and . _ : / -, starting "
                     "with a letter or digit)", f"Correct the id, or map another column with {_map('case')}.", order)
            return None
        values = {"case_text": text if text.strip() else "", "case_title": cell_text(self.get(row, "case_title")),
                  "reference": _text(self.get(row, "reference"))}
        if case_id not in self.cases:
            self.cases[case_id] = {"_where": where, **values}
        else:
            self._agree(self.cases[case_id], values, "case", case_id, where, order)
        return case_id

    def _one_spacing(self, key: tuple[str, ...], derived_id: str, column: str, kind: str, where: str,
                     order: int) -> bool:
        """Whether a case or target whose id is derived from its texts is not one seen before
        but for spaces and line breaks (a trailing space would make a second target, splitting
        one answer's ratings in two); a problem is recorded when it is."""
        bare = tuple(" ".join(part.split()) for part in key)
        first_id, first_where = self.spaced.setdefault(bare, (derived_id, where))
        if first_id == derived_id:
            return True
        self.bad(where, self.mapping.fields.get(column), f"the {kind} text differs from the one in {first_where} only "
                 f"in spaces or line breaks, so it would be read as another {kind}",
                 f"Make the two texts the same, or give each {kind} an id with {_map(kind)}.", order)
        return False

    def _target(self, row: Mapping[str, Any], case_id: str, where: str, order: int) -> str | None:
        text = _text(self.get(row, "target_text"))
        statement = _text(self.get(row, "statement"))
        component = cell_text(self.get(row, "component")) if self.mapping.component is None else self.mapping.component
        if not text.strip():
            self.bad(where, self.mapping.fields.get("target_text"), "empty target text", "Fill in the rated text.", order)
            return None
        if not component:
            self.bad(where, self.mapping.fields.get("component"), "empty component",
                     f"Use one of the rubric's components {sorted(self.rubric.components)}.", order)
            return None
        if component not in self.rubric.components:
            self.bad(where, self.mapping.fields.get("component"), f"component {component!r} is not a component of "
                     f"rubric {self.rubric.id!r} (known: {sorted(self.rubric.components)})",
                     "Use one of the rubric's components.", order)
            return None
        col = self.mapping.fields.get("target")
        target_id = cell_text(self.get(row, "target")) if col is not None else f"t-{_short_hash(case_id, component, text, statement)}"
        if col is None and not self._one_spacing(("target", case_id, component, text, statement), target_id,
                                                 "target_text", "target", where, order):
            return None
        if not target_id or not _ID_RE.match(target_id):
            self.bad(where, col, f"target id {target_id!r} is empty or not a valid id (ASCII letters, digits and . _ : / -, "
                     "starting with a letter or digit)", f"Correct the id, or map another column with {_map('target')}.",
                     order)
            return None
        values = {"case": case_id, "target_text": text, "statement": statement, "component": component,
                  "model": cell_text(self.get(row, "model")), "condition": cell_text(self.get(row, "condition"))}
        if target_id not in self.targets:
            self.targets[target_id] = {"_where": where, **values}
        else:
            self._agree(self.targets[target_id], values, "target", target_id, where, order)
        return target_id

    def _rating_cells(self, row: Mapping[str, Any], where: str, order: int) -> list[tuple[str, Any, str, str]]:
        """``(criterion, score cell, comment, score column)`` of each rating cell in the row."""
        comment = _text(self.get(row, "comment")).strip()
        if self.mapping.criteria:  # wide
            return [(crit, row.get(col), _text(row.get(self.mapping.comments[crit])).strip()
                     if crit in self.mapping.comments else comment, col)
                    for crit, col in self.mapping.criteria.items()]
        return [(cell_text(self.get(row, "criterion")), self.get(row, "score"), comment, self.mapping.fields["score"])]

    def _rating(self, case_id: str | None, target_id: str | None, rater: str, criterion: str, value: Any,
                comment: str, column: str, where: str, order: int) -> None:
        self.n_cells += 1
        text = cell_text(value)
        blank_marks = "" in self.not_evaluable  # not_evaluable=[""]: a blank cell is a not-evaluable rating
        crit = self._criterion(criterion, where, order) if text or criterion or blank_marks else None
        if not text and not blank_marks:
            if self.skip_empty:
                self.skipped[criterion] = self.skipped.get(criterion, 0) + 1
                return
            self.bad(where, column, "empty score", "Fill in a score, count blank cells as not evaluable with "
                     "--not-evaluable '' (Python: not_evaluable=['']), or skip them with --skip-empty (Python: "
                     "skip_empty=True; they are counted).", order)
            return
        if crit is None:
            return
        score, ne = self._score(crit, text, column, where, order)
        if score is None and not ne:
            return
        if None in (case_id, target_id) or not rater:
            return
        assert case_id is not None and target_id is not None
        key = (target_id, rater, crit.criterion_id)
        if key in self.seen:
            self.bad(where, column, f"a second rating of target {target_id!r} by rater {rater!r} on "
                     f"{crit.criterion_id!r} (first in {self.seen[key]})", "Keep one rating per target, rater and "
                     "criterion.", order)
            return
        self.seen[key] = where
        component = self.targets[target_id]["component"]
        if component not in crit.components:
            self.bad(where, column, f"criterion {crit.criterion_id!r} does not apply to component {component!r} "
                     f"(it applies to {list(crit.components)})", "Delete the rating, or correct the component.", order)
            return
        self.n_not_evaluable += ne
        self.ratings.append(Rating(case_id=case_id, target_id=target_id, rater_id=rater, criterion=crit.criterion_id,
                                   score=score, not_evaluable=ne, comment=comment))

    def _criterion(self, criterion: str, where: str, order: int) -> Criterion | None:
        if not criterion:
            self.bad(where, self.mapping.fields.get("criterion"), "empty criterion",
                     f"Fill in a criterion id of rubric {self.rubric.id!r}.", order)
            return None
        try:
            return self.rubric.criterion(criterion)
        except KeyError:
            known = [c.criterion_id for c in self.rubric.criteria]
            self.bad(where, self.mapping.fields.get("criterion"), f"criterion {criterion!r} is not in rubric "
                     f"{self.rubric.id!r} (known: {known})", "Use a criterion id of the rubric.", order)
            return None

    def _score(self, crit: Criterion, text: str, column: str, where: str, order: int) -> tuple[int | None, bool]:
        if text in self.not_evaluable:
            self.marks_used.add(text)
            if not crit.allow_not_evaluable:
                self.bad(where, column, f"{text!r} marks the rating not evaluable, but criterion "
                         f"{crit.criterion_id!r} does not allow that (allow_not_evaluable is false)",
                         f"Give a score from {crit.scale_min} to {crit.scale_max}.", order)
                return None, False
            return None, True
        labels = {**self.score_map.get(_ANY, {}), **self.score_map.get(crit.criterion_id, {})}
        if text in labels:
            score = labels[text]
        elif _INT_RE.match(text):
            score = int(text)
        else:
            known = f"; labels mapped for {crit.criterion_id!r}: {sorted(labels)}" if labels else ""
            ne = f"; not-evaluable values: {sorted(self.not_evaluable)}" if self.not_evaluable else ""
            self.bad(where, column, f"{text!r} is not an integer score{known}{ne}",
                     f"Write an integer, map the label with --score-map '{crit.criterion_id}:{text}=N' (Python: "
                     f"score_map={{{crit.criterion_id!r}: {{{text!r}: N}}}}), or mark it not evaluable with "
                     f"--not-evaluable '{text}' (Python: not_evaluable=[{text!r}]).", order)
            return None, False
        if not crit.scale_min <= score <= crit.scale_max:
            self.bad(where, column, f"score {score} ({text!r}) is outside the scale {crit.scale_min}..{crit.scale_max} "
                     f"of criterion {crit.criterion_id!r}", "Correct the score, or the score map (--score-map; Python: score_map=) "
                     "that gave it.", order)
            return None, False
        return score, False


def import_frame(
    frame: pd.DataFrame,
    *,
    rubric: Rubric | RubricBundle | Path | str,
    name: str,
    columns: Mapping[str, str] | None = None,
    layout: Literal["long", "wide"] = "long",
    not_evaluable: Sequence[str] = (),
    score_map: Mapping[str, Mapping[str, int]] | None = None,
    skip_empty: bool = False,
    prompts_root: Path | str | None = None,
    description: str = "",
    source: str = "",
    importer: str = TABLE_IMPORTER,
    source_sha256: Mapping[str, str] | None = None,
    locations: Sequence[str] | None = None,
    heading: str | None = None,
    rated: bool | None = True,
) -> TableImport:
    """Turn a table of ratings (a pandas DataFrame) into a validated rating pack, in memory.

    Each case is one distinct case id (or case text, when no case column is mapped), each
    target one distinct target id (or, without a target column, one distinct (case, component,
    target text, statement) - its id is ``t-`` and 12 hex digits of their SHA-1, stable across
    imports). Rows repeating a case or target must agree on its texts. In a long table each
    row is one rating; in a wide table each criterion column of a row is one.

    Args:
        frame: The table; cells may be text or numbers (``3.0`` reads as 3).
        rubric: A rubric id (under ``prompts_root``, then the shipped rubrics), a rubric folder (a
            ``Path``), a :class:`~evolve.rubric.Rubric` or a :class:`~evolve.rubric.RubricBundle` (in
            memory, nothing on disk needed).
        name: Pack name.
        columns: ``field -> column`` (fields: :data:`TABLE_FIELDS`; wide tables also take
            ``criterion:<id>`` and ``comment:<id>``). Unmapped fields use a column named like
            the field, if present.
        layout: ``"long"`` (one rating per row) or ``"wide"`` (one score column per criterion).
        not_evaluable: Cell values (after stripping) that mark a rating not evaluable, e.g. ``("Unsure",)``;
            ``""`` makes blank score cells not-evaluable ratings.
        score_map: ``{criterion: {label: score}}`` for cells written as labels; key ``"*"``
            applies to every criterion. Integers are always read as scores.
        skip_empty: Skip empty score cells (counted in :class:`TableCounts`) instead of failing;
            not together with ``""`` in ``not_evaluable``.
        prompts_root: Where to look a rubric id up first.
        description, source, importer, source_sha256: Manifest fields (a default description
            lists the counts).
        locations: How to name each row in messages (default ``row <i + 2>``, as if the frame
            were a spreadsheet with its header in row 1).
        heading: First line of the error message.
        rated: ``True``: a table of ratings (rater and score columns required). ``False``: a table
            of targets without ratings (cases and targets only; rater, criterion and score
            columns are not read) - what ``evolve judge`` scores. ``None``: rated when the table
            has a rater column (mapped, or named ``rater``/``rater_id``).

    Returns:
        The pack (``path=None``; no ratings when unrated) and the counts.

    Raises:
        PackError: Any unmapped or bad value - every one named by row and column, all listed at once.
        RubricError: The rubric id cannot be loaded.
    """
    rub = _resolve_rubric(rubric, prompts_root)
    if layout not in ("long", "wide"):
        raise DataError(f"layout must be 'long' or 'wide', got {layout!r}.")
    if not _ID_RE.match(name):
        raise PackError(f"pack name {name!r} is not a valid name (ASCII letters, digits and . _ : / -, starting with a "
                        "letter or digit); pass another name (--name).")
    marks = frozenset(v.strip() for v in not_evaluable)
    if skip_empty and "" in marks:
        raise PackError("blank score cells cannot be both skipped (--skip-empty; Python: skip_empty=True) and counted "
                        "as not evaluable (--not-evaluable ''; Python: not_evaluable=['']); choose one.")
    problems = Problems(heading or f"cannot import the table of pack {name!r}", PackError, MAX_REPORTED_PROBLEMS)
    present = [str(c) for c in frame.columns]
    if not present and frame.empty:  # not one "no column for field ..." per field
        raise PackError(f"{heading or f'cannot import the table of pack {name!r}'}: the table is empty (no column, no "
                        "row). Give a file with a header (CSV/XLSX) or one JSON object per line (JSONL).")
    if len(set(present)) != len(present):
        dupes = sorted({c for c in present if present.count(c) > 1})
        problems.add("header", f"repeated column names {dupes}", "Give every column its own name.")
    records = frame.to_dict("records")
    where = list(locations) if locations is not None else [f"row {i + 2}" for i in range(len(records))]
    file = where[0].split(",", 1)[0] if where and "," in where[0] else "table"
    if rated is None:
        rated = "rater" in (columns or {}) or any(c in present for c in _DEFAULT_COLUMNS["rater"])
    mapping = _resolve_mapping(present, dict(columns or {}), layout, rub, problems, file, rated=rated)
    problems.raise_if_any()
    rows = _Rows(rub, mapping, marks, dict(score_map or {}), skip_empty, problems,
                 rated=rated)
    for i, record in enumerate(records):
        rows.add({str(k): v for k, v in record.items()}, where[i], i)
    if rows.n_rows == 0:
        problems.add(file, "the table has no data rows", "Add one row per rating (long) or per rated target (wide)."
                     if rated else "Add one row per target.")
    problems.raise_if_any()
    return _finish(rows, rub, name, description, source, importer, source_sha256, prompts_root)


def _finish(rows: _Rows, rubric: Rubric, name: str, description: str, source: str, importer: str,
            source_sha256: Mapping[str, str] | None, prompts_root: Path | str | None) -> TableImport:
    cases = tuple(Case(case_id=cid, title=c["case_title"], text=c["case_text"], reference_answer=c["reference"] or None,
                       source=c["_where"]) for cid, c in rows.cases.items())
    targets = tuple(Target(target_id=tid, case_id=t["case"], component=t["component"], text=t["target_text"],
                           statement=t["statement"] or None, model=t["model"], condition=t["condition"])
                    for tid, t in rows.targets.items())
    n_skipped = sum(rows.skipped.values())
    counts = TableCounts(
        n_rows=rows.n_rows, n_cells=rows.n_cells, n_scored=len(rows.ratings) - rows.n_not_evaluable,
        n_not_evaluable=rows.n_not_evaluable, n_skipped_empty=n_skipped, skipped_by_criterion=dict(rows.skipped),
        n_cases=len(cases), n_targets=len(targets),
        unused_not_evaluable=tuple(sorted(rows.not_evaluable - rows.marks_used)),
    )
    assert counts.n_cells == counts.n_scored + counts.n_not_evaluable + counts.n_skipped_empty
    manifest = PackManifest(
        name=name, description=description or f"Imported ratings: {counts.describe()}.",
        rubric=RubricRef(id=rubric.id, version=rubric.version), source=source, importer=importer,
        source_sha256=dict(source_sha256 or {}),
    )
    pack = RatingPack(path=None, manifest=manifest, cases=cases, targets=targets, ratings=tuple(rows.ratings))
    validate_pack(pack, rubric=rubric, prompts_root=prompts_root)
    return TableImport(pack=pack, counts=counts)
