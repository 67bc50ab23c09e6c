"""Progress of long work: the hook engines report to, and one that draws nothing."""

from __future__ import annotations

from typing import Protocol

__all__ = ["NoProgress", "ProgressHook"]


class ProgressHook(Protocol):
    """Receives progress from an engine (the CLI draws it with rich).

    Work may run concurrently (criteria, cases), so every call names its ``key``; a hook
    keeps one bar per key. Calls may come from several threads.
    """

    def phase(self, description: str, total: int, key: str = "") -> None: ...

    def advance(self, n: int = 1, key: str = "") -> None: ...


class NoProgress:
    """A progress hook that draws nothing (the default of the library functions)."""

    def phase(self, description: str, total: int, key: str = "") -> None:
        pass

    def advance(self, n: int = 1, key: str = "") -> None:
        pass
