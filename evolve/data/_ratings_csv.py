"""``ratings.csv`` read and checked column by column, so a pack of 300,000 ratings checks in seconds.

A rating pack's ratings repeat a few values many times (a few thousand targets, tens of raters,
a dozen criteria, a handful of scores), so each check here runs once per *distinct* value or
value pair (a set built at C speed), and only the rows holding a value found wrong are visited
one by one - through the same per-row code as always, so every message is the one a row-by-row
check writes. The file is parsed by the :mod:`csv` module once, streamed in chunks of
:data:`CHUNK_ROWS` rows (memory grows with the columns kept, not with the file's text).

Nothing here builds a :class:`~evolve.data.Rating` per row: :class:`RatingColumns` holds the
parsed values, and :meth:`RatingColumns.ratings` builds the records only for a caller that
needs them (``load_pack``).
"""

from __future__ import annotations

import csv
import gc
import io
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress, islice
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import Field, TypeAdapter, ValidationError

from evolve.data._models import _ID_PATTERN, Rating, Target
from evolve.errors import TEXT_PROBLEM_FIX, text_problem
from evolve.rubric import Rubric

__all__ = ["CHUNK_ROWS", "RATINGS_COLUMNS", "RatingColumns", "RowsRead", "check_rating_texts", "check_ratings_against_rubric",
           "cross_check_ratings", "gc_paused", "rating_counts", "read_rating_columns"]

RATINGS_FILE = "ratings.csv"
TARGETS_FILE = "targets.jsonl"
RATINGS_COLUMNS: tuple[str, ...] = ("case_id", "target_id", "rater_id", "criterion", "score", "not_evaluable", "comment")
"""The exact header of ``ratings.csv``, in order."""

CHUNK_ROWS = 50_000
"""Rows parsed and checked at a time; progress is reported after each full chunk."""

RowsRead = Callable[[int, int, int], None]
"""Progress callback of :func:`read_rating_columns`: ``(rows read, bytes read, file bytes)``."""

_INT_RE = re.compile(r"^[+-]?\d+$")
_ID: TypeAdapter[str] = TypeAdapter(Annotated[str, Field(pattern=_ID_PATTERN)])
_ID_RE = re.compile(_ID_PATTERN.removeprefix("^").removesuffix("$"))  # used with fullmatch: no newline before the end
_BAD = object()  # a cell that does not parse (its problem is reported by the row-by-row code)
_TEXT_FIELDS = ("rater_id", "criterion", "comment")  # ids with a pattern already refuse control characters


class _Sink(Protocol):
    """Where problems go (``evolve.data._pack._Problems``)."""

    def add_at(self, file: str, loc: str | None, field_name: str | None, message: str, fix: str) -> None: ...


AddErrors = Callable[[Any, str, str | None, ValidationError, str], None]
"""Records the pydantic errors of one row: ``(problems, file, "row N", error, schema file name)``."""


