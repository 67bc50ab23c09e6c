"""Import physicians' rating workbooks of consilium records into a rating pack (consilium paper, physician spreadsheets).

Each physician fills one workbook (``.xlsx``) or CSV file per specialty, one row per case;
an ``.xlsx`` may also hold several specialties, one per sheet. The row rates one consilium
record of that case: the reasoning and the opinion of the panel role that matches the
workbook's specialty, the consilium's final report, and the case as a whole (panel adequacy,
case complexity, overall quality). The columns are read by position (A..AC) and the header
row's text is checked against the positions. The layout, the matching rules and the checks
are described in ``ratings/README.md`` ("Physician workbooks").

**A sheet without a header row is refused** unless the caller vouches for its layout
(``headerless=True``, the CLI's ``--no-header``). The header row is the only evidence of which
column is which: 27 of the 29 columns (B-AB) hold the same kind of cell (an integer score
or a not-evaluable mark), so a sheet whose columns are shifted by one (a deleted column B, an
extra column inserted) or whose groups are swapped (opinion before reasoning) passes every
cell check and yields a plausible pack whose every rating sits under the wrong criterion or
component - silently wrong data that no later step can detect. With a header row, such a
sheet is an error naming the cell. Refusing costs a user one line to add (or one flag after
checking the sheet by eye); accepting it with a warning, as earlier versions did, let a
wrong pack be calibrated on. With ``headerless=True`` every header-less sheet is read by
position and named in a warning.

:func:`import_workbooks` reads everything, checks every cell and either raises one
:class:`~evolve.errors.PackError` listing every problem (workbook, sheet, row, column and the
fix) or returns a validated pack plus the ratings of structurally inapplicable cells and the
warnings; it writes nothing. :func:`write_workbook_import` writes the result atomically,
the structural exclusions as ``structural_exclusions.csv`` next to ``ratings.csv``.
"""

from __future__ import annotations

import csv
import io
import math
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evolve.data._cases import CaseColumns, case_file, load_cases
from evolve.data._consilium import ConsiliumRecord, consilium_targets, load_consilium_records, record_file_stem
from evolve.data._models import _ID_PATTERN, Case, PackManifest, Rating, RubricRef
from evolve.data._pack import RATINGS_COLUMNS, RatingPack, _ratings_csv, validate_pack, write_pack
from evolve.data._util import is_missing, sha256_file
from evolve.errors import TEXT_PROBLEM_FIX, PackError, Problems, text_problem
from evolve.records import Record
from evolve.rubric import Criterion, Rubric, load_rubric

__all__ = [
    "NOT_EVALUABLE_MARKS",
    "STRUCTURAL_EXCLUSIONS_FILE",
    "WORKBOOK_HEADERS",
    "WORKBOOK_IMPORTER",
    "WORKBOOK_RUBRIC_ID",
    "WorkbookImport",
    "WorkbookImportSummary",
    "import_workbooks",
    "load_structural_exclusions",
    "read_role_map",
    "write_workbook_import",
    "write_workbook_template",
]

WORKBOOK_RUBRIC_ID = "consilium"
"""Rubric every workbook column refers to (``judge_prompts/consilium/rubric.json``)."""

WORKBOOK_IMPORTER = "workbooks/1"
"""``pack.json: importer`` of packs written by :func:`import_workbooks`."""

STRUCTURAL_EXCLUSIONS_FILE = "structural_exclusions.csv"
"""Pack file holding the ratings of structurally inapplicable (criterion, component) cells."""

NOT_EVALUABLE_MARKS: tuple[str, ...] = ("NE", "N/E", "not evaluable", "not_evaluable")
"""Cell values meaning "not evaluable" (case-insensitive; spaces, ``/``, ``_``, ``-``, ``.`` ignored)."""

_COMPONENT_GROUPS = ("reasoning", "opinion", "final")
_N_COMPONENT_CRITERIA = 8
_CASE_COLUMNS = (("panel_adequacy", 9), ("case_complexity", 10), ("overall_quality", 11))
_MAX_REPORTED = 50
_WORKBOOK_SUFFIXES = (".xlsx", ".xlsm", ".csv")
_UNSUPPORTED_SUFFIXES = (".xls", ".ods", ".numbers")
_DEFAULT_SHEET_RE = re.compile(r"^(sheet|tabelle|feuil|hoja|foglio|blad|planilha|лист)\s*\d*$", re.IGNORECASE)
_SPECIALTY_LABELS = ("specialty", "speciality")
_RATER_LABELS = ("rater", "raterid")
_STEM_MIN = 6
_ID_RE = re.compile(_ID_PATTERN)


def get_column_letter(index: int) -> str:
    """Spreadsheet letters of 1-based column ``index`` (openpyxl's, imported on first use: every
    command that imports ``evolve.data`` would otherwise load all of openpyxl)."""
    from openpyxl.utils import get_column_letter as letters

    return letters(index)


@dataclass(frozen=True)
class _Column:
    index: int  # 0-based
    header: str
    kind: str  # "id" | "score" | "comment"
    component: str = ""  # reasoning | opinion | final | case
    number: int = 0  # rubric criterion number

    @property
    def letter(self) -> str:
        return get_column_letter(self.index + 1)


def _layout() -> tuple[_Column, ...]:
    cols = [_Column(0, "case_id", "id")]
    for component in _COMPONENT_GROUPS:
        for k in range(1, _N_COMPONENT_CRITERIA + 1):
            cols.append(_Column(len(cols), f"{component}_{k}", "score", component, k))
    for header, number in _CASE_COLUMNS:
        cols.append(_Column(len(cols), header, "score", "case", number))
    cols.append(_Column(len(cols), "comment", "comment"))
    return tuple(cols)


_COLUMNS = _layout()
WORKBOOK_HEADERS: tuple[str, ...] = tuple(c.header for c in _COLUMNS)
"""The 29 header cells of a workbook, columns A..AC, in order."""


def _norm(value: Any) -> str:
    """Header/label key: lower case, only letters and digits."""
    return re.sub(r"[^0-9a-z]+", "", str(value).casefold()) if value is not None else ""


_NE_KEYS = {_norm(mark) for mark in NOT_EVALUABLE_MARKS}


def _header_matches(cell: Any, expected: str) -> bool:
    got, want = _norm(cell), _norm(expected)
    return got == want or (got.startswith(want) and got[len(want)].isalpha())


