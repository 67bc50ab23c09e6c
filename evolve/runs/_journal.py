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

__all__ = ["CALL_COUNTS", "JOURNAL_VERSION", "REPLAYED_EVENTS", "RESUME_EVENTS", "Event", "Journal", "run_endpoint_usage", "run_usage",
           "run_warnings"]

JOURNAL_VERSION = 1

CALL_COUNTS = ("calls", "cache_hits", "failures", "retries", "prompt_tokens", "completion_tokens",
               "billed_prompt_tokens", "billed_completion_tokens", "cached_prompt_tokens")
"""The order of the numbers of a ``calls`` event (one list per tag): the fields of
:class:`evolve.llm.Usage`. New counts are only ever appended: an older journal's shorter
lists read as the first counts (the later ones absent, i.e. 0)."""


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
    RACING_NOISE = "racing_noise"
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
    """A client's running totals per tag (``usage``: ``{tag: {count: n}}``), every 30 s and when
    it is released (that last one is complete)."""
    SENT = "sent"
    """A request about to go to the endpoint (``session``, ``tag``), written before it leaves:
    a process killed before its answer is recorded leaves it counted as in flight."""
    UNSENT = "unsent"
    """A request journaled as ``sent`` that the run stopped with unanswered and that never left
    (``session``, ``tag``): every attempt found no connection, so it is not in flight."""
    CALLS = "calls"
    """What a client counted since its previous ``calls`` event (``session``, ``counts``:
    ``{tag: [n per CALL_COUNTS]}``), written with each finished paid call (answered or failed)
    and, for cache hits alone, at most once a second."""
    SPEND_LIMIT = "spend_limit"
    """A process opened its client under a spending limit or with prices (``session``,
    ``max_usd``, ``max_tokens``: None without a limit, ``price``: the fields of
    :class:`evolve.runs.Price` or None, ``spent_before``: under a limit, what earlier processes
    of the run paid, a :class:`evolve.llm.Spend` as a dict)."""
    SPEND_LIMIT_REACHED = "spend_limit_reached"
    """The spending limit refused a call and the run stopped there (``session``, ``message``,
    ``spent``: what the run had paid, ``usd``: that in USD or None)."""
    WARNING = "warning"
    BATCH_UPLOADED = "batch_uploaded"
    """A Batch API input file uploaded (``file_id``, ``lines``, ``custom_ids``), written before
    its batch is created: a resume that finds no ``batch_submitted`` naming the file looks its
    batch up at the endpoint instead of paying again (:class:`evolve.runs.JournalBatchLedger`)."""
    BATCH_SUBMITTED = "batch_submitted"
    """A Batch API batch the endpoint created (``batch_id``, ``lines``, ``custom_ids``: the cache
    keys of its requests, ``file_id``: its input file), written before it is polled: a resume
    polls it instead of paying again (:class:`evolve.runs.JournalBatchLedger`)."""
    BATCH_FINISHED = "batch_finished"
    """A batch whose answers were read (``batch_id``, ``status``, ``answered``, ``failed``), or
    that the endpoint no longer knows (``status`` ``lost``)."""


RESUME_EVENTS = frozenset({Event.RUN_RESUMED, Event.BENCH_RESUMED, Event.OTB_RESUMED})
"""Events that open a resumed process's part of the journal."""

REPLAYED_EVENTS = frozenset({
    Event.CRITERION_STARTED, Event.CANDIDATE_EVALUATED, Event.CANDIDATE_PRUNED, Event.FINALISTS_JUDGED,
    Event.MUTATION_ATTEMPT, Event.EVOLUTION_FINISHED,
    Event.ARCHIVE_SNAPSHOT, Event.MEASURES_CLIPPED, Event.WINNER_SELECTED, Event.REEVALUATION_FINISHED,
    Event.AUDIT_STARTED, Event.AUDIT_FINISHED, Event.RACING_NOISE,
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
        self._write(event, fields, sync=True)

    def note(self, event: Event, **fields: Any) -> None:
        """Append one small, frequent event (a call sent or counted) without fsync: one
        ``write`` to the page cache, which outlives a killed process (not a power cut), at a
        fraction of an fsync's cost. Never skipped as a replay."""
        self._write(Event(event), fields, sync=False)

    def _write(self, event: Event, fields: dict[str, Any], *, sync: bool) -> None:
        record = {"v": JOURNAL_VERSION, "t": round(time.time(), 3), "event": event.value, **fields}
        line = json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":") if not sync else None)
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")  # one write of a whole line: appends of other processes never interleave
            fh.flush()
            if sync:
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
            resumes, replayable = {r.value for r in RESUME_EVENTS}, {r.value for r in REPLAYED_EVENTS}
            seen: list[tuple[int, str]] = []  # (position, identity) of each replayable event: no other is kept
            last_resume = 0
            for i, e in enumerate(self.events()):
                if e.get("event") in resumes:
                    last_resume = i
                elif e.get("event") in replayable:
                    seen.append((i, _identity(e["event"], {k: v for k, v in e.items() if k not in ("v", "t", "event")})))
            self._before_resume = {identity for i, identity in seen if i < last_resume}
        return self._before_resume