@dataclass
class RatingColumns:
    """Valid ratings as columns, in file order (index ``i`` of every list is one rating).

    Attributes:
        rows: Spreadsheet row of each rating (header = row 1; a quoted cell may span lines).
        case_id, target_id, rater_id, criterion, comment: Text cells as read.
        score: Integer score, ``None`` when not evaluable.
        not_evaluable: The not-evaluable flag.
    """

    rows: list[int] = field(default_factory=list)
    case_id: list[str] = field(default_factory=list)
    target_id: list[str] = field(default_factory=list)
    rater_id: list[str] = field(default_factory=list)
    criterion: list[str] = field(default_factory=list)
    score: list[int | None] = field(default_factory=list)
    not_evaluable: list[bool] = field(default_factory=list)
    comment: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def of(cls, ratings: Sequence[Rating], rows: Iterable[int]) -> RatingColumns:
        """The columns of rating records (e.g. a pack in memory), located at ``rows``."""
        return cls(list(rows), [r.case_id for r in ratings], [r.target_id for r in ratings],
                   [r.rater_id for r in ratings], [r.criterion for r in ratings], [r.score for r in ratings],
                   [r.not_evaluable for r in ratings], [r.comment for r in ratings])

    def extend(self, other: RatingColumns) -> None:
        """Append another block of rows."""
        for name in ("rows", *RATINGS_COLUMNS):
            getattr(self, name).extend(getattr(other, name))

    def ratings(self) -> tuple[Rating, ...]:
        """One :class:`Rating` per row (validated by pydantic, about 4 microseconds each)."""
        return tuple(Rating(case_id=c, target_id=t, rater_id=r, criterion=k, score=s, not_evaluable=n, comment=m)
                     for c, t, r, k, s, n, m in zip(self.case_id, self.target_id, self.rater_id, self.criterion,
                                                     self.score, self.not_evaluable, self.comment))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a pack is read and checked.

    Reading a large pack allocates millions of small lists and tuples (rows, keys, records) and
    no reference cycles; each time enough are allocated the collector walks every live object,
    so with it running a 300,000-row pack spent most of its time (and time growing faster than
    the row count) in collections. Reference counting still frees everything; the collector's
    previous state is restored on exit, also when an error is raised.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def read_rating_columns(path: Path, problems: _Sink, add_errors: AddErrors,
                        progress: RowsRead | None = None) -> RatingColumns | None:
    """Parse and check ``ratings.csv`` (one pass, in chunks); record every bad row in ``problems``.

    Args:
        path: The file.
        problems: Receives each problem with its row and field.
        add_errors: Records a pydantic error of a row (the pack's own formatter).
        progress: Called after each full chunk of :data:`CHUNK_ROWS` rows with rows read, bytes
            read and the file's size (never for a file of fewer rows).

    Returns:
        The valid rows, or ``None`` when the rows cannot be interpreted (no header, a wrong
        header, not UTF-8, a quote never closed).
    """
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 26))  # long physician comments are fine
    size = path.stat().st_size
    with open(path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline=None)  # line ends as read_text gives them
        reader = csv.reader(text, strict=True)
        try:
            return _read_rows(reader, problems, add_errors, lambda rows: progress and progress(rows, raw.tell(), size))
        except UnicodeDecodeError as exc:
            problems.add_at(RATINGS_FILE, None, None, f"not UTF-8 text ({exc.reason})", "Save the file as UTF-8.")
        except csv.Error as exc:  # an unclosed quote at the end, a cell over the size limit
            problems.add_at(
                RATINGS_FILE, f"line {reader.line_num}", None,
                f"cannot be parsed as CSV ({exc}); a quote opened on or before this line is never closed, so the "
                "rest of the file would be read into one cell",
                "Close the quote (a quote inside a quoted cell is written twice: \"\"), then check again.",
            )
    return None


def _read_rows(reader: Any, problems: _Sink, add_errors: AddErrors, step: Callable[[int], Any]) -> RatingColumns | None:
    header = next(reader, None)
    if header is None:
        problems.add_at(RATINGS_FILE, "row 1", None, "the file is empty", f"Write the header line: {','.join(RATINGS_COLUMNS)}")
        return None
    if tuple(header) != RATINGS_COLUMNS:
        problems.add_at(
            RATINGS_FILE, "row 1", "header",
            f"header is {','.join(header)!r} but must be exactly {','.join(RATINGS_COLUMNS)!r}",
            "Rename/reorder the columns to match (rows were not read).",
        )
        return None
    out, first, shared = RatingColumns(), 2, dict[str, str]()
    while chunk := list(islice(reader, CHUNK_ROWS)):
        out.extend(_check_chunk(chunk, first, problems, add_errors, shared))
        first += len(chunk)
        if len(chunk) == CHUNK_ROWS:  # more rows may follow: a file of one chunk reports nothing
            step(first - 2)
    return out