def _cell_text(value: Any) -> str:
    if is_missing(value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


class WorkbookImportSummary(Record):
    """Counts of one workbook import (what the CLI prints).

    Attributes:
        name: Pack name.
        condition: The ``--condition`` used to pick records, if any.
        n_workbooks: Workbook/CSV files read.
        n_sheets: Sheets with a header row (a CSV file is one sheet).
        n_rows: Rated rows (one per case and rater).
        n_cases: Rated cases (= cases in the pack).
        n_targets: Targets in the pack.
        n_ratings: Ratings in ``ratings.csv``.
        n_structural_exclusions: Cells of structurally inapplicable (criterion, component)
            pairs, kept in ``structural_exclusions.csv``.
        n_not_evaluable: Ratings marked not evaluable (in ``ratings.csv``).
        n_warnings: Number of warnings.
        raters: Rater ids, sorted.
        specialties_per_case: Case id -> number of specialties (workbook sheets) that rated it
            (consilium paper, physician spreadsheets plans three per case).
        warnings: Every warning (a 0 or 1 without a comment; skipped empty sheets; columns read
            by position under a missing or non-standard header).
    """

    name: str
    condition: str | None = None
    n_workbooks: int
    n_sheets: int
    n_rows: int
    n_cases: int
    n_targets: int
    n_ratings: int
    n_structural_exclusions: int
    n_not_evaluable: int
    n_warnings: int
    raters: tuple[str, ...]
    specialties_per_case: dict[str, int]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkbookImport:
    """A validated workbook import, in memory.

    Attributes:
        pack: The rating pack (cases, targets and applicable ratings), already validated.
        structural_exclusions: Ratings of (criterion, component) pairs the rubric does not
            apply (e.g. ``data_use`` on an ``opinion``), in workbook order; same fields as
            ratings; never loaded as calibration ratings.
        summary: Counts and warnings.
    """

    pack: RatingPack
    structural_exclusions: tuple[Rating, ...]
    summary: WorkbookImportSummary


# --------------------------------------------------------------------------------------------
# Reading sheets
# --------------------------------------------------------------------------------------------


@dataclass
class _Sheet:
    workbook: str  # file name
    name: str  # sheet name (CSV: file stem)
    grid: list[tuple[Any, ...]]  # rows, row 1 first

    @property
    def is_xlsx(self) -> bool:
        """Whether the sheet comes from an Excel workbook (whose formulas may lack a saved value)."""
        return self.workbook.lower().endswith((".xlsx", ".xlsm"))

    def where(self, row: int | None = None, column: _Column | int | None = None) -> str:
        parts = [self.workbook, f"sheet {self.name!r}"]
        if row is not None:
            parts.append(f"row {row}")
        if isinstance(column, _Column):
            parts.append(f"column {column.letter} ({column.header})")
        elif isinstance(column, int):
            parts.append(f"column {get_column_letter(column + 1)}")
        return ", ".join(parts)


def _read_csv_sheet(path: Path, issues: Problems) -> list[_Sheet]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        issues.add(f"{path.name}, sheet {path.stem!r}", f"not UTF-8 text ({exc.reason})",
                   "Save the sheet as 'CSV UTF-8', or save the workbook as .xlsx.")
        return []
    try:
        dialect: Any = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    grid = [tuple(row) for row in csv.reader(io.StringIO(text, newline=""), dialect)]
    return [_Sheet(path.name, path.stem, grid)]


def _read_xlsx_sheets(path: Path, issues: Problems) -> list[_Sheet]:
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        book = load_workbook(path, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, OSError) as exc:
        issues.add(path.name, f"cannot open the workbook ({type(exc).__name__}: {exc})",
                   "Save it again from the spreadsheet program as .xlsx (Excel workbook).")
        return []
    sheets = []
    for ws in book.worksheets:
        grid = list(ws.iter_rows(min_row=1, max_row=max(ws.max_row, 1), values_only=True))
        sheets.append(_Sheet(path.name, ws.title, grid))
    book.close()
    return sheets


def _workbook_files(src: Path, exclude: Iterable[Path], issues: Problems) -> list[Path]:
    if src.is_file():
        return [src]
    if not src.is_dir():
        raise PackError(f"{src}: no such workbook folder or file. Pass the folder holding the physicians' .xlsx/.csv files.")
    skip = {p.resolve() for p in exclude}
    files = []
    for path in sorted(src.iterdir()):
        if not path.is_file() or path.name.startswith((".", "~$")) or path.resolve() in skip:
            continue
        suffix = path.suffix.lower()
        if suffix in _WORKBOOK_SUFFIXES:
            files.append(path)
        elif suffix in _UNSUPPORTED_SUFFIXES:
            issues.add(path.name, f"{suffix} files cannot be read", "Save the workbook as .xlsx (or each sheet as CSV UTF-8).")
    if not files and not issues:
        raise PackError(f"{src}: no .xlsx or .csv workbooks found. Put one workbook (or CSV file) per specialty in the folder.")
    return files


# --------------------------------------------------------------------------------------------
# Role matching
# --------------------------------------------------------------------------------------------


def read_role_map(path: Path | str) -> dict[str, tuple[str, ...]]:
    """Read a ``--role-map`` CSV with columns ``specialty,role`` (one mapping per row).

    A specialty may map to several role names (different panels name the same expertise
    differently); the import uses the one present on the case's panel.

    Args:
        path: The CSV file (UTF-8; header row 1; other columns are ignored).

    Returns:
        Normalised specialty (lower case, letters and digits only) -> role names, file order.

    Raises:
        PackError: Missing file, missing ``specialty``/``role`` column, or an empty cell (the
            row and column are named).
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise PackError(f"{path}: role map not found. Pass a CSV with the columns specialty,role.")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    columns = {_norm(c): c for c in frame.columns}
    issues = Problems(f"cannot read the role map {path}", PackError)
    for need in ("specialty", "role"):
        if need not in columns:
            issues.add(f"{path.name}, row 1", f"no {need!r} column (columns: {list(frame.columns)})",
                       "Write the header line: specialty,role")
    issues.raise_if_any()
    out: dict[str, list[str]] = {}
    for i, row in enumerate(frame.to_dict("records")):
        specialty, role = row[columns["specialty"]].strip(), row[columns["role"]].strip()
        if not specialty and not role:
            continue
        for value, column in ((specialty, "specialty"), (role, "role")):
            if not value:
                issues.add(f"{path.name}, row {i + 2}, column {column!r}", "empty cell", "Fill in both specialty and role.")
        if specialty and role:
            out.setdefault(_norm(specialty), []).append(role)
    issues.raise_if_any()
    return {k: tuple(v) for k, v in out.items()}


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _match_role(specialty: str, record: ConsiliumRecord, role_map: Mapping[str, Sequence[str]]) -> tuple[str | None, str]:
    """The panel role a specialty rates: ``(role name, how)`` or ``(None, why not)``.

    Order: case-insensitive exact name; else the role map; else a stem match (normalised
    common prefix of at least 6 characters, exactly one role).
    """
    names = [r.name for r in record.roles]
    key = _norm(specialty)
    exact = [n for n in names if " ".join(n.split()).casefold() == " ".join(specialty.split()).casefold()]
    if exact:
        return exact[0], "exact"
    if key in role_map:
        mapped = [n for n in names if any(_norm(n) == _norm(m) for m in role_map[key])]
        if len(mapped) == 1:
            return mapped[0], "role map"
        if len(mapped) > 1:
            return None, f"the role map gives several roles of this panel ({mapped})"
    stems = [n for n in names if _common_prefix(key, _norm(n)) >= _STEM_MIN]
    if len(stems) == 1:
        return stems[0], "stem"
    if len(stems) > 1:
        return None, f"it matches several roles by stem ({stems})"
    return None, "no role name matches it"


# --------------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------------


def _parse_score(value: Any, crit: Criterion) -> tuple[int | None, bool, str | None]:
    """``(score, not_evaluable, problem)`` of one numeric cell."""
    allowed = f"{crit.scale_min}-{crit.scale_max}"
    if is_missing(value):
        return None, False, "empty cell"
    if isinstance(value, bool):
        return None, False, f"{value!r} is not a score"
    number: float | None = None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if _norm(text) in _NE_KEYS and _norm(text):
            if not crit.allow_not_evaluable:
                return None, False, (
                    f"{text!r} (not evaluable) is not allowed for criterion {crit.number} "
                    f"({crit.criterion_id})"
                )
            return None, True, None
        try:
            number = float(text.replace(",", "."))
        except ValueError:
            number = None
    if number is None or math.isnan(number):
        return None, False, f"{value!r} is not a score"
    if not number.is_integer() or not crit.scale_min <= number <= crit.scale_max:
        return None, False, f"{value!r} is not one of the scores {allowed}"
    return int(number), False, None


def _score_fix(crit: Criterion) -> str:
    scores = ", ".join(str(s) for s in crit.scores)
    if crit.allow_not_evaluable:
        return f"Enter one of {scores}, or NE if the text cannot be evaluated."
    return f"Enter one of {scores} (criterion {crit.number} cannot be marked not evaluable)."


# --------------------------------------------------------------------------------------------
# Header row: the columns are read by position; the header text is only checked against them
# --------------------------------------------------------------------------------------------

_LAYOUT = (
    "A case id, B-I reasoning criteria 1-8, J-Q opinion criteria 1-8, R-Y final criteria 1-8, "
    "Z panel adequacy, AA case complexity, AB overall quality, AC comment"
)
_ID_WORDS = frozenset({"case", "id", "doi", "no", "nr", "number", "identifier"})
_ID_KEYWORDS = frozenset({"case", "id", "doi"})
_NUMBER_WORDS = frozenset({"criterion", "criteria", "crit", "item", "question", "q", "no", "nr", "number"})
_NAME_MIN = 6
_SHOWN_ASSUMPTIONS = 8


@dataclass(frozen=True)
class _Named:
    """The column a header cell names; a ``None`` component or number is left open."""

    kind: str  # "id" | "score" | "comment"
    component: str | None = None
    number: int | None = None

    @classmethod
    def of(cls, col: _Column) -> _Named:
        """What a column holds by its position."""
        return cls(col.kind, col.component or None, col.number or None)

    def fits(self, col: _Column) -> bool:
        """Whether the header may sit above ``col``."""
        if self.kind != col.kind:
            return False
        return self.component in (None, col.component) and self.number in (None, col.number)

    def describe(self, by_number: Mapping[int, Criterion]) -> str:
        """``"opinion criterion 3 (data_use)"``, ``"the case id"``, ..."""
        if self.kind != "score":
            return "the case id" if self.kind == "id" else "the comment"
        if self.number is None:
            return f"the {self.component} columns"
        crit = by_number.get(self.number)
        in_group = self.component in (None, "case") or self.number <= _N_COMPONENT_CRITERIA
        what = f"criterion {self.number}" + (f" ({crit.criterion_id})" if crit is not None and in_group else "")
        return what if self.component in (None, "case") else f"{self.component} {what}"


_CASE_NUMBER = dict(_CASE_COLUMNS)
_KEYWORDS: tuple[tuple[tuple[str, ...], _Named], ...] = (
    (("case", "complexity"), _Named("score", "case", _CASE_NUMBER["case_complexity"])),
    (("complexity",), _Named("score", "case", _CASE_NUMBER["case_complexity"])),
    (("panel",), _Named("score", "case", _CASE_NUMBER["panel_adequacy"])),
    (("adequacy",), _Named("score", "case", _CASE_NUMBER["panel_adequacy"])),
    (("overall",), _Named("score", "case", _CASE_NUMBER["overall_quality"])),
    *(((word,), _Named("comment")) for word in ("comment", "comments", "note", "notes", "remark", "remarks")),
)
"""Leading words that name a case-level or comment column (``Overall quality``, ``Notes``)."""


def _criterion_named(key: str, by_number: Mapping[int, Criterion]) -> int | None:
    """Number of the one rubric criterion whose id or name the :func:`_norm` key spells."""
    def spells(crit: Criterion) -> bool:
        name = _norm(crit.name)
        return key in (_norm(crit.criterion_id), name) or key.startswith(name) or (
            len(key) >= _NAME_MIN and name.startswith(key))

    hits = {number for number, crit in by_number.items() if key and spells(crit)}
    return hits.pop() if len(hits) == 1 else None


def _component_and_number(words: Sequence[str], by_number: Mapping[int, Criterion]) -> _Named | None:
    """Read ``Reasoning 1``, ``R1``, ``Opinion - criterion 3``, ``Final: clinical safety``, ``Criterion 2``, ``2``."""
    first = words[0] if words and words[0].isalpha() else ""
    component = next((c for c in _COMPONENT_GROUPS if first and c.startswith(first)), None)
    rest = list(words[1:] if component else words)
    while rest and (rest[0].isalpha() if component else rest[0] in _NUMBER_WORDS):
        rest.pop(0)  # "criterion", "report", "item", "no." ... before the number
    if rest and rest[0].isdigit():
        number = int(rest[0])
        return _Named("score", component, number) if component or number in by_number else None
    if component is None:
        return None
    rest = list(words[1:])
    if not rest:
        return _Named("score", component)
    named = _criterion_named("".join(rest), by_number)
    return _Named("score", component, named) if named is not None else None


def _header_says(text: str, by_number: Mapping[int, Criterion]) -> _Named | None:
    """The column a header text names, or ``None`` when it is not recognisable as any column."""
    words = re.findall(r"[a-z]+|[0-9]+", text.casefold())
    if words and set(words) <= _ID_WORDS and set(words) & _ID_KEYWORDS:
        return _Named("id")
    for start, named in _KEYWORDS:
        if tuple(words[: len(start)]) == start:
            return named
    number = _criterion_named(_norm(text), by_number)
    if number is not None:
        return _Named("score", None, number)
    return _component_and_number(words, by_number)


def _names_case_id(value: Any, by_number: Mapping[int, Criterion]) -> bool:
    """Whether a column-A cell is a case-id header (``case_id``, ``Case ID``, ``Case no.``, ``ID``, ``DOI``)."""
    text = _cell_text(value)
    return bool(text) and (_header_matches(text, "case_id") or _header_says(text, by_number) == _Named("id"))


def _looks_like_score(value: Any) -> bool:
    """Whether a cell holds a number or a not-evaluable mark (in range or not)."""
    text = _cell_text(value).replace(",", ".")
    if _norm(text) in _NE_KEYS:
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _holds_ratings(row: Sequence[Any], lookup: Mapping[str, str]) -> bool:
    """Whether a row reads as ratings: a known case id in column A, or at least half of B-AB score-like."""
    first = _cell_text(row[0]) if row else ""
    if not first or _norm(first) in _SPECIALTY_LABELS + _RATER_LABELS:
        return False
    if _resolve_case(first, lookup) is not None:
        return True
    n_scores = len(_COLUMNS) - 2
    return 2 * sum(_looks_like_score(v) for v in row[1 : n_scores + 1]) >= n_scores


def _could_be_header(row: Sequence[Any], lookup: Mapping[str, str]) -> bool:
    """Whether the row above the first ratings may be their (unlabelled) header row."""
    if not row or _norm(row[0]) in _SPECIALTY_LABELS + _RATER_LABELS or _holds_ratings(row, lookup):
        return False
    return any(not is_missing(v) for v in row[1 : len(_COLUMNS)])


def _locate_ratings(sheet: _Sheet, run: _Import) -> tuple[int | None, int] | None:
    """Where a sheet's ratings are: ``(header row or None, first data row)``, 1-based.

    The header row is the first row whose column A is a case-id header. Without one, the
    ratings start at the first row that holds ratings (:func:`_holds_ratings`), and the row
    just above is taken as their header if it may be one. ``None`` if there are no ratings.
    """
    for rowno, row in enumerate(sheet.grid, start=1):
        if row and _names_case_id(row[0], run.by_number):
            return rowno, rowno + 1
    first = next((n for n, row in enumerate(sheet.grid, start=1) if _holds_ratings(row, run.lookup)), None)
    if first is None:
        return None
    if first > 1 and _could_be_header(sheet.grid[first - 2], run.lookup):
        return first - 1, first
    return None, first


def _misplaced_header(sheet: _Sheet, header_row: int, col: _Column, text: str, named: _Named, run: _Import) -> None:
    """Report a header cell that names another column than the one its position holds."""
    homes = [c.letter for c in _COLUMNS if named.fits(c)]
    home = (f"which the consilium paper's workbook layout puts in column{'s' if len(homes) > 1 else ''} {', '.join(homes)}" if homes
            else "which no column of the workbook holds")
    own = f"{col.header} ({run.by_number[col.number].criterion_id})" if col.kind == "score" else col.header
    move = f"; this column belongs in {', '.join(homes)}" if homes else ""
    run.issues.add(
        sheet.where(header_row, col),
        f"header {text!r} names {named.describe(run.by_number)}, {home}, but by position column {col.letter} "
        f"holds {own}: read by position, its cells would go under the wrong column",
        f"Put the columns in the consilium paper's workbook order ({_LAYOUT}){move}; if only the label is wrong, rename it {col.header!r}.",
    )


def _check_header(sheet: _Sheet, header_row: int, run: _Import) -> list[str]:
    """Check a header row against the consilium paper, physician spreadsheets positions.

    A cell that names a different column is an error (in ``run.issues``). Cells that are
    empty, unrecognised or a non-standard name of their own column are read by position.

    Returns:
        One description per column read by position although its header is not the standard
        one (``"B 'R1' as reasoning_1"``), for the warning.
    """
    row = sheet.grid[header_row - 1]
    assumed = []
    for col in _COLUMNS:
        text = _cell_text(row[col.index]) if col.index < len(row) else ""
        if text and _header_matches(text, col.header):
            continue
        named = _header_says(text, run.by_number) if text else None
        if named is not None and not named.fits(col):
            _misplaced_header(sheet, header_row, col, text, named, run)
        elif not text:
            assumed.append(f"{col.letter} (empty) as {col.header}")
        else:
            assumed.append(f"{col.letter} {text!r}{'' if named else ' (not recognised)'} as {col.header}")
    return assumed


def _warn_positions(sheet: _Sheet, header_row: int | None, first_row: int, assumed: Sequence[str], run: _Import) -> None:
    """Warn that (some) columns of a sheet are read by position only, naming what was assumed;
    refuse a sheet without a header row unless the caller vouched for it (``run.headerless``)."""
    if header_row is None and not run.headerless:
        run.issues.add(
            sheet.where(first_row, 0),
            f"no header row above the ratings (they start in row {first_row}): without one, columns that are "
            "shifted or swapped cannot be told from the consilium paper, physician spreadsheets layout, and every rating would go under the "
            "wrong criterion",
            f"Add the header row ({', '.join(WORKBOOK_HEADERS[:2])}, ..., {WORKBOOK_HEADERS[-1]}; columns A-AC) above "
            "the ratings (see 'evolve ratings workbook-template'), or, after checking that every header-less sheet "
            f"holds {_LAYOUT}, pass --no-header (library: headerless=True).",
        )
        return
    if header_row is None:
        run.warnings.append(
            f"{sheet.where()}: no header row; read the ratings from row {first_row} on by position, as vouched "
            f"for by --no-header (consilium paper, physician spreadsheets: {_LAYOUT}). A header row ({', '.join(WORKBOOK_HEADERS[:2])}, ..., "
            f"{WORKBOOK_HEADERS[-1]}) above the ratings lets the import check the order."
        )
        return
    if not assumed:
        return
    shown = ", ".join(assumed[:_SHOWN_ASSUMPTIONS])
    more = f" and {len(assumed) - _SHOWN_ASSUMPTIONS} more" if len(assumed) > _SHOWN_ASSUMPTIONS else ""
    run.warnings.append(
        f"{sheet.where(header_row)}: {len(assumed)} header cell(s) are not the standard labels; their columns are "
        f"read by position (consilium paper, physician spreadsheets: {_LAYOUT}): {shown}{more}. Check that the columns are in this order."
    )


# --------------------------------------------------------------------------------------------
# The import
# --------------------------------------------------------------------------------------------


def _case_lookup(cases: Sequence[Case]) -> dict[str, str]:
    """Keys under which a workbook may name a case: the id, its record-file form, both in any case."""
    exact: dict[str, str] = {}
    folded: dict[str, set[str]] = {}
    for case in cases:
        for key in (case.case_id, record_file_stem(case.case_id)):
            exact.setdefault(key, case.case_id)
            folded.setdefault(key.casefold(), set()).add(case.case_id)
    out = {k: next(iter(v)) for k, v in folded.items() if len(v) == 1}
    out.update(exact)
    return out


def _resolve_case(raw: str, lookup: Mapping[str, str]) -> str | None:
    return lookup.get(raw) or lookup.get(raw.casefold())


def _rubric_by_number(rubric: Rubric) -> dict[int, Criterion]:
    by_number = {c.number: c for c in rubric.criteria if c.number is not None}
    needed = sorted({c.number for c in _COLUMNS if c.kind == "score"})
    absent = [k for k in needed if k not in by_number]
    if absent:
        raise PackError(
            f"rubric {rubric.id!r} version {rubric.version!r} has no criterion numbered {absent}; the workbook "
            "columns B..AB refer to criteria 1-11. Restore judge_prompts/consilium/rubric.json."
        )
    return by_number


def import_workbooks(
    src: Path | str,
    *,
    cases: Path | str,
    outputs: Path | str,
    condition: str | None = None,
    role_map: Path | str | Mapping[str, Sequence[str]] | None = None,
    name: str | None = None,
    case_columns: CaseColumns | None = None,
    prompts_root: Path | str | None = None,
    headerless: bool = False,
) -> WorkbookImport:
    """Read physician workbooks (consilium paper, physician spreadsheets) into a validated rating pack, in memory.

    Every workbook row names a case (column A); the case must be in the case file and have a
    consilium record in ``outputs``. The workbook's specialty selects one role of that
    record's panel, whose ``reasoning`` (B-I) and ``opinion`` (J-Q) targets the row rates;
    R-Y rate the ``final`` target and Z, AA, AB the ``case`` target. Column k of a group is
    the rubric criterion numbered k. Cells of (criterion, component) pairs the rubric does not
    apply go to :attr:`WorkbookImport.structural_exclusions`. The row's comment (AC) is stored
    on each of its ratings. Columns are read by position: header cells that name their own
    column in another form (``R1``, ``Overall``, ``Notes``, the criterion's name) or nothing
    recognisable give a warning; a header cell that names a different column (swapped or
    shifted columns) is an error; a sheet without a header row is an error unless
    ``headerless`` (see the module docstring for why).

    Args:
        src: Folder of ``.xlsx``/``.xlsm``/``.csv`` workbooks (not recursive; hidden files,
            ``~$`` lock files, the case file and the role map are skipped), or one workbook.
        cases: The case file (see :func:`~evolve.data.load_cases`).
        outputs: Folder of consilium records (see :func:`~evolve.data.load_consilium_records`).
        condition: Which record to rate when a case has several (their ``condition``).
        role_map: CSV path (``specialty,role``) or mapping used when no role name equals the
            specialty (before the stem match).
        name: Pack name (default: the folder's name, or the file's stem).
        case_columns: Column mapping of the case file.
        prompts_root: ``judge_prompts`` folder holding the ``consilium`` rubric.
        headerless: The caller vouches that every sheet without a header row holds the
            columns A..AC in the consilium paper's workbook order: such sheets are read by position (with a
            warning each) instead of refused.

    Returns:
        The pack, the structural exclusions and a summary with every warning (a 0 or 1
        without a comment; empty sheets that were skipped; sheets without a header row
        (with ``headerless``) or with non-standard header cells, whose columns were read by
        position).

    Raises:
        PackError: Any problem in any workbook - a header cell that names a different column
            than the consilium paper's workbook layout puts at its position (the cell, what it says and where that column
            belongs are named), a sheet without a header row (unless ``headerless``), a sheet
            with neither header nor ratings, empty or invalid cells, a not-evaluable mark where the
            criterion forbids it, unknown case ids, cases without (or with ambiguous)
            consilium records, duplicate (rater, case) rows, specialties that match no role -
            all collected, each naming workbook, sheet, row, column and the fix.
        DataError: The case file or the record folder cannot be read.
        RubricError: The consilium rubric cannot be loaded.
    """
    src = Path(src)
    case_path = case_file(cases)
    rubric = load_rubric(WORKBOOK_RUBRIC_ID, root=Path(prompts_root) if prompts_root is not None else None)
    pack_name = name if name is not None else (src.stem if src.is_file() else src.resolve().name)
    if not _ID_RE.match(pack_name):
        raise PackError(
            f"pack name {pack_name!r} is not a valid id (ASCII letters, digits and . _ : / -, starting with a letter or "
            "digit). Pass --name NAME."
        )
    role_map_path = Path(role_map) if isinstance(role_map, (str, Path)) else None
    mapping = read_role_map(role_map_path) if role_map_path is not None else role_map
    all_cases = load_cases(case_path, mapping=case_columns)
    run = _Import(
        lookup=_case_lookup(all_cases),
        records=load_consilium_records(outputs), condition=condition,
        role_map={_norm(k): tuple(v) for k, v in (mapping or {}).items()},  # type: ignore[union-attr]
        by_number=_rubric_by_number(rubric), outputs=Path(outputs), case_file=case_path, headerless=headerless,
        issues=Problems(f"cannot import physician workbooks from {src}", PackError, limit=_MAX_REPORTED),
    )
    files = _workbook_files(src, [p for p in (case_path, role_map_path) if p is not None], run.issues)
    for path in files:
        _read_workbook(path, run)
    run.issues.raise_if_any()
    if not run.ratings and not run.excluded:
        raise PackError(f"{src}: the workbooks hold no rated rows. Fill in at least one row under the header.")

    rated = [c for c in all_cases if c.case_id in run.chosen]
    targets = [t for c in rated for t in consilium_targets(run.chosen[c.case_id])]
    checksums = {p.name: sha256_file(p) for p in files}
    checksums.setdefault(case_path.name, sha256_file(case_path))
    if role_map_path is not None:
        checksums.setdefault(role_map_path.name, sha256_file(role_map_path))
    n_raters = len({r.rater_id for r in run.ratings})
    manifest = PackManifest(
        name=pack_name,
        description=(
            f"Physician workbook ratings (consilium paper, physician spreadsheets) of consilium records: {len(rated)} cases, {len(targets)} targets "
            f"(reasoning, opinion, final, case), {len(run.ratings)} ratings by {n_raters} raters from {run.n_sheets} "
            f"specialty sheets; condition(s) {sorted({r.condition for r in run.chosen.values()})}. {len(run.excluded)} "
            f"further cells rate structurally inapplicable (criterion, component) pairs and are kept in "
            f"{STRUCTURAL_EXCLUSIONS_FILE}, not in ratings.csv."
        ),
        rubric=RubricRef(id=rubric.id, version=rubric.version),
        source=(
            f"Physician rating workbooks {[p.name for p in files]}; cases from {case_path.name}; consilium "
            f"records from {Path(outputs).name}/."
        ),
        importer=WORKBOOK_IMPORTER,
        source_sha256=checksums,
    )
    pack = RatingPack(path=None, manifest=manifest, cases=tuple(rated), targets=tuple(targets), ratings=tuple(run.ratings))
    validate_pack(pack, prompts_root=prompts_root)
    return WorkbookImport(pack=pack, structural_exclusions=tuple(run.excluded),
                          summary=run.summary(pack_name, condition, len(files), rated, len(targets)))


@dataclass
class _Import:
    """One workbook import: what it reads against (cases, records, rubric, role map) and what
    it gathers (chosen records, ratings, structural exclusions, problems, warnings, counts)."""

    lookup: Mapping[str, str]
    records: Mapping[str, list[ConsiliumRecord]]
    condition: str | None
    role_map: Mapping[str, Sequence[str]]
    by_number: Mapping[int, Criterion]
    outputs: Path
    case_file: Path
    issues: Problems
    warnings: list[str] = field(default_factory=list)
    chosen: dict[str, ConsiliumRecord] = field(default_factory=dict)
    seen_rows: dict[tuple[str, str], str] = field(default_factory=dict)
    specialties: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    ratings: list[Rating] = field(default_factory=list)
    excluded: list[Rating] = field(default_factory=list)
    n_sheets: int = 0
    n_rows: int = 0
    headerless: bool = False

    def summary(self, name: str, condition: str | None, n_workbooks: int, rated: list[Case],
                n_targets: int) -> WorkbookImportSummary:
        """The import's counts and warnings."""
        return WorkbookImportSummary(
            name=name, condition=condition, n_workbooks=n_workbooks, n_sheets=self.n_sheets, n_rows=self.n_rows,
            n_cases=len(rated), n_targets=n_targets, n_ratings=len(self.ratings),
            n_structural_exclusions=len(self.excluded), n_not_evaluable=sum(r.not_evaluable for r in self.ratings),
            n_warnings=len(self.warnings), raters=tuple(sorted({r.rater_id for r in self.ratings})),
            specialties_per_case={c.case_id: len({s for s, _ in self.specialties[c.case_id]}) for c in rated},
            warnings=tuple(self.warnings),
        )


