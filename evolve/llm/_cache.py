"""Persistent response cache (SQLite), keyed on the full request."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from evolve.llm._types import ChatResponse


class ResponseCache:
    """A SQLite table ``key -> ChatResponse`` shared by every run on this machine.

    Only complete responses are stored, so a failed or interrupted call is paid again on
    resume while every finished one is free. Safe to use from several threads.

    Args:
        path: SQLite file; parent folders are created. ``":memory:"`` for a throwaway cache.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            # a commit survives the process being killed at any point; only a power cut or an OS
            # crash can lose the last few answers (paid again), never the file: WAL's NORMAL level
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, response TEXT NOT NULL, created REAL)"
            )
            self._conn.commit()

    def get(self, key: str) -> ChatResponse | None:
        """Return the cached response (marked ``cached=True``) or None."""
        with self._lock:
            row = self._conn.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return ChatResponse.model_validate_json(row[0]).model_copy(update={"cached": True, "latency_s": 0.0})

    def put(self, key: str, response: ChatResponse) -> None:
        """Store a response (committed immediately, so a process killed right after loses nothing)."""
        with self._lock:
            self._conn.execute(
                # the time is written here: SQLite before 3.42 has no unixepoch('subsec') default
                "INSERT OR REPLACE INTO responses (key, response, created) VALUES (?, ?, ?)",
                (key, response.model_copy(update={"cached": False}).model_dump_json(), time.time()),
            )
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