def _check_chunk(chunk: list[list[str]], first: int, problems: _Sink, add_errors: AddErrors,
                 shared: dict[str, str]) -> RatingColumns:
    """The valid rows of one chunk (rows numbered from ``first``); the others' problems recorded.
    ``shared`` maps each id seen so far to its one string object."""
    width = len(RATINGS_COLUMNS)
    numbers: Sequence[int]
    cells: Sequence[list[str]]
    if set(map(len, chunk)) == {width}:  # the usual case: no row to drop before transposing
        numbers, cells = range(first, first + len(chunk)), chunk
    else:
        rows = [(no, row) for no, row in enumerate(chunk, start=first) if len(row) == width or _odd_row(no, row, problems)]
        if not rows:
            return RatingColumns()
        numbers, cells = zip(*rows)
    case_cells, target_cells, rater_cells, criterion_cells, score_text, flag_text, comment = zip(*cells)
    # One string object per distinct id: memory holds each id once, and the sets and dicts below
    # hash each only once.
    case_id, target_id, rater_id, criterion = (list(map(shared.setdefault, column, column))
                                               for column in (case_cells, target_cells, rater_cells, criterion_cells))
    blank = {v for v in set(case_id) if not v.strip()}  # a row of empty cells is skipped
    flags = {v: _parse_bool(v) for v in set(flag_text)}
    scores = {v: _parse_score(v) for v in set(score_text)}
    not_evaluable, score = list(map(flags.__getitem__, flag_text)), list(map(scores.__getitem__, score_text))
    suspect = _suspects(
        [(case_id, blank), (flag_text, {v for v, b in flags.items() if b is None}),
         (score_text, {v for v, s in scores.items() if s is _BAD}),
         (case_id, _bad_ids(case_id)), (target_id, _bad_ids(target_id)),
         (rater_id, {v for v in set(rater_id) if not v}), (criterion, {v for v in set(criterion) if not v})],
        not_evaluable, score,
    )
    keep = [True] * len(numbers)
    for i in sorted(suspect):  # the row-by-row path: skips blank rows, words every problem
        keep[i] = _row_rating(numbers[i], cells[i], problems, add_errors) is not None
    if not suspect:
        return RatingColumns(list(numbers), case_id, target_id, rater_id, criterion, score, not_evaluable,  # type: ignore[arg-type]
                             list(comment))  # no suspect row: every flag parsed
    return RatingColumns(*(list(compress(column, keep)) for column in (numbers, case_id, target_id, rater_id, criterion,
                                                                       score, not_evaluable, comment)))


def _odd_row(rowno: int, row: list[str], problems: _Sink) -> bool:
    """Record a row with the wrong number of cells (unless it is blank); always ``False``."""
    if row and any(cell.strip() for cell in row):
        problems.add_at(
            RATINGS_FILE, f"row {rowno}", None,
            f"has {len(row)} cells but the header has {len(RATINGS_COLUMNS)}",
            "Quote cells that contain commas or line breaks, and give every column a cell.",
        )
    return False


def _bad_ids(values: Sequence[str]) -> set[str]:
    """The distinct ids that break the id pattern (the regex decides fast; pydantic confirms)."""
    bad = set()
    for value in {v for v in set(values) if not _ID_RE.fullmatch(v)}:
        try:
            _ID.validate_python(value)
        except ValidationError:
            bad.add(value)
    return bad


def _suspects(checks: list[tuple[Sequence[str], set[str]]], not_evaluable: list[bool | None],
              score: list[Any]) -> set[int]:
    """Indices of rows holding a value found wrong, or a score and flag that contradict."""
    out: set[int] = set()
    for column, bad in checks:
        if bad:
            out.update(i for i, v in enumerate(column) if v in bad)
    if any(n is not None and s is not _BAD and n == (s is not None) for n, s in set(zip(not_evaluable, score))):
        out.update(i for i, (n, s) in enumerate(zip(not_evaluable, score)) if n is not None and n == (s is not None))
    return out


def _parse_bool(text: str) -> bool | None:
    low = text.strip().lower()
    if low == "true":
        return True
    if low == "false":
        return False
    return None


def _parse_score(text: str) -> Any:
    """``None`` for an empty cell, the integer, or ``_BAD``."""
    stripped = text.strip()
    if not stripped:
        return None
    return int(stripped) if _INT_RE.match(stripped) else _BAD


