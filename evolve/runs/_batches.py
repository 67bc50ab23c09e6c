"""A run's Batch API submissions, remembered in its journal so that a killed run's resume polls
them instead of paying again."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from evolve.llm import BatchOptions
from evolve.runs._journal import Event, Journal

__all__ = ["JournalBatchLedger", "run_batch_options"]


class JournalBatchLedger:
    """A :class:`~evolve.llm.BatchLedger` kept in a run's ``journal.jsonl``.

    ``batch_uploaded`` (``file_id``, ``lines``, ``custom_ids``: the cache keys of its lines) is
    appended and fsynced once the input file is uploaded, before the batch is created;
    ``batch_submitted`` (``batch_id``, ``lines``, ``custom_ids``, ``file_id``) as soon as the
    endpoint has created the batch, before the first poll. A process killed while the batch
    runs (``kill -9`` included) leaves it behind, and a resume that needs any of those requests
    polls that batch and reads its answers; one killed while the endpoint created the batch
    leaves an uploaded file without a batch, whose batch the resume finds by listing the
    endpoint's batches (or creates from the file, if the endpoint never made it).
    ``batch_finished`` (``batch_id``, ``status``, ``answered``, ``failed``) marks it read.

    Args:
        journal: The run's journal.
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._lock = threading.Lock()

    def uploaded(self, file_id: str, custom_ids: Sequence[str]) -> None:
        with self._lock:
            self.journal.append(Event.BATCH_UPLOADED, file_id=file_id, lines=len(custom_ids), custom_ids=list(custom_ids))

    def submitted(self, batch_id: str, custom_ids: Sequence[str], file_id: str = "") -> None:
        with self._lock:
            self.journal.append(Event.BATCH_SUBMITTED, batch_id=batch_id, lines=len(custom_ids),
                                custom_ids=list(custom_ids), file_id=file_id)

    def finished(self, batch_id: str, *, status: str, answered: int, failed: int) -> None:
        with self._lock:
            self.journal.append(Event.BATCH_FINISHED, batch_id=batch_id, status=status, answered=answered,
                                failed=failed)

    def pending(self) -> list[tuple[str, frozenset[str]]]:
        """Batches the journal records as submitted and not finished, oldest first."""
        return self._open(Event.BATCH_SUBMITTED, "batch_id", Event.BATCH_FINISHED, "batch_id")

    def unclaimed(self) -> list[tuple[str, frozenset[str]]]:
        """Input files the journal records as uploaded that no ``batch_submitted`` names."""
        return self._open(Event.BATCH_UPLOADED, "file_id", Event.BATCH_SUBMITTED, "file_id")

    def _open(self, opened: Event, key: str, closed: Event, closing_key: str) -> list[tuple[str, frozenset[str]]]:
        """``(id, custom_ids)`` of the ``opened`` events (by ``key``) that no ``closed`` event
        names (by ``closing_key``), oldest first."""
        found: dict[str, frozenset[str]] = {}
        ended: set[str] = set()
        for event in self.journal.events():
            kind = event.get("event")
            if kind == opened.value and isinstance(event.get("custom_ids"), list):
                found[str(event.get(key))] = frozenset(str(x) for x in event["custom_ids"])
            elif kind == closed.value:
                ended.add(str(event.get(closing_key, "")))
        return [(k, ids) for k, ids in found.items() if k not in ended]


def run_batch_options(journal: Journal | None, *, poll_initial_s: float = 10.0,
                      on_note: Callable[[str], None] | None = None, submit: bool = True) -> BatchOptions:
    """The :class:`~evolve.llm.BatchOptions` of a run: its batches journaled
    (:class:`JournalBatchLedger`; in memory without a journal), polled at once, then after
    ``poll_initial_s`` seconds and at growing intervals up to ten minutes (``submit`` False:
    only the journaled batches are polled, nothing new is submitted)."""
    return BatchOptions(ledger=JournalBatchLedger(journal) if journal is not None else None,
                        poll_initial_s=poll_initial_s, on_note=on_note, submit=submit)