def _read_workbook(path: Path, run: _Import) -> None:
    """Read every sheet of one workbook into ``run`` (problems go to ``run.issues``)."""
    sheets = _read_csv_sheet(path, run.issues) if path.suffix.lower() == ".csv" else _read_xlsx_sheets(path, run.issues)
    found_ratings = False
    for sheet in sheets:
        parsed = _parse_sheet(sheet, path, run)
        if parsed is None:
            continue
        found_ratings = True
        run.n_sheets += 1
        specialty, specialty_from, rater, first_row = parsed
        _warn_extra_columns(sheet, first_row, run)
        for rowno, cells in _data_rows(sheet, first_row):
            run.n_rows += 1
            row_ratings = _import_row(sheet, rowno, cells, specialty=specialty, specialty_from=specialty_from,
                                      rater=rater, run=run)
            if row_ratings is None:
                continue
            case_id, kept, dropped = row_ratings
            run.specialties.setdefault(case_id, set()).add((specialty.casefold(), rater))
            run.ratings += kept
            run.excluded += dropped
    if sheets and not found_ratings and not any(i.startswith(path.name) for i in run.issues.items):
        run.issues.add(
            f"{path.name}, sheet {sheets[0].name!r}, row 1, column A",
            "no header row and no ratings: every sheet is empty",
            f"Add the header row {', '.join(WORKBOOK_HEADERS[:3])}, ..., {WORKBOOK_HEADERS[-1]} (columns A-AC), "
            "or create the workbook with 'evolve ratings workbook-template'.",
        )