def _row_rating(rowno: int, row: Sequence[str], problems: _Sink, add_errors: AddErrors) -> Rating | None:
    """One row checked on its own (blank rows give ``None`` silently); every problem recorded."""
    if all(not cell.strip() for cell in row):
        return None
    cells = dict(zip(RATINGS_COLUMNS, row))
    ok = True
    not_evaluable = _parse_bool(cells["not_evaluable"])
    if not_evaluable is None:
        problems.add_at(RATINGS_FILE, f"row {rowno}", "not_evaluable", f"{cells['not_evaluable']!r} is not a boolean",
                        "Write true or false.")
        ok = False
    score = _parse_score(cells["score"])
    if score is _BAD:
        problems.add_at(
            RATINGS_FILE, f"row {rowno}", "score", f"{cells['score'].strip()!r} is not an integer",
            "Write a whole number on the criterion's scale, or leave it empty and set not_evaluable=true.",
        )
        ok = False
    if not ok:
        return None
    try:
        return Rating(case_id=cells["case_id"], target_id=cells["target_id"], rater_id=cells["rater_id"],
                      criterion=cells["criterion"], score=score, not_evaluable=bool(not_evaluable), comment=cells["comment"])
    except ValidationError as exc:
        add_errors(problems, RATINGS_FILE, f"row {rowno}", exc, "rating.schema.json")
        return None


# --------------------------------------------------------------------------------------------
# Checks across rows and files
# --------------------------------------------------------------------------------------------


def _rows_where(keys: Iterable[Any], bad: set[Any] | dict[Any, Any]) -> list[int]:
    return [i for i, key in enumerate(keys) if key in bad]


def check_rating_texts(cols: RatingColumns, problems: _Sink) -> None:
    """Refuse control and bidirectional-override characters in rater ids, criteria and comments
    (:func:`evolve.errors.text_problem`: one regex pass over each column joined, rows visited
    only when it finds one)."""
    for name in _TEXT_FIELDS:
        column: list[str] = getattr(cols, name)
        values = set(column) if name != "comment" else column
        if text_problem("\n".join(values)) is None:
            continue
        label = name.replace("_", " ") if name != "comment" else "comment"
        for i, value in enumerate(column):
            found = text_problem(value)
            if found:
                problems.add_at(RATINGS_FILE, f"row {cols.rows[i]}", name, f"the {label} {found}", TEXT_PROBLEM_FIX)


def cross_check_ratings(cols: RatingColumns, target_by_id: dict[str, tuple[int, Target]], problems: _Sink) -> None:
    """Every (target, rater, criterion) rated once; every target known; case ids agree."""
    keys = list(zip(cols.target_id, cols.rater_id, cols.criterion))
    if len(dict.fromkeys(keys)) != len(keys):
        first: dict[tuple[str, str, str], int] = {}
        for rowno, key in zip(cols.rows, keys):
            if key in first:
                problems.add_at(
                    RATINGS_FILE, f"row {rowno}", "rater_id",
                    f"duplicate rating of target {key[0]!r} by rater {key[1]!r} on criterion "
                    f"{key[2]!r} (first in row {first[key]})",
                    "Keep one rating per (target_id, rater_id, criterion); delete or re-assign the repeat.",
                )
            else:
                first[key] = rowno
    pairs = zip(cols.target_id, cols.case_id)
    wrong = {p for p in set(zip(cols.target_id, cols.case_id))
             if p[0] not in target_by_id or target_by_id[p[0]][1].case_id != p[1]}
    for i in _rows_where(pairs, wrong) if wrong else ():
        target_id, case_id, rowno = cols.target_id[i], cols.case_id[i], cols.rows[i]
        hit = target_by_id.get(target_id)
        if hit is None:
            problems.add_at(RATINGS_FILE, f"row {rowno}", "target_id", f"unknown target_id {target_id!r} (not in {TARGETS_FILE})",
                            f"Add the target to {TARGETS_FILE} or correct the id.")
        else:
            problems.add_at(
                RATINGS_FILE, f"row {rowno}", "case_id",
                f"case_id {case_id!r} differs from the case of target {target_id!r} ({hit[1].case_id!r}, {TARGETS_FILE} line {hit[0]})",
                "Set case_id to the target's case.",
            )