def _identity(event: str, fields: dict[str, Any]) -> str:
    return json.dumps([event, fields], sort_keys=True, ensure_ascii=False, default=str)


def run_usage(journal: Journal) -> dict[str, dict[str, int]]:
    """Calls and tokens of a whole run, per tag, summed over every process that worked on it.

    A process (one client ``session``) leaves three kinds of records: ``calls`` events, what it
    counted since the previous one, written with every finished paid call (so a ``kill -9``
    loses none); ``usage`` snapshots of its running totals (every 30 s and, complete, when it
    is released; the only record of journals written before ``calls`` events existed); and
    ``sent`` events, one per request before it goes out. Per session and count, the larger of
    the summed ``calls`` events and the last snapshot counts (each is a lower bound of the
    truth; the final snapshot is the truth), so nothing is counted twice. Snapshots without a
    session (the oldest journals) count one each.

    Returns:
        ``{tag: {"calls", "cache_hits", "failures", "retries", "prompt_tokens",
        "completion_tokens"}}``, plus ``"in_flight"`` when requests were sent and never counted
        as answered or failed (the process was killed or interrupted while they were out: they
        may have been paid); empty when the journal has no usage.
    """
    last: dict[str, dict] = {}
    summed: dict[str, dict[str, dict[str, int]]] = {}
    sent: dict[str, dict[str, int]] = {}
    for i, e in enumerate(journal.events()):
        kind, session = e.get("event"), str(e.get("session") or f"#{i}")
        if kind == Event.USAGE.value and isinstance(e.get("usage"), dict):
            last[session] = e["usage"]
        elif kind == Event.CALLS.value and isinstance(e.get("counts"), dict):
            _add_counts(summed.setdefault(session, {}), e["counts"])
        elif kind in (Event.SENT.value, Event.UNSENT.value):
            tags = sent.setdefault(session, {})
            tags[str(e.get("tag"))] = tags.get(str(e.get("tag")), 0) + (1 if kind == Event.SENT.value else -1)
    total: dict[str, dict[str, int]] = {}
    for session in {*last, *summed, *sent}:
        usage = _larger(last.get(session, {}), summed.get(session, {}))
        for tag, n in sent.get(session, {}).items():
            done = usage.get(tag, {})
            if (out := n - int(done.get("calls", 0)) - int(done.get("failures", 0))) > 0:
                usage.setdefault(tag, {})["in_flight"] = out
        for tag, counts in usage.items():
            into = total.setdefault(tag, {})
            for name, value in counts.items():
                if isinstance(value, int | float):
                    into[name] = into.get(name, 0) + int(value)
    return total


def _add_counts(into: dict[str, dict[str, int]], counts: dict) -> None:
    """Add one ``calls`` event's ``{tag: [n per CALL_COUNTS]}`` into ``into``."""
    for tag, numbers in counts.items():
        if isinstance(numbers, list):
            fields = into.setdefault(tag, {})
            for name, n in zip(CALL_COUNTS, numbers):
                if isinstance(n, int) and n:
                    fields[name] = fields.get(name, 0) + n


def _larger(snapshot: dict, summed: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Per tag and count, the larger of a session's last snapshot and its summed ``calls`` events."""
    out: dict[str, dict[str, int]] = {}
    for tag in {*snapshot, *summed}:
        given = snapshot.get(tag)
        a: dict = given if isinstance(given, dict) else {}
        b = summed.get(tag, {})
        out[tag] = {name: max(int(a.get(name, 0) or 0), b.get(name, 0)) for name in {*a, *b}
                    if isinstance(a.get(name, 0), int | float)}
    return out


def run_endpoint_usage(journal: Journal) -> dict[str, dict[str, int]]:
    """Paid calls and tokens of a run per replica that answered them, summed over its processes.

    Read from the ``endpoints`` field of each process's last ``usage`` snapshot (written every
    30 s and when the client is released; only a run routed over several replicas has one), so
    a process killed outright loses at most its last 30 s here, never in :func:`run_usage`.

    Returns:
        ``{replica URL: {"calls", "prompt_tokens", "completion_tokens", ...}}``; empty for a
        run on one endpoint.
    """
    last: dict[str, dict] = {}
    for i, e in enumerate(journal.events()):
        if e.get("event") == Event.USAGE.value and isinstance(e.get("endpoints"), dict):
            last[str(e.get("session") or f"#{i}")] = e["endpoints"]
    total: dict[str, dict[str, int]] = {}
    for endpoints in last.values():
        for name, counts in endpoints.items():
            if isinstance(counts, dict):
                into = total.setdefault(str(name), {})
                for key, value in counts.items():
                    if isinstance(value, int | float):
                        into[key] = into.get(key, 0) + int(value)
    return total


def run_warnings(journal: Journal) -> list[str]:
    """The warnings a run journaled (``warning`` events: before a calibration starts, a budget too
    small to search, a validation set too small for a verdict, placeholder rubric text; for a
    scoring run, what its judge file says against using it), once each though a resume
    repeats them, in the order first given."""
    seen = [str(e.get("message", "")) for e in journal.events() if e.get("event") == Event.WARNING.value]
    return list(dict.fromkeys(w for w in seen if w))
