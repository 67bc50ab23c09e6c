"""Append-only run journal (one JSON event per line), in the spirit of optuna's JournalStorage."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

__all__ = ["JOURNAL_VERSION", "Event", "Journal"]

JOURNAL_VERSION = 1


class Event(str, Enum):
    """The names of journal events (written as their plain string values)."""

    # a calibration run
    RUN_STARTED = "run_started"
    RUN_RESUMED = "run_resumed"
    RUN_INTERRUPTED = "run_interrupted"
    RUN_FINISHED = "run_finished"
    CRITERION_STARTED = "criterion_started"
    CANDIDATE_EVALUATED = "candidate_evaluated"
    MUTATION_ATTEMPT = "mutation_attempt"
    EVOLUTION_FINISHED = "evolution_finished"
    CRITERION_FAILED = "criterion_failed"
    ARCHIVE_SNAPSHOT = "archive_snapshot"
    MEASURES_CLIPPED = "measures_clipped"
    WINNER_SELECTED = "winner_selected"
    REEVALUATION_FINISHED = "reevaluation_finished"
    # the drift audit
    AUDIT_STARTED = "audit_started"
    AUDIT_INTERRUPTED = "audit_interrupted"
    AUDIT_FINISHED = "audit_finished"
    # a bench run
    BENCH_STARTED = "bench_started"
    BENCH_RESUMED = "bench_resumed"
    BENCH_FINISHED = "bench_finished"
    INTERRUPTED = "interrupted"
    ROLES_ASSIGNED = "roles_assigned"
    ROLES_FAILED = "roles_failed"
    ROLES_REUSED = "roles_reused"
    CASE_STARTED = "case_started"
    CASE_FINISHED = "case_finished"
    CASE_FAILED = "case_failed"
    CASE_REUSED = "case_reused"
    PACK_WRITTEN = "pack_written"
    JUDGE_STARTED = "judge_started"
    JUDGE_INTERRUPTED = "judge_interrupted"
    JUDGE_FINISHED = "judge_finished"
    # any run
    EMBEDDED_SERVER_STARTED = "embedded_server_started"
    USAGE = "usage"
    WARNING = "warning"


class Journal:
    """Appends events to ``journal.jsonl``; every line is flushed and fsynced.

    Each event is ``{"v": 1, "t": <unix seconds>, "event": <name>, ...fields}``. The journal is
    never rewritten: a resumed run appends a ``run_resumed`` event and continues.

    Args:
        path: The journal file (created with its folder).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def append(self, event: Event, **fields: Any) -> None:
        """Append one event (its name is written as the enum's string value)."""
        record = {"v": JOURNAL_VERSION, "t": round(time.time(), 3), "event": Event(event).value, **fields}
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def events(self) -> Iterator[dict[str, Any]]:
        """Yield the recorded events in order (a torn last line from a crash is skipped)."""
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue
