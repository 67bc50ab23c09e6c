"""Reading id lists: user-supplied manifests, case files, and the provenance records of a frame split."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from evolve.errors import Problems, SplitError
from evolve.records import Record

if TYPE_CHECKING:  # pragma: no cover
    from evolve.data import Case, RatingPack

_MAX_REPORTED = 20
_HEX64 = r"^[0-9a-f]{64}$"


class SplitWarning(UserWarning):
    """Something about a split or a manifest that is accepted but worth a look (e.g. a manifest
    that is not in source order; it is written in source order anyway)."""


def raise_problems(problems: list[str], heading: str) -> None:
    """Raise one :class:`SplitError` listing every problem (at most 20 shown), or return if none."""
    collected = Problems(heading, SplitError, _MAX_REPORTED)
    for problem in problems:
        collected.add(problem)
    collected.raise_if_any()


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of some bytes."""
    return hashlib.sha256(data).hexdigest()


def _read_bytes(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise SplitError(f"{path}: no such {what} file. Check the path (it is read relative to the current folder).")
    return path.read_bytes()


def _decode(data: bytes, path: Path, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SplitError(
            f"{path}: the {what} is not UTF-8 text (byte {exc.start}). Save it as UTF-8, one case id per line."
        ) from None


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


class SourceFile(Record):
    """A file that a split was made from: the path as given and the sha256 of its bytes.

    Attributes:
        path: Path as the user typed it (not resolved), so split.json stays portable.
        sha256: Hex sha256 of the file's bytes when the split was made.
    """

    path: str = Field(min_length=1)
    sha256: str = Field(pattern=_HEX64)


class Manifest(Record):
    """An id list as supplied by a user (a file or an in-memory list), before verification.

    Ids keep the order and repeats of the source so that :func:`~evolve.splits.check_manifest`
    can report duplicates and order by line. Build one with :func:`read_manifest` or
    :meth:`from_ids`.

    Attributes:
        name: What the list is for (``frame``, ``train``, ``validation``); used in messages.
        ids: Case ids in the order they appear, repeats included.
        lines: 1-based line (file) or position (in-memory list) of each id.
        source: The file it was read from (path + sha256); ``None`` for an in-memory list.
        label: How messages refer to the list, e.g. ``frame manifest calib.txt``.
    """

    name: str
    ids: tuple[str, ...]
    lines: tuple[int, ...]
    source: SourceFile | None = None
    label: str

    @model_validator(mode="after")
    def _same_length(self) -> Manifest:
        if len(self.ids) != len(self.lines):
            raise ValueError("ids and lines must have the same length")
        return self

    @classmethod
    def from_ids(cls, ids: Sequence[str], *, name: str, label: str | None = None) -> Manifest:
        """Wrap an in-memory id list; positions (1-based) stand in for line numbers."""
        if isinstance(ids, str):
            raise SplitError(f"{name}: expected a list of case ids, got the single string {ids!r}.")
        ids = tuple(ids)
        return cls(name=name, ids=ids, lines=tuple(range(1, len(ids) + 1)), label=label or f"{name} list")

    @property
    def unit(self) -> str:
        """``line`` for a file, ``item`` for an in-memory list."""
        return "line" if self.source else "item"

    def where(self, index: int) -> str:
        """``'<label> line N'`` (file) or ``'<label> item N'`` (list) for the id at ``index``."""
        return f"{self.label} {self.unit} {self.lines[index]}"


def read_manifest(path: Path | str, *, name: str = "frame") -> Manifest:
    """Read a user-supplied manifest: one case id per line.

    Blank lines are ignored, and so is everything from a ``#`` to the end of a line (case ids
    never contain ``#``), so manifests may carry comments. Surrounding whitespace and a UTF-8
    byte-order mark are stripped. Nothing is checked against the cases here; use
    :func:`~evolve.splits.check_manifest` or pass the manifest to
    :func:`~evolve.splits.make_frame_splits`.

    Args:
        path: The manifest file.
        name: What the list is for (``frame``, ``train`` or ``validation``), used in messages.

    Returns:
        A :class:`Manifest` with every listed id and its line number, and the file's sha256.

    Raises:
        SplitError: The file does not exist or is not UTF-8 text.
    """
    path = Path(path)
    data = _read_bytes(path, f"{name} manifest")
    text = _decode(data, path, f"{name} manifest")
    ids, lines = [], []
    for lineno, line in enumerate(text.splitlines(), start=1):
        cid = line.split("#", 1)[0].strip()
        if cid:
            ids.append(cid)
            lines.append(lineno)
    return Manifest(
        name=name,
        ids=tuple(ids),
        lines=tuple(lines),
        source=SourceFile(path=str(path), sha256=sha256_bytes(data)),
        label=f"{name} manifest {path}",
    )


class CaseList(Record):
    """The source-ordered universe of case ids a frame is chosen from (e.g. a 300-case case file).

    Attributes:
        ids: Case ids in source order, each once.
        group_of: Case id -> group (DOI) for cases whose group is not the case id itself. Cases
            of one group always stay on one side of every split.
        kind: ``pack`` (the cases of a rating pack), ``file`` (a case file) or ``list``
            (an in-memory list).
        source: The case file (path + sha256) when ``kind == "file"``.
        label: How messages refer to it, e.g. ``case file cases.jsonl``.
    """

    ids: tuple[str, ...]
    group_of: dict[str, str] = Field(default_factory=dict)
    kind: Literal["pack", "file", "list"] = "list"
    source: SourceFile | None = None
    label: str = "the case list"

    @classmethod
    def from_ids(cls, ids: Sequence[str], *, group_of: Mapping[str, str] | None = None) -> CaseList:
        """Wrap an in-memory, source-ordered id list.

        Raises:
            SplitError: An id is repeated.
        """
        if isinstance(ids, str):
            raise SplitError(f"case_ids: expected a list of case ids, got the single string {ids!r}.")
        ids = tuple(ids)
        _no_repeats(ids, "the case list")
        return cls(ids=ids, group_of=dict(group_of or {}), kind="list")

    @classmethod
    def from_cases(cls, cases: Sequence[Case], *, path: Path | str | None = None) -> CaseList:
        """The ids of loaded cases (e.g. ``evolve.data.load_cases(path)``), in their order.

        Args:
            cases: Case records in source order.
            path: The file (or folder with ``cases.jsonl``) they were loaded from; recorded
                with its sha256 when given.

        Raises:
            SplitError: An id is repeated, or ``path`` does not exist.
        """
        ids = tuple(c.case_id for c in cases)
        _no_repeats(ids, "the cases")
        if path is None:
            return cls(ids=ids, kind="list", label="the loaded cases")
        from evolve.data import case_file

        path = case_file(path)
        source = SourceFile(path=str(path), sha256=sha256_bytes(_read_bytes(path, "case")))
        return cls(ids=ids, kind="file", source=source, label=f"case file {path}")

    @classmethod
    def from_pack(cls, pack: RatingPack) -> CaseList:
        """The cases of a rating pack, in the order of its ``cases.jsonl``."""
        return cls(ids=pack.case_ids, kind="pack", label=f"pack {pack.manifest.name!r}")


def _no_repeats(ids: Sequence[str], label: str) -> None:
    seen: dict[str, int] = {}
    problems = []
    for i, cid in enumerate(ids, start=1):
        if cid in seen:
            problems.append(f"item {i}: case id {cid!r} repeats item {seen[cid]}. Each case must appear once.")
        else:
            seen[cid] = i
    raise_problems(problems, f"{label} is not a valid case universe")


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


_Row = tuple[str, str, "str | None"]
"""One case of a case file: ``(location, case id, DOI or None)``."""


def read_case_ids(path: Path | str, *, id_column: str | None = None, doi_column: str = "doi",
                  doi_required: bool = False) -> CaseList:
    """Read the source-ordered case ids of a case file (the universe a frame is chosen from).

    Accepted formats, by extension:

    * a directory: its ``cases.jsonl`` (a rating pack or a case folder);
    * ``.jsonl``: one JSON object per line with ``case_id`` (or ``doi``, or ``id``); when an
      object has both ``case_id`` and a different ``doi``, the DOI is the case's group;
    * ``.csv`` / ``.parquet``: a ``case_id`` (or ``doi``, or ``id``) column, and optionally a
      ``doi`` group column (CSV rows are numbered with the header as row 1, parquet records
      from 1);
    * anything else: plain text, one id per line, ``#`` comments and blank lines ignored.

    The three table formats are parsed by :func:`evolve.data.read_case_rows`, the parser of
    :func:`~evolve.data.load_cases`, so both read a file alike.

    Args:
        path: The case file or folder.
        id_column: The field (JSONL) or column (CSV/parquet) holding the case id; None = the
            first of ``case_id``, ``doi_column``, ``id`` present - the rule of
            :func:`~evolve.data.load_cases`, so a frame and a case set agree on ids.
        doi_column: The field or column holding the DOI (the case's group), if any.
        doi_required: The DOI column was named on purpose (``--column doi=...``): a CSV or
            parquet file without it is an error, not a file without groups.

    Returns:
        A :class:`CaseList` (``kind="file"``) with the file's path and sha256.

    Raises:
        SplitError: Missing/unreadable file, bad JSON or CSV, rows without an id, or repeated
            ids -- every problem with its line (row) number.
    """
    from evolve.data import CASE_FILE_SUFFIXES, case_file

    path = case_file(path)
    data = _read_bytes(path, "case")
    issues = Problems(f"case file {path} is invalid", SplitError, _MAX_REPORTED)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = _jsonl_ids(path, data, issues, id_column, doi_column)
    elif suffix in CASE_FILE_SUFFIXES:
        rows = _table_ids(path, data, issues, (id_column, doi_column, doi_required))
    else:
        rows = [(f"line {n}", cid, None) for n, line in enumerate(_decode(data, path, "case file").splitlines(), start=1)
                if (cid := line.split("#", 1)[0].strip())]
    ids, group_of = _first_ids(path, rows, issues)
    issues.raise_if_any()
    return CaseList(ids=tuple(ids), group_of=group_of, kind="file",
                    source=SourceFile(path=str(path), sha256=sha256_bytes(data)), label=f"case file {path}")


def _id_keys(id_column: str | None, doi_column: str) -> tuple[tuple[str, ...], str]:
    """The fields tried for the id, in order, and how a message names them."""
    if id_column:
        return (id_column,), f"'{id_column}'"
    return ("case_id", doi_column, "id"), f"'case_id' (or '{doi_column}'/'id')"


def _jsonl_ids(path: Path, data: bytes, issues: Problems, id_column: str | None, doi_column: str) -> list[_Row]:
    """Each JSONL object's id (its first non-empty id field, chosen per line) and DOI."""
    from evolve.data import read_case_rows

    keys, wanted = _id_keys(id_column, doi_column)
    rows: list[_Row] = []
    for loc, obj in read_case_rows(path, issues, data=data)[1]:
        key = next((k for k in keys if isinstance(obj.get(k), str) and obj[k].strip()), None)
        if key is None:
            issues.add(f"{path.name}, {loc}: no {wanted} string field. Add the case id"
                       + ("." if id_column else ", or name its field with --column case_id=FIELD."))
            continue
        raw_doi = obj.get(doi_column)
        rows.append((loc, obj[key].strip(), raw_doi.strip() or None if isinstance(raw_doi, str) else None))
    return rows


def _table_ids(path: Path, data: bytes, issues: Problems, columns_wanted: tuple[str | None, str, bool]) -> list[_Row]:
    """Each CSV or parquet row's id and DOI, from one id column for the whole file."""
    from evolve.data import read_case_rows

    id_column, doi_column, doi_required = columns_wanted
    columns, records = read_case_rows(path, issues, data=data)
    names = {c.strip(): c for c in columns}
    keys, wanted = _id_keys(id_column, doi_column)
    key = next((k for k in keys if k in names), None)
    if doi_required and doi_column not in names:
        raise SplitError(f"{path} row 1: no '{doi_column}' column among {list(names)}. Check the --column doi= mapping "
                         "against these columns.")
    if key is None:
        raise SplitError(
            f"{path} row 1: no {wanted} column among {list(names)}. "
            + ("Check the --column case_id= mapping against these columns." if id_column
               else "Name the id column case_id, or pass --column case_id=COLUMN.")
        )
    rows: list[_Row] = []
    for loc, row in records:
        cid, doi = _cell(row.get(names[key])), _cell(row.get(names.get(doi_column, doi_column)))
        if cid:
            rows.append((loc, cid, doi or None))
        else:
            issues.add(f"{path.name}, {loc}: empty '{key}'. Fill in the case id or delete the row.")
    return rows


def _first_ids(path: Path, rows: list[_Row], issues: Problems) -> tuple[list[str], dict[str, str]]:
    """The ids in order (a repeat is a problem) and each id's DOI group where it differs from the id."""
    first: dict[str, str] = {}
    group_of: dict[str, str] = {}
    for loc, cid, doi in rows:
        if cid in first:
            issues.add(f"{path.name}, {loc}: case id {cid!r} repeats {first[cid]}. Keep each case once.")
            continue
        first[cid] = loc
        if doi and doi != cid:
            group_of[cid] = doi
    if not first and not issues:
        issues.add(f"{path}: lists no case ids. Point --cases at the case file (one case per line).")
    return list(first), group_of


# --------------------------------------------------------------------------------------------
# Provenance and presets
# --------------------------------------------------------------------------------------------


class FrameOrigin(Record):
    """How the frame and its train/validation partition were obtained (``split.json: frame_origin``).

    Present only for splits made by :func:`~evolve.splits.make_frame_splits`; splits drawn by
    fractions (:func:`~evolve.splits.make_splits`) leave it out, so their ``split.json`` is
    unchanged.

    Attributes:
        frame: ``manifest`` (read from a file), ``list`` (an in-memory list, e.g. the rated
            cases of a pack) or ``drawn`` (drawn from the universe with ``frame_seed``).
        frame_manifest: The manifest file (path + sha256) when ``frame == "manifest"``.
        frame_label: What the list was when ``frame == "list"``.
        frame_seed: The seed when ``frame == "drawn"``.
        universe: Where the case ids came from: ``pack``, ``file`` (``cases``) or ``list``.
        cases: The case file (path + sha256) when ``universe == "file"``.
        n_cases: Size of the universe (= frame + holdout).
        partition: ``drawn`` (train/validation drawn with the split's ``seed``) or
            ``manifest`` (supplied by the user and verified).
        train_manifest: The supplied train manifest, if any.
        validation_manifest: The supplied validation manifest, if any.
        grouped: Whether a case -> group (DOI) mapping was applied (groups never straddle sides).
        preset: The preset whose sizes were verified (``paper``), if any.
    """

    frame: Literal["manifest", "list", "drawn"]
    frame_manifest: SourceFile | None = None
    frame_label: str | None = None
    frame_seed: int | None = Field(default=None, ge=0)
    universe: Literal["pack", "file", "list"]
    cases: SourceFile | None = None
    n_cases: int = Field(ge=2)
    partition: Literal["drawn", "manifest"]
    train_manifest: SourceFile | None = None
    validation_manifest: SourceFile | None = None
    grouped: bool = False
    preset: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> FrameOrigin:
        if (self.frame == "manifest") != (self.frame_manifest is not None):
            raise ValueError("frame_manifest is set exactly when frame is 'manifest'")
        if (self.frame == "drawn") != (self.frame_seed is not None):
            raise ValueError("frame_seed is set exactly when frame is 'drawn'")
        if (self.universe == "file") != (self.cases is not None):
            raise ValueError("cases is set exactly when universe is 'file'")
        if self.partition == "drawn" and (self.train_manifest or self.validation_manifest):
            raise ValueError("train/validation manifests are only recorded when partition is 'manifest'")
        return self


class FramePreset(Record):
    """Sizes a frame split must have; make_frame_splits fills in and verifies them.

    Attributes:
        name: Preset name (``paper``).
        n_cases: Size of the case universe (frame + holdout).
        frame_size: Cases in the calibration frame.
        n_train: Training cases (a subset of the frame).
        n_validation: Validation cases (the rest of the frame).
    """

    name: str
    n_cases: int = Field(ge=2)
    frame_size: int = Field(ge=2)
    n_train: int = Field(ge=1)
    n_validation: int = Field(ge=1)

    @model_validator(mode="after")
    def _adds_up(self) -> FramePreset:
        if self.n_train + self.n_validation != self.frame_size or self.frame_size > self.n_cases:
            raise ValueError("n_train + n_validation must equal frame_size <= n_cases")
        return self


FRAME_PRESETS: dict[str, FramePreset] = {
    "paper": FramePreset(name="paper", n_cases=300, frame_size=110, n_train=80, n_validation=30),
}
"""Named frame sizes. ``paper`` (consilium paper, calibration): 300 cases, a 110-case calibration frame (190 held
out), split 80 train / 30 validation."""
