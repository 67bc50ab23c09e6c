"""A run's own copy of the rubrics it used: written once when the run starts, read by every
later reader of the run (report, audit, compare, resume), so a run folder outlives changes to,
or the removal of, the rubric folder it was started from.

The copy is a prompts root of its own (``<run>/judge_prompts/<rubric_id>/...``, the layout of
:mod:`evolve.rubric._loading`) with a record ``sources.json`` (:class:`PromptsSnapshot`): per
rubric id, the folder it was copied from, its version and the sha256 of every copied file.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from evolve.errors import RubricError
from evolve.records import Record
from evolve.rubric._bundle import RubricBundle
from evolve.rubric._loading import rubric_source

__all__ = ["SNAPSHOT_SOURCES", "PromptsSnapshot", "RubricCopy", "read_prompts_snapshot", "run_prompts_root", "snapshot_changes",
           "write_prompts_snapshot"]

SNAPSHOT_SOURCES = "sources.json"
"""The record of a run's rubric copy, inside the copy's prompts root."""


class RubricCopy(Record):
    """Where one rubric of a run's copy came from, and what was copied.

    Attributes:
        version: The rubric's version (``rubric.json``).
        source: The rubric folder it was copied from (absolute).
        files: Every copied file, by path relative to the rubric folder (``/``-separated,
            e.g. ``guidance/entailment/initial_1.md``), to its sha256 (64 hex digits).
    """

    version: str
    source: str
    files: dict[str, str]


class PromptsSnapshot(Record):
    """``sources.json`` of a run's rubric copy.

    Attributes:
        version: Format version.
        created: When the copy was made (UTC, ISO 8601).
        rubrics: Per rubric id, where its copy came from (:class:`RubricCopy`).
    """

    version: Literal[1] = 1
    created: str
    rubrics: dict[str, RubricCopy]


def write_prompts_snapshot(dest: Path | str, rubric_ids: Sequence[str], *, root: Path | str | None = None) -> PromptsSnapshot:
    """Copy the rubrics a run uses into its prompts root ``dest``, with their record.

    Each rubric is copied as its :class:`~evolve.rubric.RubricBundle` writes it (``rubric.json``
    with every field, the protocol, the guidance of every evolvable criterion), so the record's
    sha256 are those of :meth:`~evolve.rubric.RubricBundle.sha256`. The copy is built beside
    ``dest`` and renamed into place, so ``dest`` is either the whole copy or absent; a leftover
    ``dest`` (a start interrupted before the run began) is replaced.

    Args:
        dest: The run's copy (``RunFolder.prompts_root``).
        rubric_ids: The rubrics the run uses (at least one).
        root: The prompts root they are loaded from (then the shipped rubrics, as every loader
            looks them up); None = ``$EVOLVE_PROMPTS_ROOT`` or the shipped rubrics.

    Returns:
        The record written to ``dest/sources.json``.

    Raises:
        RubricError: A rubric is missing or invalid (nothing is written).
    """
    dest = Path(dest)
    bundles = {rid: RubricBundle.load(rid, root=root) for rid in dict.fromkeys(rubric_ids)}
    record = PromptsSnapshot(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        rubrics={rid: RubricCopy(version=b.rubric.version, source=str(rubric_source(rid, root=root).absolute()),
                                 files=b.sha256()) for rid, b in bundles.items()},
    )
    from evolve.runs import replace_folder  # runs pulls in the model client: import only when writing

    files: dict[str, str | bytes] = {f"{rid}/{rel}": data for rid, b in bundles.items() for rel, data in b.files().items()}
    files[SNAPSHOT_SOURCES] = record.model_dump_json(indent=2) + "\n"
    replace_folder(dest, files)
    return record


def read_prompts_snapshot(dest: Path | str) -> PromptsSnapshot | None:
    """The record of a run's rubric copy (``dest/sources.json``), or None when the run has no
    copy (runs made before runs kept one).

    Raises:
        RubricError: The record exists but cannot be read.
    """
    path = Path(dest) / SNAPSHOT_SOURCES
    if not path.is_file():
        return None
    try:
        return PromptsSnapshot.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        raise RubricError(f"{path}: cannot read the record of the run's rubric copy ({exc}). Restore it from a "
                          "backup, or delete the folder judge_prompts of the run to fall back on the original rubric.") from exc


def run_prompts_root(dest: Path | str, recorded: Path | str | None) -> Path | None:
    """The prompts root a reader of a run loads its rubric from: the run's copy ``dest`` when
    the run has one (its ``sources.json``), else ``recorded`` (the run's configured root; None =
    the shipped rubrics), as runs made before runs kept a copy did."""
    if (Path(dest) / SNAPSHOT_SOURCES).is_file():
        return Path(dest)
    return Path(recorded) if recorded is not None else None


def snapshot_changes(dest: Path | str) -> list[str]:
    """One note per rubric of a run's copy whose original folder still exists but whose files
    differ from those copied (by sha256; files added or removed count as changes).

    A removed original gets no note: the copy is simply used. Runs without a copy give none.

    Raises:
        RubricError: The record exists but cannot be read.
    """
    record = read_prompts_snapshot(dest)
    if record is None:
        return []
    notes = []
    for rid, copy in record.rubrics.items():
        source = Path(copy.source)
        if not (source / "rubric.json").is_file():
            continue
        try:
            now = RubricBundle.load(rid, root=source.parent).sha256()
        except RubricError as exc:
            notes.append(f"the rubric {rid!r} at {source} has changed since this run and no longer loads ({exc}); "
                         f"the run's copy in {Path(dest)} is used")
            continue
        changed = sorted(n for n in set(now) | set(copy.files) if now.get(n) != copy.files.get(n))
        if changed:
            shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
            notes.append(f"the rubric {rid!r} at {source} has changed since this run ({shown}); "
                         f"the run's copy in {Path(dest)} is used")
    return notes
