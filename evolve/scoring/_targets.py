"""What a calibrated judge scores: a rating pack folder, or a table (rated or not), as targets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from evolve.calibrated import JudgeFile
from evolve.data import RatingPack, TableCounts, import_frame, import_table, load_pack, validate_pack
from evolve.errors import PackError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ScoringTargets", "read_targets"]


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

    Raises:
        PackError: A missing file, a pack on another rubric, or bad cells - every one named by
            file, row and column.
    """
    bundle = judge.bundle()
    cols = dict(columns or {})
    layout: Literal["long", "wide"] = "wide" if any(k.startswith("criterion:") for k in cols) else "long"
    if isinstance(source, RatingPack):
        validate_pack(source, rubric=bundle.rubric)
        return ScoringTargets(source, bool(source.ratings), f"rating pack {source.manifest.name!r} (in memory)")
    if not isinstance(source, (str, Path)):
        result = import_frame(source, rubric=bundle, name="targets", columns=cols, layout=layout,
                              not_evaluable=not_evaluable, score_map=score_map, rated=None,
                              heading="cannot read the targets table")
        return ScoringTargets(result.pack, bool(result.pack.ratings), "a DataFrame", result.counts)
    path = Path(source)
    if path.is_dir():
        return _pack_targets(path, judge)
    result = import_table(path, rubric=bundle, columns=cols, layout=layout, not_evaluable=not_evaluable, score_map=score_map,
                          rows=rows, where=list(where), rated=None)
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