def _parse_sheet(sheet: _Sheet, path: Path, run: _Import) -> tuple[str, str, str, int] | None:
    """Find the ratings of one sheet and its labels: ``(specialty, where it came from, rater, first data row)``.

    The columns are read by position (consilium paper, physician spreadsheets). A header cell naming another column is an
    error (in ``run.issues``; the rows are still read, so their problems are reported too);
    a missing header row or non-standard header cells are a warning.

    Returns ``None`` for an empty sheet (warned) or a sheet without ratings (error added).
    """
    located = _locate_ratings(sheet, run)
    if located is None:
        if any(not is_missing(v) for row in sheet.grid for v in row):
            run.issues.add(
                sheet.where(1, 0),
                "no header row and no ratings: no row has a case-id header (case_id, Case ID, ID ...) or a known "
                "case id in column A",
                f"Add the header row ({', '.join(WORKBOOK_HEADERS[:2])}, ..., {WORKBOOK_HEADERS[-1]}; columns A-AC) "
                "above the ratings, or create the workbook with 'evolve ratings workbook-template'.",
            )
        else:
            run.warnings.append(f"{sheet.where()}: empty sheet skipped.")
        return None
    header_row, first_row = located
    assumed = _check_header(sheet, header_row, run) if header_row is not None else []
    _warn_positions(sheet, header_row, first_row, assumed, run)
    return (*_specialty_and_rater(sheet, path, (header_row or first_row) - 1), first_row)


