"""One error tree for `evolve`, rooted at :class:`EvolveError`.

Every message says what went wrong *and how to fix it* (in the spirit of optuna's
``DuplicatedStudyError`` suggesting ``load_if_exists``). Catch :class:`EvolveError` to handle
anything the toolkit raises on purpose; anything else is a bug.
"""

from __future__ import annotations

__all__ = [
    "EvolveError",
    "ConfigError",
    "DataError",
    "PackError",
    "SplitError",
    "RubricError",
    "EndpointError",
    "TransientEndpointError",
    "BudgetError",
    "LocalServerError",
    "ServerDiedError",
    "RunStoppedError",
    "EndpointUnreachableError",
    "EndpointConnectionError",
    "UnsupportedFeatureError",
    "RunError",
    "NoWinnerError",
    "Problems",
]


class EvolveError(Exception):
    """Root of every error `evolve` raises on purpose."""


class ConfigError(EvolveError):
    """A configuration value is missing, malformed or inconsistent."""


class DataError(EvolveError):
    """Input data cannot be read or does not match what the toolkit expects.

    Messages name the file, the row (1-based, as a spreadsheet shows it) and the field,
    then the fix.
    """


class PackError(DataError):
    """A rating pack is malformed or internally inconsistent."""


class SplitError(DataError):
    """A split manifest is malformed, overlapping or does not match its pack."""


class RubricError(DataError):
    """A rubric or judge prompt file under ``judge_prompts/`` is malformed."""


class EndpointError(EvolveError):
    """The model endpoint refused or failed a request in a way retries cannot fix."""


class TransientEndpointError(EndpointError):
    """A failure worth retrying: HTTP 429, 5xx, a timeout or a dropped connection."""


class UnsupportedFeatureError(EndpointError):
    """The endpoint does not offer a feature at all (e.g. ``/v1/embeddings``): asking again
    cannot help, so the client remembers the answer per endpoint."""


class EndpointConnectionError(TransientEndpointError):
    """No connection to the endpoint (refused, reset, DNS, timeout): retried, and counted - a
    few such attempts in a row stop the run (:class:`EndpointUnreachableError`)."""


class RunStoppedError(EvolveError):
    """An error that stops a run part-way because every later call would fail the same way.

    Finished calls are in the response cache: the run resumes (``--resume``) once the cause
    is fixed. Engines never record it as a per-item failure.
    """


class EndpointUnreachableError(RunStoppedError):
    """Several connection attempts in a row failed; the message names the endpoint's URL,
    the last connection error and what to check."""


class BudgetError(EvolveError):
    """A budget setting makes the requested run impossible (e.g. fewer attempts than accepted)."""


class LocalServerError(EvolveError):
    """The embedded llama-server could not be installed, started or reached."""


class ServerDiedError(LocalServerError, RunStoppedError):
    """The embedded llama-server died during a run.

    The run stops at once (every remaining call would fail the same way) and can be resumed:
    finished calls are in the response cache. The message names the cause and the fix.
    """


class RunError(EvolveError):
    """A run directory is missing, incomplete or was made by a different configuration."""


class NoWinnerError(RunError):
    """A criterion ended without a selectable candidate (none reached ``min_coverage``); the
    other criteria of the run still finish and are reported."""


class Problems:
    """Collects located problems and raises them together as one error.

    Readers of user files report every defect at once, not the first one: each problem is one
    line ``<where>: <what>. <fix>``, listed under a heading, at most ``limit`` of them shown.

    Args:
        heading: First line of the message, e.g. ``"rating pack ratings/kqa is invalid"``.
        error: The :class:`EvolveError` subclass to raise.
        limit: Problems shown; the rest are counted.
    """

    def __init__(self, heading: str, error: type[EvolveError] = EvolveError, limit: int = 20) -> None:
        self.heading = heading
        self.error = error
        self.limit = limit
        self.cause: BaseException | None = None
        self._items: list[tuple[tuple, int, str]] = []

    def add(self, where: str, message: str = "", fix: str = "", *, order: tuple = ()) -> None:
        """Record one problem.

        Args:
            where: File, row, field - whatever locates it (or the whole line, without ``message``).
            message: What is wrong.
            fix: How to fix it.
            order: Sort key; problems are shown by it, then in the order they were added.
        """
        text = f"{where}: {message.rstrip('.')}. {fix}".rstrip() if message else where
        self._items.append((order, len(self._items), text))

    @property
    def items(self) -> list[str]:
        """The problem lines, in report order."""
        return [text for _, _, text in sorted(self._items, key=lambda item: item[:2])]

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def raise_if_any(self) -> None:
        """Raise one ``error`` listing the problems (chained to :attr:`cause`); return if none."""
        if not self._items:
            return
        items, n = self.items, len(self._items)
        lines = [f"{self.heading} ({n} problem{'s' if n != 1 else ''}):"]
        lines += [f"  - {item}" for item in items[: self.limit]]
        if n > self.limit:
            lines.append(f"  ... and {n - self.limit} more problem(s) not shown; fix the ones above and re-run.")
        raise self.error("\n".join(lines)) from self.cause
