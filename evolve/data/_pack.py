"""Reading, writing and validating rating packs (the on-disk exchange format for ratings).

A pack is a directory::

    pack.json      PackManifest (JSON, indent 2)
    cases.jsonl    one Case per line, in source order
    targets.jsonl  one Target per line, in source order
    ratings.csv    one Rating per row (long table), header = RATINGS_COLUMNS

Validation collects every problem it can find before raising one :class:`PackError`; each
problem names the file, the 1-based line (JSONL) or row (CSV, header = row 1, as a
spreadsheet shows it), the field, and how to fix it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from evolve.data._models import PACK_FORMAT_VERSION, Case, PackManifest, Rating, RubricRef, Target
from evolve.data._ratings_csv import (
    RATINGS_COLUMNS,
    RatingColumns,
    RowsRead,
    check_rating_texts,
    check_ratings_against_rubric,
    cross_check_ratings,
    gc_paused,
    rating_counts,
    read_rating_columns,
)
from evolve.errors import TEXT_PROBLEM_FIX, PackError, Problems, RubricError, path_problem, text_problem
from evolve.records import Record
from evolve.rubric import Rubric, RubricBundle, load_rubric
from evolve.runs import replace_folder

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "CASES_FILE",
    "MANIFEST_FILE",
    "MAX_REPORTED_PROBLEMS",
    "RATINGS_COLUMNS",
    "RATINGS_FILE",
    "TARGETS_FILE",
    "PackSummary",
    "RatingPack",
    "check_pack",
    "load_pack",
    "pack_json_schemas",
    "summarize_pack",
    "validate_pack",
    "write_pack",
    "write_pack_schemas",
]

MANIFEST_FILE = "pack.json"
CASES_FILE = "cases.jsonl"
TARGETS_FILE = "targets.jsonl"
RATINGS_FILE = "ratings.csv"
PACK_FILES = (MANIFEST_FILE, CASES_FILE, TARGETS_FILE, RATINGS_FILE)

MAX_REPORTED_PROBLEMS = 20
"""How many problems a :class:`PackError` message lists before summarising the rest as a count."""

_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


# --------------------------------------------------------------------------------------------
# The in-memory pack
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class RatingPack:
    """A rating pack in memory: manifest, cases, targets and ratings, each in source order.

    Build one with :func:`load_pack` or an importer (``import_kqa``, ``import_savage``);
    constructing it directly does not validate anything (call :func:`validate_pack`).

    Attributes:
        path: Directory the pack was loaded from or last written to; ``None`` for a pack that
            only exists in memory. Not part of equality.
        manifest: The ``pack.json`` record.
        cases: Cases in source order.
        targets: Targets in source order.
        ratings: Ratings in source order.
    """

    path: Path | None = field(compare=False)
    manifest: PackManifest
    cases: tuple[Case, ...]
    targets: tuple[Target, ...]
    ratings: tuple[Rating, ...]

    def __post_init__(self) -> None:
        # Accept any iterable / path-like and normalise, so callers may pass lists.
        object.__setattr__(self, "path", Path(self.path) if self.path is not None else None)
        object.__setattr__(self, "cases", tuple(self.cases))
        object.__setattr__(self, "targets", tuple(self.targets))
        object.__setattr__(self, "ratings", tuple(self.ratings))

    def __repr__(self) -> str:
        """One line, whatever the pack's size: name, rubric, counts and folder (the records are
        in :attr:`cases`, :attr:`targets` and :attr:`ratings`)."""
        where = str(self.path) if self.path is not None else "in memory"
        rubric = self.manifest.rubric
        return (f"RatingPack({self.manifest.name!r}: rubric {rubric.id} v{rubric.version}, {len(self.cases)} cases, "
                f"{len(self.targets)} targets, {len(self.ratings)} ratings; {where})")

    # -- lookups (indices are built once, lazily) -------------------------------------------

    @cached_property
    def _case_index(self) -> dict[str, Case]:
        return {c.case_id: c for c in self.cases}

    @cached_property
    def _target_index(self) -> dict[str, Target]:
        return {t.target_id: t for t in self.targets}

    @cached_property
    def _targets_by_case(self) -> dict[str, tuple[Target, ...]]:
        out: dict[str, list[Target]] = {}
        for t in self.targets:
            out.setdefault(t.case_id, []).append(t)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def _ratings_by_criterion(self) -> dict[str, tuple[Rating, ...]]:
        out: dict[str, list[Rating]] = {}
        for r in self.ratings:
            out.setdefault(r.criterion, []).append(r)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def _ratings_by_target(self) -> dict[str, tuple[Rating, ...]]:
        out: dict[str, list[Rating]] = {}
        for r in self.ratings:
            out.setdefault(r.target_id, []).append(r)
        return {k: tuple(v) for k, v in out.items()}

    @property
    def name(self) -> str:
        """The pack name from the manifest (``pack.json: name``)."""
        return self.manifest.name

    @property
    def case_ids(self) -> tuple[str, ...]:
        """All case ids, in source order."""
        return tuple(c.case_id for c in self.cases)

    def case(self, case_id: str) -> Case:
        """Return the case with this id.

        Raises:
            KeyError: No such case in the pack.
        """
        try:
            return self._case_index[case_id]
        except KeyError:
            raise KeyError(f"no case {case_id!r} in pack {self.manifest.name!r}") from None

    def target(self, target_id: str) -> Target:
        """Return the target with this id.

        Raises:
            KeyError: No such target in the pack.
        """
        try:
            return self._target_index[target_id]
        except KeyError:
            raise KeyError(f"no target {target_id!r} in pack {self.manifest.name!r}") from None

    def targets_of_case(self, case_id: str) -> tuple[Target, ...]:
        """The targets of one case, in source order (empty if the case has none).

        Raises:
            KeyError: No such case in the pack.
        """
        self.case(case_id)
        return self._targets_by_case.get(case_id, ())

    def ratings_of(self, criterion: str) -> tuple[Rating, ...]:
        """All ratings on one criterion, in source order (empty if nobody rated it)."""
        return self._ratings_by_criterion.get(criterion, ())

    def ratings_of_target(self, target_id: str) -> tuple[Rating, ...]:
        """All ratings of one target (every rater, every criterion), in source order."""
        return self._ratings_by_target.get(target_id, ())

    @property
    def raters(self) -> tuple[str, ...]:
        """Distinct rater ids, sorted."""
        return tuple(sorted({r.rater_id for r in self.ratings}))

    @property
    def criteria(self) -> tuple[str, ...]:
        """Distinct criteria that have ratings, in order of first appearance."""
        return tuple(dict.fromkeys(r.criterion for r in self.ratings))

    def ratings_frame(self) -> pd.DataFrame:
        """The ratings as a pandas DataFrame with the ``ratings.csv`` columns.

        ``score`` is a nullable integer column (``Int64``; missing when not evaluable) and
        ``not_evaluable`` is boolean. Rows keep source order.
        """
        import pandas as pd

        frame = pd.DataFrame(
            [r.model_dump() for r in self.ratings],
            columns=list(RATINGS_COLUMNS),
        )
        frame["score"] = frame["score"].astype("Int64")
        frame["not_evaluable"] = frame["not_evaluable"].astype(bool)
        return frame

    @classmethod
    def from_frame(
        cls,
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
    ) -> RatingPack:
        """A validated pack from a table of ratings in memory (a pandas DataFrame); writes nothing.

        A thin front of :func:`evolve.data.import_frame` (which also returns the counts of
        what was read): long tables hold one rating per row, wide tables one score column per
        criterion; columns are mapped by field (``case``, ``case_text``, ``target``,
        ``target_text``, ``rater``, ``criterion``, ``score``, ...).

        Example::

            pack = RatingPack.from_frame(df, rubric=my_rubric, name="my-ratings",
                                         columns={"case_text": "question", "target_text": "answer"})

        Raises:
            PackError: Any bad or unmapped value, each named by row (``row i + 2``) and column.
            RubricError: ``rubric`` is an id that cannot be loaded.
        """
        from evolve.data._table import import_frame

        return import_frame(
            frame, rubric=rubric, name=name, columns=columns, layout=layout, not_evaluable=not_evaluable,
            score_map=score_map, skip_empty=skip_empty, prompts_root=prompts_root, description=description,
            source=source,
        ).pack

    def subset(self, case_ids: Iterable[str]) -> RatingPack:
        """A pack restricted to some cases (with their targets and ratings), in source order.

        The manifest is kept unchanged and ``path`` is ``None``.

        Raises:
            KeyError: A case id is not in the pack.
        """
        wanted = set(case_ids)
        unknown = sorted(wanted - set(self._case_index))
        if unknown:
            raise KeyError(f"cases not in pack {self.manifest.name!r}: {unknown[:10]}")
        return RatingPack(
            path=None,
            manifest=self.manifest,
            cases=tuple(c for c in self.cases if c.case_id in wanted),
            targets=tuple(t for t in self.targets if t.case_id in wanted),
            ratings=tuple(r for r in self.ratings if r.case_id in wanted),
        )


# --------------------------------------------------------------------------------------------
# Problem collection
# --------------------------------------------------------------------------------------------


_FILE_RANK = {name: rank for rank, name in enumerate(PACK_FILES)}


class _Problems(Problems):
    """Problems of a rating pack, located by file, line/row and field, reported in file order,
    then line order (one :class:`PackError`)."""

    def __init__(self, where: str, *, heading: str = "rating pack {where} is invalid") -> None:
        super().__init__(heading.format(where=where), PackError, MAX_REPORTED_PROBLEMS)

    def add_at(self, file: str, loc: str | None, field_name: str | None, message: str, fix: str) -> None:
        """Record a problem at ``file``, ``loc`` (e.g. ``line 3``) and ``field_name``."""
        where = ", ".join([file, *([loc] if loc else []), *([f"field '{field_name}'"] if field_name else [])])
        number = re.search(r"\d+", loc or "")
        self.add(where, message, fix, order=(_FILE_RANK.get(file, len(_FILE_RANK)), int(number.group()) if number else 0))

    def has_file(self, file: str) -> bool:
        """Whether a problem of pack file ``file`` was recorded."""
        rank = _FILE_RANK[file]
        return any(order[:1] == (rank,) for order, _, _ in self._items)


def _fix_for(error_type: str, schema: str) -> str:
    if error_type == "missing":
        return "Add the field."
    if error_type == "extra_forbidden":
        return f"Remove the field (it is not part of the format; see ratings/schema/{schema})."
    return f"Correct the value (see ratings/schema/{schema})."


def _add_validation_errors(
    problems: _Problems, file: str, loc: str | None, exc: ValidationError, schema: str, prefix: str = ""
) -> None:
    for err in exc.errors():
        field_name = prefix + ".".join(str(p) for p in err["loc"]) if err["loc"] else None
        msg = err["msg"]
        if err["type"] == "value_error" and msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if field_name is None and schema == "rating.schema.json":
            field_name = "score/not_evaluable"
        problems.add_at(file, loc, field_name, msg, _fix_for(err["type"], schema))


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _read_manifest(path: Path, problems: _Problems) -> PackManifest | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        problems.add_at(MANIFEST_FILE, f"line {exc.lineno}", None, f"invalid JSON ({exc.msg})", "Fix the JSON syntax.")
        return None
    except UnicodeDecodeError as exc:
        problems.add_at(MANIFEST_FILE, None, None, f"not UTF-8 text ({exc.reason})", "Save the file as UTF-8.")
        return None
    if not isinstance(raw, dict):
        problems.add_at(MANIFEST_FILE, "line 1", None, "expected a JSON object", "Write the manifest as one JSON object.")
        return None
    version = raw.get("version", PACK_FORMAT_VERSION)
    if version != PACK_FORMAT_VERSION:
        problems.add_at(
            MANIFEST_FILE,
            None,
            "version",
            f"unsupported pack format version {version!r}; this toolkit reads version {PACK_FORMAT_VERSION}",
            "Re-import the source data with this version of evolve, or upgrade evolve.",
        )
        problems.raise_if_any()  # a different format cannot be read further
    try:
        return PackManifest.model_validate(raw)
    except ValidationError as exc:
        _add_validation_errors(problems, MANIFEST_FILE, None, exc, "pack.schema.json")
        return None


def _read_jsonl(path: Path, model: type[BaseModel], schema: str, problems: _Problems) -> list[tuple[int, Any]]:
    """Parse one JSONL file into ``(line_number, record)`` pairs; blank lines are skipped."""
    out: list[tuple[int, Any]] = []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.add_at(path.name, None, None, f"not UTF-8 text ({exc.reason})", "Save the file as UTF-8.")
        return out
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add_at(
                path.name,
                f"line {lineno}",
                None,
                f"malformed JSON at column {exc.colno} ({exc.msg})",
                "Write exactly one JSON object per line.",
            )
            continue
        if not isinstance(raw, dict):
            problems.add_at(
                path.name, f"line {lineno}", None, f"expected a JSON object, got {type(raw).__name__}",
                "Write exactly one JSON object per line.",
            )
            continue
        try:
            record = model.model_validate(raw)
        except ValidationError as exc:
            _add_validation_errors(problems, path.name, f"line {lineno}", exc, schema)
            continue
        if _texts_are_plain(record, path.name, lineno, problems):
            out.append((lineno, record))
    return out


def _texts_are_plain(record: BaseModel, file: str, lineno: int, problems: _Problems) -> bool:
    """Whether every text field of a case/target record is free of control and bidirectional-override
    characters (:func:`evolve.errors.text_problem`); each one found is recorded with its field."""
    found = [(name, problem) for name, value in record if (problem := text_problem(value)) is not None]
    for name, problem in found:
        problems.add_at(file, f"line {lineno}", name, f"the text {problem}", TEXT_PROBLEM_FIX)
    return not found


def _resolve_pack_dir(path: Path | str) -> Path:
    path = Path(path)
    if path.is_file() and path.name == MANIFEST_FILE:
        path = path.parent
    return path


@dataclass(frozen=True)
class _Read:
    """A pack as read from disk, before the checks across files (``manifest`` is ``None`` when
    unreadable, ``ratings`` ``None`` when ``ratings.csv``'s rows could not be interpreted)."""

    root: Path
    manifest: PackManifest | None
    cases: list[tuple[int, Case]]
    targets: list[tuple[int, Target]]
    ratings: RatingColumns | None


def _read_pack(root: Path, problems: _Problems, progress: RowsRead | None) -> _Read:
    """Read the four files of a pack, recording every problem (raises only when files are missing)."""
    if (problem := path_problem(root, "folder")) is not None:
        problems.add_at(
            str(root), None, None, "no such pack directory" if problem == "does not exist" else f"the pack {problem}",
            "Pass the folder that holds pack.json, cases.jsonl, targets.jsonl and ratings.csv.",
        )
        problems.raise_if_any()
    for name in PACK_FILES:
        if (problem := path_problem(root / name)) is not None:
            problems.add_at(name, None, None, "file is missing" if problem == "does not exist" else problem.split(":")[0],
                            "Every pack needs pack.json, cases.jsonl, targets.jsonl and ratings.csv as files; re-write the pack.")
    problems.raise_if_any()
    return _Read(
        root,
        _read_manifest(root / MANIFEST_FILE, problems),
        _read_jsonl(root / CASES_FILE, Case, "case.schema.json", problems),
        _read_jsonl(root / TARGETS_FILE, Target, "target.schema.json", problems),
        read_rating_columns(root / RATINGS_FILE, problems, _add_validation_errors, progress),
    )


def _refuse_empty(read: _Read, problems: _Problems) -> None:
    """Record a pack with nothing to rate or nothing rated (only when its files were readable)."""
    fix = ("A pack to check or calibrate on needs cases, targets and ratings; import the ratings again "
           "(`evolve ratings import ...`) or pass the pack that holds them.")
    if not read.cases and not problems.has_file(CASES_FILE):
        problems.add_at(CASES_FILE, None, None, "holds no cases", fix)
    if not read.targets and not problems.has_file(TARGETS_FILE):
        problems.add_at(TARGETS_FILE, None, None, "holds no targets", fix)
    if read.ratings is not None and not read.ratings and not problems.has_file(RATINGS_FILE):
        problems.add_at(RATINGS_FILE, None, None, "holds no ratings (no row after the header)", fix)


def load_pack(
    path: Path | str,
    *,
    prompts_root: Path | str | None = None,
    check_rubric: bool = True,
    require_ratings: bool = False,
) -> RatingPack:
    """Read and validate a rating pack directory.

    Args:
        path: The pack directory (or its ``pack.json``).
        prompts_root: ``judge_prompts`` folder holding the pack's rubric; defaults to the
            project's.
        check_rubric: Also check criteria, score scales and components against the rubric
            named in ``pack.json`` (requires the rubric to exist in the right version).
        require_ratings: Refuse a pack without cases, targets or ratings (what calibration
            needs); by default a pack of targets not rated yet (``evolve bench run`` writes
            them) loads.

    Raises:
        PackError: Anything malformed or inconsistent; the message lists every problem found
            (the first :data:`MAX_REPORTED_PROBLEMS`, then a count), each naming the file,
            the line/row and the field.
    """
    root = _resolve_pack_dir(path)
    problems = _Problems(str(root))
    with gc_paused():
        read = _read_pack(root, problems, None)
        _check_read(read, problems, prompts_root=prompts_root, check_rubric=check_rubric, require_ratings=require_ratings)
        assert read.manifest is not None  # a missing manifest is a problem, raised above
        return RatingPack(
            path=read.root,
            manifest=read.manifest,
            cases=tuple(c for _, c in read.cases),
            targets=tuple(t for _, t in read.targets),
            ratings=read.ratings.ratings() if read.ratings is not None else (),
        )


def _check_read(read: _Read, problems: _Problems, *, prompts_root: Path | str | None, check_rubric: bool,
                require_ratings: bool) -> None:
    """The checks across files of a pack read from disk; raises the problems found in all."""
    ratings = read.ratings if read.ratings is not None else RatingColumns()
    _cross_check(read.manifest, read.cases, read.targets, ratings, problems, prompts_root=prompts_root,
                 check_rubric=check_rubric)
    if require_ratings:
        _refuse_empty(read, problems)
    problems.raise_if_any()


def validate_pack(
    pack: RatingPack,
    *,
    prompts_root: Path | str | None = None,
    check_rubric: bool = True,
    rubric: Rubric | None = None,
) -> None:
    """Run the cross-record checks of :func:`load_pack` on an in-memory pack.

    Locations in the message are those the records would have once written by
    :func:`write_pack` (line ``i + 1`` of the JSONL files, row ``i + 2`` of ``ratings.csv``).

    Args:
        pack: The pack.
        prompts_root: Where to look the pack's rubric up first (unless ``rubric`` is given).
        check_rubric: Check criteria, scales and components against the rubric.
        rubric: Check against this rubric object (in memory, nothing on disk needed) instead of
            loading the one ``pack.json`` names; its id and version must match the manifest's.

    Raises:
        PackError: The pack is inconsistent (all problems are listed).
    """
    problems = _Problems(str(pack.path) if pack.path is not None else f"{pack.manifest.name!r} (in memory)")
    with gc_paused():
        _cross_check(
            pack.manifest,
            [(i + 1, c) for i, c in enumerate(pack.cases)],
            [(i + 1, t) for i, t in enumerate(pack.targets)],
            RatingColumns.of(pack.ratings, range(2, len(pack.ratings) + 2)),
            problems,
            prompts_root=prompts_root,
            check_rubric=check_rubric,
            rubric=rubric,
        )
    problems.raise_if_any()


def _cross_check(
    manifest: PackManifest | None,
    cases: Sequence[tuple[int, Case]],
    targets: Sequence[tuple[int, Target]],
    ratings: RatingColumns,
    problems: _Problems,
    *,
    prompts_root: Path | str | None,
    check_rubric: bool,
    rubric: Rubric | None = None,
) -> None:
    target_by_id = _check_ids(cases, targets, problems)
    check_rating_texts(ratings, problems)
    cross_check_ratings(ratings, target_by_id, problems)
    if manifest is None or not check_rubric:
        return

    if rubric is not None and (rubric.id, rubric.version) != (manifest.rubric.id, manifest.rubric.version):
        problems.add_at(
            MANIFEST_FILE, None, "rubric",
            f"names rubric {manifest.rubric.id!r} version {manifest.rubric.version!r}, but the pack is checked "
            f"against rubric {rubric.id!r} version {rubric.version!r}",
            "Set pack.json 'rubric' to the rubric's id and version, or check against the right rubric.",
        )
        return
    rubric = rubric or _load_rubric_for(manifest, prompts_root, problems)
    if rubric is None:
        return

    # Targets whose component the rubric does not know at all.
    known_components = set(rubric.components)
    unknown_component_targets: set[str] = set()
    for lineno, target in targets:
        if target.component not in known_components:
            unknown_component_targets.add(target.target_id)
            problems.add_at(
                TARGETS_FILE, f"line {lineno}", "component",
                f"component {target.component!r} is not a component of rubric {rubric.id!r} "
                f"(known: {sorted(known_components)})",
                "Use one of the rubric's components, or add the component to the rubric.",
            )
    check_ratings_against_rubric(ratings, rubric, target_by_id, unknown_component_targets, problems)


def _check_ids(cases: Sequence[tuple[int, Case]], targets: Sequence[tuple[int, Target]],
               problems: _Problems) -> dict[str, tuple[int, Target]]:
    """Unique case ids; unique target ids whose case exists. Returns ``target_id -> (line, target)``."""
    case_line: dict[str, int] = {}
    for lineno, case in cases:
        if case.case_id in case_line:
            problems.add_at(
                CASES_FILE, f"line {lineno}", "case_id",
                f"duplicate case_id {case.case_id!r} (first on line {case_line[case.case_id]})",
                "Give every case a unique case_id or remove the repeated line.",
            )
        else:
            case_line[case.case_id] = lineno

    target_by_id: dict[str, tuple[int, Target]] = {}
    for lineno, target in targets:
        if target.target_id in target_by_id:
            problems.add_at(
                TARGETS_FILE, f"line {lineno}", "target_id",
                f"duplicate target_id {target.target_id!r} (first on line {target_by_id[target.target_id][0]})",
                "Give every target a unique target_id or remove the repeated line.",
            )
        else:
            target_by_id[target.target_id] = (lineno, target)
        if target.case_id not in case_line:
            problems.add_at(
                TARGETS_FILE, f"line {lineno}", "case_id",
                f"unknown case_id {target.case_id!r} (not in {CASES_FILE})",
                f"Add the case to {CASES_FILE} or correct the id.",
            )
    return target_by_id


def _load_rubric_for(manifest: PackManifest, prompts_root: Path | str | None, problems: _Problems) -> Rubric | None:
    try:
        return load_rubric(
            manifest.rubric.id,
            root=Path(prompts_root) if prompts_root is not None else None,
            version=manifest.rubric.version,
        )
    except RubricError as exc:
        problems.cause = exc
        problems.add_at(
            MANIFEST_FILE, None, "rubric",
            f"cannot use rubric {manifest.rubric.id!r} version {manifest.rubric.version!r}: {exc}",
            "Criteria, scales and components were not checked. Fix pack.json 'rubric', pass the right "
            "prompts root, or load with check_rubric=False.",
        )
        return None


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _jsonl(records: Iterable[BaseModel]) -> str:
    return "".join(json.dumps(r.model_dump(mode="json"), ensure_ascii=False) + "\n" for r in records)


def _ratings_csv(ratings: Iterable[Rating]) -> str:
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(RATINGS_COLUMNS)
    for r in ratings:
        writer.writerow(
            [
                r.case_id,
                r.target_id,
                r.rater_id,
                r.criterion,
                "" if r.score is None else str(r.score),
                "true" if r.not_evaluable else "false",
                r.comment,
            ]
        )
    return buf.getvalue()


def write_pack(
    pack: RatingPack,
    path: Path | str,
    *,
    overwrite: bool = False,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write a pack to a directory and return that directory.

    The files are first written into a hidden temporary directory next to ``path`` and then
    renamed into place, so an interrupted write never leaves a half-written directory at
    ``path``. The pack itself is not validated here; :func:`load_pack` checks what was written.

    Args:
        pack: The pack to write.
        path: Target directory (created; its parent must be writable).
        overwrite: Replace an existing non-empty directory. Without it, a non-empty
            directory raises :class:`PackError`.
        extra_files: Further UTF-8 text files written into the same atomic folder, keyed by
            plain file name (e.g. ``structural_exclusions.csv`` from the workbook importer).
            :func:`load_pack` ignores files it does not know.

    Raises:
        PackError: ``path`` is a file, or a non-empty directory and ``overwrite`` is false; an
            extra file name is a pack file name or not a plain file name.
    """
    extra_files = dict(extra_files or {})
    for name in extra_files:
        if name in PACK_FILES or not name or Path(name).name != name or name.startswith("."):
            raise PackError(f"extra pack file {name!r}: use a plain, visible file name other than {list(PACK_FILES)}.")
    dest = Path(path)
    if dest.exists() and not dest.is_dir():
        raise PackError(f"{dest}: exists and is not a directory; choose another output path for the pack.")
    if dest.is_dir() and any(dest.iterdir()) and not overwrite:
        raise PackError(
            f"{dest}: directory is not empty; refusing to overwrite it. Pass --overwrite (overwrite=True in Python) "
            "to replace it, or choose an empty/new directory."
        )
    manifest = json.dumps(pack.manifest.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    files = {CASES_FILE: _jsonl(pack.cases), TARGETS_FILE: _jsonl(pack.targets), RATINGS_FILE: _ratings_csv(pack.ratings),
             MANIFEST_FILE: manifest, **extra_files}
    replace_folder(dest, files)
    return dest


# --------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------


class PackSummary(Record):
    """Counts describing a valid pack (what :func:`check_pack` returns).

    Attributes:
        path: Pack directory, if the pack was read from disk.
        name: Pack name.
        version: On-disk format version.
        rubric: Rubric id and version.
        n_cases, n_targets, n_ratings: Record counts.
        n_not_evaluable: Ratings marked not evaluable.
        raters: Rater ids, sorted.
        criteria: Rated criteria, in first-seen order.
        targets_per_component: Number of targets per component.
        ratings_per_criterion: Number of ratings per criterion.
        ratings_per_rater: Number of ratings per rater.
        score_counts: ``criterion -> rater -> score -> count``; scores are strings in
            ascending order, with ``"not_evaluable"`` last when present.
    """

    path: str | None = None
    name: str
    version: int
    rubric: RubricRef
    n_cases: int
    n_targets: int
    n_ratings: int
    n_not_evaluable: int
    raters: tuple[str, ...]
    criteria: tuple[str, ...]
    targets_per_component: dict[str, int]
    ratings_per_criterion: dict[str, int]
    ratings_per_rater: dict[str, int]
    score_counts: dict[str, dict[str, dict[str, int]]]


def summarize_pack(pack: RatingPack) -> PackSummary:
    """Count cases, targets and ratings of a pack (no validation)."""
    with gc_paused():
        return _summary(pack.path, pack.manifest, pack.targets, RatingColumns.of(pack.ratings, range(len(pack.ratings))),
                        n_cases=len(pack.cases))


def _summary(path: Path | None, manifest: PackManifest, targets: Sequence[Target], ratings: RatingColumns, *,
             n_cases: int) -> PackSummary:
    return PackSummary(
        path=str(path) if path is not None else None,
        name=manifest.name,
        version=manifest.version,
        rubric=manifest.rubric,
        n_cases=n_cases,
        n_targets=len(targets),
        targets_per_component=dict(Counter(t.component for t in targets)),
        **rating_counts(ratings),
    )


def check_pack(
    path: Path | str,
    *,
    prompts_root: Path | str | None = None,
    check_rubric: bool = True,
    progress: RowsRead | None = None,
) -> PackSummary:
    """Validate a pack directory like :func:`load_pack` and return its counts (what
    ``evolve ratings check`` prints).

    Unlike :func:`load_pack`, a pack with no cases, no targets or no ratings is refused: there is
    nothing to check a judge against. The ratings are checked as columns and never turned into
    records: about 2 seconds for 300,000 ratings (``bench/ratings_check.py``).

    Args:
        path: The pack directory (or its ``pack.json``).
        prompts_root: ``judge_prompts`` folder holding the pack's rubric.
        check_rubric: Also check criteria, scales and components against the rubric.
        progress: Called while ``ratings.csv`` is read, after every 50,000 rows, with ``(rows
            read, bytes read, file bytes)``; the library itself prints nothing.

    Raises:
        PackError: The pack is invalid or empty (every problem is listed).
    """
    root = _resolve_pack_dir(path)
    problems = _Problems(str(root))
    with gc_paused():
        read = _read_pack(root, problems, progress)
        _check_read(read, problems, prompts_root=prompts_root, check_rubric=check_rubric, require_ratings=True)
        assert read.manifest is not None and read.ratings is not None  # else a problem was raised
        return _summary(root, read.manifest, [t for _, t in read.targets], read.ratings, n_cases=len(read.cases))


# --------------------------------------------------------------------------------------------
# JSON schemas
# --------------------------------------------------------------------------------------------

_SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "pack": PackManifest,
    "case": Case,
    "target": Target,
    "rating": Rating,
}

_SCHEMA_NOTES = {
    "pack": "pack.json of a rating pack.",
    "case": "One line of cases.jsonl in a rating pack.",
    "target": "One line of targets.jsonl in a rating pack.",
    "rating": (
        "One row of ratings.csv in a rating pack. In the CSV, score is an empty cell when "
        "not_evaluable is true, and not_evaluable is written as true/false."
    ),
}


def pack_json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas (draft 2020-12) of the pack records, generated from the pydantic models.

    Keys: ``pack``, ``case``, ``target``, ``rating``. These are what
    ``ratings/schema/<key>.schema.json`` must contain.
    """
    out: dict[str, dict[str, Any]] = {}
    for key, model in _SCHEMA_MODELS.items():
        schema = model.model_json_schema()
        out[key] = {"$schema": _SCHEMA_DIALECT, "$comment": _SCHEMA_NOTES[key], **schema}
    return out


def write_pack_schemas(directory: Path | str) -> list[Path]:
    """Write ``<key>.schema.json`` for every schema of :func:`pack_json_schemas` into a folder.

    Used to regenerate the committed ``ratings/schema/`` files after a model change.
    Returns the written paths.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for key, schema in pack_json_schemas().items():
        path = directory / f"{key}.schema.json"
        path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