def _specialty_and_rater(sheet: _Sheet, path: Path, n_rows: int) -> tuple[str, str, str]:
    """``(specialty, where it came from, rater)``: the labels in the first ``n_rows`` rows, else the defaults."""
    specialty, specialty_from, rater = _sheet_labels(sheet, n_rows)
    if not specialty:
        if path.suffix.lower() == ".csv":
            specialty, specialty_from = path.stem, f"file name {path.name}"
        elif _DEFAULT_SHEET_RE.match(sheet.name.strip()):
            specialty, specialty_from = path.stem, f"file name {path.name} (sheet {sheet.name!r} has a default name)"
        else:
            specialty, specialty_from = sheet.name.strip(), f"sheet name {sheet.name!r}"
    if not rater:
        rater = f"{path.stem}/{specialty}"
    return specialty, specialty_from, rater


def _sheet_labels(sheet: _Sheet, n_rows: int) -> tuple[str, str, str]:
    """``(specialty, where it came from, rater)`` from the ``Specialty``/``Rater`` labels of the first rows ("" if absent)."""
    specialty = specialty_from = rater = ""
    for rowno, row in enumerate(sheet.grid[:n_rows], start=1):
        for j, cell in enumerate(row):
            label = _norm(cell)
            if label not in _SPECIALTY_LABELS + _RATER_LABELS:
                continue
            value = _cell_text(row[j + 1]) if j + 1 < len(row) else ""
            if not value:  # an empty label (as in the template) means "not given"
                continue
            if label in _SPECIALTY_LABELS:
                specialty, specialty_from = value, f"label in {sheet.where(rowno, j + 1)}"
            else:
                rater = value
    return specialty, specialty_from, rater


