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

__all__ = ["JOURNAL_VERSION", "REPLAYED_EVENTS", "RESUME_EVENTS", "Event", "Journal", "run_usage"]

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
    CANDIDATE_PRUNED = "candidate_pruned"
    FINALISTS_JUDGED = "finalists_judged"
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
    OTB_STARTED = "otb_started"
    OTB_RESUMED = "otb_resumed"
    OTB_FINISHED = "otb_finished"
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


RESUME_EVENTS = frozenset({Event.RUN_RESUMED, Event.BENCH_RESUMED, Event.OTB_RESUMED})
"""Events that open a resumed process's part of the journal."""

REPLAYED_EVENTS = frozenset({
    Event.CRITERION_STARTED, Event.CANDIDATE_EVALUATED, Event.CANDIDATE_PRUNED, Event.FINALISTS_JUDGED,
    Event.MUTATION_ATTEMPT, Event.EVOLUTION_FINISHED,
    Event.ARCHIVE_SNAPSHOT, Event.MEASURES_CLIPPED, Event.WINNER_SELECTED, Event.REEVALUATION_FINISHED,
    Event.AUDIT_STARTED, Event.AUDIT_FINISHED,
})
"""Events a resumed run reproduces while it replays finished work from the response cache:
one that repeats, field for field, an event written before the last resume is not written again."""


class Journal:
    """Appends events to ``journal.jsonl``; every line is flushed and fsynced.

    Each event is ``{"v": 1, "t": <unix seconds>, "event": <name>, ...fields}``. The journal is
    never rewritten: a resumed run appends a ``run_resumed`` (or ``bench_resumed``) event and
    continues. Replaying finished work reproduces events already written; those of
    :data:`REPLAYED_EVENTS` that repeat an earlier event exactly are skipped (counted in
    :attr:`replayed`), so the journal of a resumed run reads like one run with the resumption
    marked, and an event that differs (a call that failed before and succeeded now) is written.

    Args:
        path: The journal file (created with its folder).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._before_resume: set[str] | None = None
        self.replayed = 0

    def append(self, event: Event, **fields: Any) -> None:
        """Append one event (its name is written as the enum's string value); a replayed
        event that repeats one written before the last resume is skipped."""
        event = Event(event)
        if event in REPLAYED_EVENTS and _identity(event.value, fields) in self._earlier():
            self.replayed += 1
            return
        record = {"v": JOURNAL_VERSION, "t": round(time.time(), 3), "event": event.value, **fields}
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

    def _earlier(self) -> set[str]:
        """Identities of the replayable events written before the last resume (read once)."""
        if self._before_resume is None:
            events = list(self.events())
            resumes = [i for i, e in enumerate(events) if e.get("event") in {r.value for r in RESUME_EVENTS}]
            earlier = events[: resumes[-1]] if resumes else []
            replayable = {r.value for r in REPLAYED_EVENTS}
            self._before_resume = {
                _identity(e["event"], {k: v for k, v in e.items() if k not in ("v", "t", "event")})
                for e in earlier if e.get("event") in replayable
            }
        return self._before_resume


def _identity(event: str, fields: dict[str, Any]) -> str:
    return json.dumps([event, fields], sort_keys=True, ensure_ascii=False, default=str)


def run_usage(journal: Journal) -> dict[str, dict[str, int]]:
    """Calls and tokens of a whole run, per tag, summed over every process that worked on it.

    Each client journals ``usage`` events carrying its ``session`` and its running totals
    (periodically and when it is released); the last event of each session counts. A process
    killed outright loses only what it did after its last ``usage`` event. Events written
    before sessions existed count one each.

    Returns:
        ``{tag: {"calls", "cache_hits", "failures", "retries", "prompt_tokens",
        "completion_tokens"}}``; empty when the journal has no usage.
    """
    last: dict[str, dict] = {}
    for i, e in enumerate(journal.events()):
        if e.get("event") == Event.USAGE.value and isinstance(e.get("usage"), dict):
            last[str(e.get("session") or f"#{i}")] = e["usage"]
    total: dict[str, dict[str, int]] = {}
    for usage in last.values():
        for tag, counts in usage.items():
            into = total.setdefault(tag, {})
            for name, value in counts.items():
                if isinstance(value, int | float):
                    into[name] = into.get(name, 0) + int(value)
    return total
