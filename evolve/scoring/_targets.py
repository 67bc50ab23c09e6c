"""What a calibrated judge scores: a rating pack folder, or a table (rated or not), as targets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from evolve.calibrated import JudgeFile
from evolve.data import RatingPack, TableCounts, import_frame, import_table, load_pack, validate_pack
from evolve.errors import PackError
from evolve.splits import read_case_ids

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ScoringTargets", "read_targets", "select_cases"]


@dataclass(frozen=True)
class ScoringTargets:
    """The cases and targets to score, with the physicians' ratings when there are any.

    Attributes:
        pack: Cases, targets and (possibly no) ratings, in memory.
        rated: Whether any rating came with the targets (agreement is then reported).
        source: Where they came from, in words (``"rating pack ratings/kqa"``, ``"table new.csv"``).
        counts: What a table import read (None for a pack folder).
    """

    pack: RatingPack
    rated: bool
    source: str
    counts: TableCounts | None = None


def read_targets(
    source: pd.DataFrame | RatingPack | Path | str,
    judge: JudgeFile,
    *,
    columns: Mapping[str, str] | None = None,
    not_evaluable: Sequence[str] = (),
    score_map: Mapping[str, Mapping[str, int]] | None = None,
    rows: str | None = None,
    where: Sequence[str] = (),
    layout: Literal["long", "wide"] | None = None,
    skip_empty: bool = False,
) -> ScoringTargets:
    """Read targets for a judge file's rubric.

    A folder (or an in-memory :class:`~evolve.data.RatingPack`) is a rating pack (its ratings
    are used for agreement); a ``.csv``, ``.jsonl``,
    ``.parquet`` or ``.xlsx`` file, or a DataFrame, is read through the table importer's column
    mapping (:data:`evolve.data.TABLE_FIELDS`, ``evolve ratings import table --column``): rated
    when it has a rater column (then rater, criterion and score are read as there), else
    cases and targets only (``case_text`` and ``target_text`` required).

    Args:
        source: Pack folder, in-memory pack, table file or DataFrame.
        judge: The judge file; its rubric (as validated) checks the targets' components.
        columns: ``field -> column`` (``criterion:<id>`` keys select the wide layout).
        not_evaluable: Rating cells that mark a rating not evaluable (rated tables).
        score_map: Rating labels -> scores (rated tables; as ``evolve ratings import table --score-map``).
        rows: JSONL files only: the dotted path whose every element is one row (``answers.*.claims.*``).
        where: ``COLUMN=VALUE`` conditions a table row must meet to be read.
        layout: A rated table's layout (as ``evolve ratings import table --layout``); None: wide
            when ``columns`` maps ``criterion:<id>`` keys, else long.
        skip_empty: Rated tables: skip empty score cells (counted) instead of refusing them.

    Raises:
        PackError: A missing file, a pack on another rubric, or bad cells - every one named by
            file, row and column.
    """
    bundle = judge.bundle()
    cols = dict(columns or {})
    layout = layout or ("wide" if any(k.startswith("criterion:") for k in cols) else "long")
    if isinstance(source, RatingPack):
        validate_pack(source, rubric=bundle.rubric)
        return ScoringTargets(source, bool(source.ratings), f"rating pack {source.manifest.name!r} (in memory)")
    if not isinstance(source, (str, Path)):
        result = import_frame(source, rubric=bundle, name="targets", columns=cols, layout=layout,
                              not_evaluable=not_evaluable, score_map=score_map, skip_empty=skip_empty, rated=None,
                              heading="cannot read the targets table")
        return ScoringTargets(result.pack, bool(result.pack.ratings), "a DataFrame", result.counts)
    path = Path(source)
    if path.is_dir():
        return _pack_targets(path, judge)
    result = import_table(path, rubric=bundle, columns=cols, layout=layout, not_evaluable=not_evaluable, score_map=score_map,
                          skip_empty=skip_empty, rows=rows, where=list(where), rated=None)
    return ScoringTargets(result.pack, bool(result.pack.ratings), f"table {path.name}", result.counts)


def _pack_targets(path: Path, judge: JudgeFile) -> ScoringTargets:
    rubric = judge.bundle().rubric
    pack = load_pack(path, check_rubric=False)
    ref = pack.manifest.rubric
    if ref.id != rubric.id:
        raise PackError(f"{path}: the pack is rated on rubric {ref.id!r}, the judge file on {rubric.id!r} "
                        f"(version {rubric.version}). Score targets of the judge's rubric, or use a judge calibrated on {ref.id!r}.")
    if ref.version != rubric.version:
        raise PackError(f"{path}: the pack names rubric {ref.id!r} version {ref.version}, the judge file was validated on "
                        f"version {rubric.version}. Re-import the pack on version {rubric.version}.")
    validate_pack(pack, rubric=rubric)
    return ScoringTargets(pack, bool(pack.ratings), f"rating pack {path}")


def select_cases(targets: ScoringTargets, cases: Path | str) -> ScoringTargets:
    """Keep only the cases a case file lists, with their targets and ratings.

    Typically a split's ``holdout.txt``: the rows of a rating pack that calibration never saw.

    Args:
        targets: What :func:`read_targets` read.
        cases: A case-id file in any format :func:`evolve.splits.read_case_ids` reads (plain
            text one id per line, a ``.csv``/``.jsonl`` with ``case_id``, a pack folder).

    Returns:
        The same targets restricted to those cases (``source`` says so).

    Raises:
        PackError: The file names cases the targets do not hold (the first ones named), or none.
    """
    wanted = read_case_ids(cases).ids
    present = {c.case_id for c in targets.pack.cases}
    unknown = [c for c in wanted if c not in present]
    if unknown:
        first = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise PackError(f"{cases}: {len(unknown)} of its {len(wanted)} case ids are not in {targets.source} ({first}). "
                        "Give a case file of these targets (the same case ids, e.g. the split made from this pack), "
                        "or map the column holding those ids: --column case=COLUMN.")
    if not wanted:
        raise PackError(f"{cases}: lists no case id. Give a file with one case id per line (e.g. splits/<name>/holdout.txt).")
    pack = targets.pack.subset(wanted)
    return replace(targets, pack=pack, rated=bool(pack.ratings), source=f"{targets.source}, cases of {Path(cases).name}")