def _warn_extra_columns(sheet: _Sheet, first_row: int, run: _Import) -> None:
    """A warning when rating rows hold values right of column AC: they are not read (a new user's
    extra 'Reviewer initials' column was dropped without a word)."""
    width = len(_COLUMNS)
    extra = sorted({i for row in sheet.grid[first_row - 1:] for i, v in enumerate(row[width:], start=width)
                    if not is_missing(v)})
    if extra:
        letters = ", ".join(get_column_letter(i + 1) for i in extra)
        run.warnings.append(f"{sheet.where()}: column(s) {letters} right of {_COLUMNS[-1].letter} hold values that are "
                            f"not read (a workbook's columns are A-{_COLUMNS[-1].letter}); put what matters into the "
                            f"comment column {_COLUMNS[-1].letter}.")


def _data_rows(sheet: _Sheet, first_row: int) -> Iterable[tuple[int, tuple[Any, ...]]]:
    """Non-empty rows from ``first_row`` (1-based) on, padded/cut to columns A..AC, with their row numbers."""
    width = len(_COLUMNS)
    for rowno, row in enumerate(sheet.grid[first_row - 1 :], start=first_row):
        cells = tuple(row[:width]) + (None,) * (width - min(len(row), width))
        if all(is_missing(v) for v in cells):
            continue
        yield rowno, cells


