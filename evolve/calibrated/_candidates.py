"""The candidates of a finished calibration run (``candidates.csv``), as readers need them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evolve.errors import RunError
from evolve.records import Record
from evolve.runs import CalibrationFolder

__all__ = ["CandidateRecord", "read_candidates"]


class CandidateRecord(Record):
    """One row of a finished run's ``candidates.csv``, as readers of the run need it (the
    published schema ``candidate``; the file holds more columns, which the engine reads).

    Attributes:
        candidate_id: E.g. ``data_use:m7``.
        criterion: Criterion id.
        origin: ``initial``, ``none`` or ``mutation``.
        parent_id: The elite it was mutated from (empty otherwise).
        text: The guidance (empty for the no-guidance candidate).
        selected: Whether it is the criterion's winner.
        train_mae: Its training MAE, or None when it was not scored.
        order: Its row index in the file (0-based).
    """

    candidate_id: str
    criterion: str
    origin: str
    parent_id: str
    text: str
    selected: bool
    train_mae: float | None
    order: int


def _truthy(value: str) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _float(value: str) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if x != x else x


def read_candidates(
    run_dir: Path | str, *, required: Sequence[str] = ("candidate_id", "criterion", "origin", "text", "selected")
) -> list[CandidateRecord]:
    """The rows of a finished calibration run's ``candidates.csv``, in file order.

    Args:
        run_dir: The run folder (``archives/<run_id>``).
        required: Columns the caller needs; any other column of :class:`CandidateRecord`
            that the file lacks reads as empty (None for ``train_mae``).

    Raises:
        RunError: Missing file (the run did not finish) or a required column missing.
    """
    folder = CalibrationFolder(run_dir)
    path = folder / folder.CANDIDATES
    frame = folder.read_frame(folder.CANDIDATES, dtype=str, keep_default_na=False)
    assert frame is not None  # required
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise RunError(f"{path}: columns {missing} are missing; this is not a candidates.csv written by `evolve calibrate`.")
    return [
        CandidateRecord(
            candidate_id=r.get("candidate_id", ""), criterion=r.get("criterion", ""), origin=r.get("origin", ""),
            parent_id=r.get("parent_id", ""), text=r.get("text", ""), selected=_truthy(r.get("selected", "")),
            train_mae=_float(r.get("train_mae", "")), order=i,
        )
        for i, r in enumerate(frame.to_dict("records"))
    ]