def check_ratings_against_rubric(cols: RatingColumns, rubric: Rubric, target_by_id: dict[str, tuple[int, Target]],
                                 unknown_component_targets: set[str], problems: _Sink) -> None:
    """Criteria in the rubric, scores on their scales, criteria applicable to the target's component."""
    criteria = {c.criterion_id: c for c in rubric.criteria}
    unknown = {k for k in set(cols.criterion) if k not in criteria}
    for i in _rows_where(cols.criterion, unknown) if unknown else ():
        problems.add_at(
            RATINGS_FILE, f"row {cols.rows[i]}", "criterion",
            f"criterion {cols.criterion[i]!r} is not in rubric {rubric.id!r} version {rubric.version!r} (known: {sorted(criteria)})",
            "Use a criterion id from the rubric, or point pack.json at the right rubric.",
        )
    off_scale = {(k, s) for k, s in set(zip(cols.criterion, cols.score)) if k in criteria and s is not None
                 and not criteria[k].scale_min <= s <= criteria[k].scale_max}
    for i in _rows_where(zip(cols.criterion, cols.score), off_scale) if off_scale else ():
        crit = criteria[cols.criterion[i]]
        problems.add_at(
            RATINGS_FILE, f"row {cols.rows[i]}", "score",
            f"score {cols.score[i]} is outside the scale {crit.scale_min}..{crit.scale_max} of criterion {crit.criterion_id!r}",
            f"Use an integer from {crit.scale_min} to {crit.scale_max}, or leave score empty and set not_evaluable=true.",
        )
    component_of = {t: hit[1].component for t, hit in target_by_id.items() if t not in unknown_component_targets}
    components = list(map(component_of.get, cols.target_id))  # None: target unknown (reported above)
    inapplicable = {(c, k) for c, k in set(zip(components, cols.criterion))
                    if c is not None and k in criteria and c not in criteria[k].components}
    for i in _rows_where(zip(components, cols.criterion), inapplicable) if inapplicable else ():
        crit, target_id = criteria[cols.criterion[i]], cols.target_id[i]
        problems.add_at(
            RATINGS_FILE, f"row {cols.rows[i]}", "criterion",
            f"criterion {crit.criterion_id!r} does not apply to component {components[i]!r} of target "
            f"{target_id!r} (it applies to {list(crit.components)}); the pair is structurally inapplicable",
            "Delete the rating, or fix the target's component in targets.jsonl.",
        )


# --------------------------------------------------------------------------------------------
# Counts
# --------------------------------------------------------------------------------------------


def rating_counts(cols: RatingColumns) -> dict[str, Any]:
    """The rating counts of a :class:`~evolve.data.PackSummary` (``n_ratings`` ... ``score_counts``).

    One pass over the rows (a count per distinct criterion, rater and score); every other count
    is summed from those. A rating is not evaluable exactly when it has no score (the
    :class:`~evolve.data.Rating` model enforces it).
    """
    by_cell = Counter(zip(cols.criterion, cols.rater_id, cols.score))
    scores: dict[str, dict[str, Counter[int | None]]] = {}
    for (crit, rater, score), n in by_cell.items():
        scores.setdefault(crit, {}).setdefault(rater, Counter())[score] += n
    score_counts = {
        crit: {
            rater: {
                **{str(s): counts[s] for s in sorted(k for k in counts if k is not None)},
                **({"not_evaluable": counts[None]} if None in counts else {}),
            }
            for rater, counts in sorted(by_rater.items())
        }
        for crit, by_rater in scores.items()
    }
    per_rater: Counter[str] = Counter()
    per_criterion: Counter[str] = Counter()
    for (crit, rater, _score), n in by_cell.items():  # one entry per distinct cell, in first-seen order
        per_rater[rater] += n
        per_criterion[crit] += n
    return {
        "n_ratings": len(cols),
        "n_not_evaluable": sum(n for (_, _, score), n in by_cell.items() if score is None),
        "raters": tuple(sorted(per_rater)),
        "criteria": tuple(per_criterion),
        "ratings_per_criterion": dict(per_criterion),
        "ratings_per_rater": dict(sorted(per_rater.items())),
        "score_counts": score_counts,
    }