def _import_row(
    sheet: _Sheet,
    rowno: int,
    cells: tuple[Any, ...],
    *,
    specialty: str,
    specialty_from: str,
    rater: str,
    run: _Import,
) -> tuple[str, list[Rating], list[Rating]] | None:
    """Check one workbook row and turn it into ratings: ``(case_id, ratings, structural exclusions)``.

    Adds every problem of the row to ``run.issues`` and returns ``None`` if there was any.
    """
    lookup, records, condition = run.lookup, run.records, run.condition
    role_map, by_number, chosen, seen_rows = run.role_map, run.by_number, run.chosen, run.seen_rows
    issues, warnings, outputs, case_file = run.issues, run.warnings, run.outputs, run.case_file
    id_col = _COLUMNS[0]
    n_before = len(issues)
    raw_id = _cell_text(cells[0])
    record: ConsiliumRecord | None = None
    role: str | None = None
    case_id: str | None = None
    if not raw_id:
        issues.add(sheet.where(rowno, id_col), "empty case id in a row that has ratings",
                   "Write the case id (the DOI, as in the case file) in column A, or clear the row.")
    else:
        case_id = _resolve_case(raw_id, lookup)
        if case_id is None:
            issues.add(sheet.where(rowno, id_col), f"unknown case id {raw_id!r}: not in the case file {case_file.name}",
                       "Correct the id (DOI as in the case file, or the record file name form with '_' for '/'), "
                       "or add the case to the case file.")
        else:
            key = (rater, case_id)
            if key in seen_rows:
                issues.add(sheet.where(rowno, id_col),
                           f"duplicate row: case {case_id!r} is already rated by rater {rater!r} in {seen_rows[key]}",
                           "Keep one row per case for each rater; delete or merge the repeated row.")
            else:
                seen_rows[key] = sheet.where(rowno)
            record = _choose_record(sheet, rowno, case_id, records, condition, chosen, issues, outputs)
    if record is not None:
        role, why = _match_role(specialty, record, role_map)
        if role is None:
            issues.add(
                sheet.where(rowno, id_col),
                f"specialty {specialty!r} ({specialty_from}) matches no role of the panel of case {record.case_id!r}: "
                f"{why}; the panel's roles are {[r.name for r in record.roles]}",
                "Name the specialty like the role (a 'Specialty' label above the header), or map it with "
                "--role-map FILE.csv (columns specialty,role).",
            )

    scores: list[tuple[_Column, int | None, bool]] = []
    for col in _COLUMNS[1:-1]:
        crit = by_number[col.number]
        score, not_evaluable, problem = _parse_score(cells[col.index], crit)
        if problem is not None:
            formula = " (A formula whose value was never saved reads as empty: open the workbook in Excel or " \
                      "LibreOffice and save it.)" if problem == "empty cell" and sheet.is_xlsx else ""
            issues.add(sheet.where(rowno, col), problem, _score_fix(crit) + formula)
            continue
        scores.append((col, score, not_evaluable))
    comment = _cell_text(cells[-1])
    if (problem := text_problem(comment)) is not None:
        issues.add(sheet.where(rowno, _COLUMNS[-1]), f"the comment {problem}", TEXT_PROBLEM_FIX)

    if len(issues) > n_before or record is None or role is None or case_id is None:
        return None
    low = [col.letter for col, score, _ in scores if score is not None and score <= 1]
    if low and not comment:
        warnings.append(
            f"{sheet.where(rowno)}: score 0 or 1 in column(s) {', '.join(low)} but no comment in column "
            f"{_COLUMNS[-1].letter}. Add a comment saying what was wrong (consilium paper, physician spreadsheets)."
        )
    kept: list[Rating] = []
    dropped: list[Rating] = []
    for col, score, not_evaluable in scores:
        crit = by_number[col.number]
        if col.component in ("reasoning", "opinion"):
            target_id = record.role_target_id(role, col.component)  # type: ignore[arg-type]
        elif col.component == "final":
            target_id = record.final_target_id()
        else:
            target_id = record.case_target_id()
        try:
            rating = Rating(case_id=case_id, target_id=target_id, rater_id=rater, criterion=crit.criterion_id,
                            score=score, not_evaluable=not_evaluable, comment=comment)
        except ValidationError as exc:  # pragma: no cover - every field was checked above
            issues.add(sheet.where(rowno, col), str(exc), "Correct the cell.")
            return None
        (kept if col.component in crit.components else dropped).append(rating)
    return case_id, kept, dropped


def _choose_record(
    sheet: _Sheet,
    rowno: int,
    case_id: str,
    records: Mapping[str, list[ConsiliumRecord]],
    condition: str | None,
    chosen: dict[str, ConsiliumRecord],
    issues: Problems,
    outputs: Path,
) -> ConsiliumRecord | None:
    id_col = _COLUMNS[0]
    candidates = records.get(case_id, [])
    if not candidates:
        issues.add(sheet.where(rowno, id_col),
                   f"case {case_id!r} has no consilium record in {outputs} (expected a file named "
                   f"{record_file_stem(case_id)}*.json)",
                   "Add the record the physician rated to the outputs folder, or correct the case id.")
        return None
    available = sorted(r.condition for r in candidates)
    if condition is not None:
        picked = [r for r in candidates if r.condition == condition]
        if not picked:
            issues.add(sheet.where(rowno, id_col),
                       f"case {case_id!r} has no consilium record with condition {condition!r} (conditions: {available})",
                       "Pass the --condition the physicians rated, or add that record.")
            return None
        record = picked[0]
    elif len(candidates) > 1:
        issues.add(sheet.where(rowno, id_col),
                   f"case {case_id!r} has {len(candidates)} consilium records (conditions: {available})",
                   "Pass --condition NAME to say which one the physicians rated.")
        return None
    else:
        record = candidates[0]
    chosen.setdefault(case_id, record)
    return record


