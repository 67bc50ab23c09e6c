"""Append-only run journal (one JSON event per line), in the spirit of optuna's JournalStorage."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

JOURNAL_VERSION = 1


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

    def append(self, event: str, **fields: Any) -> None:
        """Append one event."""
        record = {"v": JOURNAL_VERSION, "t": round(time.time(), 3), "event": event, **fields}
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
