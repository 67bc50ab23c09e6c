"""Which judge file judged a run: its path, its sha256 and a byte-for-byte copy in the run.

A benchmark judged with ``--guidance`` names a calibration run folder or its ``judge.json``
(the judge file, :mod:`evolve.calibrated`). The judged run keeps a copy of that file
(``calibrated_judge.json``) and records where it came from and its SHA-256, so its report can
read the judge file's anchor (the calibration's rated validation targets) without the
calibration run, and anyone can check that the copy is the file that was used.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evolve.records import Record
from evolve.runs import BenchFolder, RunFolder, atomic_write

__all__ = ["CALIBRATED_JUDGE", "JudgeFileRecord", "keep_judge_file", "read_judge_file_record"]

CALIBRATED_JUDGE = BenchFolder.CALIBRATED_JUDGE
"""File name of the judge file's copy inside a judged run folder."""

_JUDGE_FILE = "judge.json"  # a calibration run's judge file (evolve.calibrated.JUDGE_FILE)


class JudgeFileRecord(Record):
    """The judge file a run was judged with.

    Attributes:
        path: The judge file read (absolute; ``<calibration run>/judge.json`` when a run folder
            was given).
        sha256: Hex SHA-256 of the file's bytes (equal to the copy's).
        run_id: The calibration run that wrote it.
        judge_model: The judge model the guidance was validated with.
        copy_name: The copy's file name inside the judged run (:data:`CALIBRATED_JUDGE`).
    """

    path: str
    sha256: str
    run_id: str
    judge_model: str
    copy_name: str = CALIBRATED_JUDGE


def read_judge_file_record(source: Path | str) -> tuple[JudgeFileRecord, bytes] | None:
    """The record and the bytes of the judge file behind ``--guidance``.

    Args:
        source: A calibration run folder (its ``judge.json`` is read) or a ``judge.json``.

    Returns:
        ``(record, file bytes)``, or None when a run folder has no ``judge.json`` (a run made
        before judge files; ``evolve report RUN`` writes one) or the file is not a judge file
        (the guidance reader has refused it already then).
    """
    path = Path(source)
    if path.is_dir():
        path = path / _JUDGE_FILE
    try:
        data = path.read_bytes()
        raw = json.loads(data)
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("format") != "evolve.judge":
        return None
    judge = raw.get("judge")
    judge = judge if isinstance(judge, dict) else {}
    record = JudgeFileRecord(path=str(path.absolute()), sha256=hashlib.sha256(data).hexdigest(),
                             run_id=str(raw.get("run_id") or ""), judge_model=str(judge.get("model") or ""))
    return record, data


def keep_judge_file(folder: RunFolder | Path | str, record: JudgeFileRecord, data: bytes) -> Path:
    """Write the judge file's bytes, unchanged, into the judged run (atomically).

    Returns:
        The copy's path (``<run>/calibrated_judge.json``).
    """
    target = Path(folder) / record.copy_name
    atomic_write(target, data)
    return target