# --------------------------------------------------------------------------------------------
# Writing and reading back
# --------------------------------------------------------------------------------------------


def write_workbook_import(result: WorkbookImport, path: Path | str, *, overwrite: bool = False) -> Path:
    """Write an import's pack, with ``structural_exclusions.csv``, atomically (see :func:`~evolve.data.write_pack`).

    ``structural_exclusions.csv`` has the header and format of ``ratings.csv``; it is written
    even when empty, so its presence records that the pack came from workbooks.

    Raises:
        PackError: ``path`` is a file, or a non-empty directory and ``overwrite`` is false.
    """
    return write_pack(
        result.pack, path, overwrite=overwrite,
        extra_files={STRUCTURAL_EXCLUSIONS_FILE: _ratings_csv(result.structural_exclusions)},
    )


def load_structural_exclusions(pack_dir: Path | str) -> tuple[Rating, ...]:
    """Read ``structural_exclusions.csv`` of a pack folder (empty if the file is absent).

    These are physicians' cells for (criterion, component) pairs the rubric does not apply;
    they are kept for the record and never used as calibration ratings.

    Raises:
        PackError: Wrong header or a malformed row (file and row are named).
    """
    path = Path(pack_dir) / STRUCTURAL_EXCLUSIONS_FILE
    if not path.is_file():
        return ()
    issues = Problems(f"cannot read {path}", PackError)
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"), newline="")))
    if not rows or tuple(rows[0]) != RATINGS_COLUMNS:
        raise PackError(f"{path}, row 1: header must be exactly {','.join(RATINGS_COLUMNS)}. Re-import the workbooks.")
    out = []
    for rowno, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(RATINGS_COLUMNS):
            issues.add(f"{path.name}, row {rowno}", f"has {len(row)} cells, the header has {len(RATINGS_COLUMNS)}",
                       "Re-import the workbooks.")
            continue
        cells = dict(zip(RATINGS_COLUMNS, row))
        try:
            out.append(Rating(
                case_id=cells.get("case_id", ""), target_id=cells.get("target_id", ""),
                rater_id=cells.get("rater_id", ""), criterion=cells.get("criterion", ""),
                score=int(cells["score"]) if cells.get("score", "").strip() else None,
                not_evaluable=cells.get("not_evaluable", "").strip().lower() == "true",
                comment=cells.get("comment", ""),
            ))
        except (ValidationError, ValueError) as exc:
            issues.add(f"{path.name}, row {rowno}", f"malformed row ({exc})".replace("\n", " "), "Re-import the workbooks.")
    issues.raise_if_any()
    return tuple(out)


_INVALID_SHEET_CHARS = re.compile(r"[\[\]:*?/\\]")


def write_workbook_template(
    path: Path | str,
    *,
    specialty: str,
    rater: str = "",
    case_ids: Sequence[str] = (),
    prompts_root: Path | str | None = None,
    overwrite: bool = False,
    data_rows: int = 200,
) -> Path:
    """Write an empty, correctly headed rating workbook for one specialty (``.xlsx``).

    Layout: row 1 ``Specialty`` | name; row 2 ``Rater`` | id (empty: the importer derives
    ``<file stem>/<specialty>``); row 3 the criterion name above each score column (ignored on
    import); row 4 the header ``case_id``, ``reasoning_1`` ... ``comment`` (A..AC); then one
    row per given case id. Score cells carry a drop-down list (0-3, plus NE where the
    criterion allows it).

    Args:
        path: The ``.xlsx`` file to write.
        specialty: The specialty (matched to a panel role on import).
        rater: Rater id to pre-fill (optional).
        case_ids: Case ids to pre-fill in column A, in order.
        prompts_root: ``judge_prompts`` folder holding the consilium rubric.
        overwrite: Replace an existing file.
        data_rows: How many rows under the header get the drop-down lists (at least the
            number of case ids).

    Raises:
        PackError: The file exists and ``overwrite`` is false, or the name does not end in ``.xlsx``.
        RubricError: The consilium rubric cannot be loaded.
    """
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font
    from openpyxl.worksheet.datavalidation import DataValidation

    path = Path(path)
    if path.suffix.lower() != ".xlsx":
        raise PackError(f"{path}: a workbook template must be an .xlsx file; choose a name ending in .xlsx.")
    if path.exists() and not overwrite:
        raise PackError(f"{path}: file exists; refusing to overwrite it. Pass --overwrite or choose another name.")
    if not specialty.strip():
        raise PackError("workbook template: the specialty is empty; pass --specialty NAME (e.g. Cardiology).")
    rubric = load_rubric(WORKBOOK_RUBRIC_ID, root=Path(prompts_root) if prompts_root is not None else None)
    by_number = _rubric_by_number(rubric)

    book = Workbook()
    ws = book.active
    ws.title = _INVALID_SHEET_CHARS.sub("-", specialty.strip())[:31]
    ws.append(["Specialty", specialty.strip()])
    ws.append(["Rater", rater])
    legend: list[str] = ["criterion"]
    for col in _COLUMNS[1:-1]:
        crit = by_number[col.number]
        mark = "" if col.component == "case" or col.component in crit.components else " (not judged on this component)"
        legend.append(f"{crit.number}. {crit.name}{mark}")
    legend.append("free text; required for any 0 or 1")
    ws.append(legend)
    ws.append(list(WORKBOOK_HEADERS))
    header_row = 4
    for case_id in case_ids:
        ws.append([case_id])
    for cell in ws[header_row]:
        cell.font = Font(bold=True)
    for cell in ws[3]:
        cell.alignment = Alignment(wrap_text=True, vertical="top")
    last = header_row + max(data_rows, len(case_ids))
    with_ne = DataValidation(type="list", formula1='"0,1,2,3,NE"', allow_blank=True)
    numeric = DataValidation(type="list", formula1='"0,1,2,3"', allow_blank=True)
    for validation in (with_ne, numeric):
        validation.error = "Enter 0, 1, 2 or 3" + (" or NE" if validation is with_ne else "")
        ws.add_data_validation(validation)
    for col in _COLUMNS[1:-1]:
        crit = by_number[col.number]
        target = with_ne if crit.allow_not_evaluable else numeric
        target.add(f"{col.letter}{header_row + 1}:{col.letter}{last}")
    ws.column_dimensions["A"].width = 28
    ws.column_dimensions[_COLUMNS[-1].letter].width = 60
    ws.freeze_panes = f"B{header_row + 1}"
    path.parent.mkdir(parents=True, exist_ok=True)
    book.save(path)
    return path
