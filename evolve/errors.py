"""One error tree for `evolve`, rooted at :class:`EvolveError`.

Every message says what went wrong *and how to fix it* (in the spirit of optuna's
``DuplicatedStudyError`` suggesting ``load_if_exists``). Catch :class:`EvolveError` to handle
anything the toolkit raises on purpose; anything else is a bug.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import unicodedata
from pathlib import Path
from typing import Literal

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
    "SpendLimitReachedError",
    "EndpointConnectionError",
    "EndpointServerError",
    "UnsupportedFeatureError",
    "RunError",
    "RunLockedError",
    "NoWinnerError",
    "MissingExtraError",
    "EXTRAS",
    "require_extra",
    "Problems",
    "TEXT_PROBLEM_FIX",
    "char_name",
    "path_problem",
    "text_problem",
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
    few such attempts in a row stop the run (:class:`EndpointUnreachableError`).

    Attributes:
        unsent: The request never left: no connection was made (refused, DNS, connect timeout),
            so nothing can have been paid. False when the connection dropped with the request
            possibly received.
    """

    def __init__(self, message: str, *, unsent: bool = False) -> None:
        super().__init__(message)
        self.unsent = unsent


class EndpointServerError(TransientEndpointError):
    """The server behind the endpoint failed the request (HTTP 5xx): retried; with several
    replicas (:class:`evolve.llm.RoutingProvider`) a replica that keeps answering so is taken
    out and its calls go to the next one."""


class RunStoppedError(EvolveError):
    """An error that stops a run part-way because every later call would fail the same way.

    Finished calls are in the response cache: the run resumes (``--resume``) once the cause
    is fixed. Engines never record it as a per-item failure.
    """


class EndpointUnreachableError(RunStoppedError):
    """Several connection attempts in a row failed; the message names the endpoint's URL,
    the last connection error and what to check."""


class SpendLimitReachedError(RunStoppedError):
    """The next model call could take the run past its spending limit (``--max-usd`` or
    ``--max-tokens``), so it was not sent.

    The run stops cleanly like any :class:`RunStoppedError`: finished calls are cached and a
    resume with a higher limit (``--resume RUN --max-usd MORE``) pays nothing twice. The
    message names the limit, what was spent and what the refused call was estimated to cost.
    """


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


class RunLockedError(RunError):
    """Another process is writing the run folder (it holds the folder's lock). The message
    names the folder, the holder's pid, host and start time, and the fix: wait for it, stop
    it, or choose another run id. A killed holder's lock is gone with it (never stale)."""


class NoWinnerError(RunError):
    """A criterion ended without a selectable candidate (none reached ``min_coverage``); the
    other criteria of the run still finish and are reported."""


class MissingExtraError(EvolveError):
    """A feature needs a package that only one of evolve's extras installs (the message names
    the ``pip install 'evolve[...]'`` to run)."""


EXTRAS: dict[str, tuple[str, ...]] = {
    "otb": ("rouge_score", "wordllama", "tokenizers", "safetensors"),
    "parquet": ("pyarrow",),
}
"""The optional extras and the modules each provides (``pyproject.toml``'s optional dependencies)."""


def require_extra(extra: str, what: str) -> None:
    """Check that the modules of ``extra`` can be imported, before any work or money is spent.

    Args:
        extra: A key of :data:`EXTRAS` (``otb``, ``parquet``).
        what: The feature that needs it, for the message (``"OpenTumorBoard's metrics"``).

    Raises:
        MissingExtraError: A module of the extra is not installed; the message gives the
            ``pip install`` command that adds it.
    """
    from importlib.util import find_spec

    missing = [m for m in EXTRAS[extra] if find_spec(m) is None]
    if missing:
        raise MissingExtraError(f"{what} needs {', '.join(missing)}, which the core install leaves out. Install the "
                                f"extra: pip install 'evolve[{extra}]'")


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


# Problems of user text: one check for every loader of text that may reach a prompt.

_FORBIDDEN_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Characters user text may not hold: C0 controls but tab, line feed and carriage return; DEL;
C1 controls; the bidirectional embeddings/overrides (U+202A-U+202E) and isolates
(U+2066-U+2069), which make a text display in a different order than a model reads it."""

_CONTROL_NAMES = {
    0x00: "NULL", 0x07: "BELL", 0x08: "BACKSPACE", 0x0B: "LINE TABULATION", 0x0C: "FORM FEED",
    0x1B: "ESCAPE", 0x7F: "DELETE",
}

TEXT_PROBLEM_FIX = (
    "Remove the character (or replace it with a space) in the source file and import again; "
    "evolve refuses control and bidirectional-override characters because they reach prompts invisibly."
)
"""The fix to print after a :func:`text_problem` message."""


def char_name(char: str) -> str:
    """``U+XXXX NAME`` for one character (``U+0000 NULL``, ``U+202E RIGHT-TO-LEFT OVERRIDE``);
    controls without a Unicode name are called ``CONTROL CHARACTER`` unless they are common."""
    code = ord(char)
    name = _CONTROL_NAMES.get(code) or unicodedata.name(char, "CONTROL CHARACTER")
    return f"U+{code:04X} {name}"


def text_problem(value: object) -> str | None:
    """Why a piece of user text (a case text, a comment, a rubric file) may not reach a prompt,
    or ``None`` when it may.

    Refused: C0 control characters other than tab, line feed and carriage return (NUL, ESC ...),
    DEL, C1 controls (U+0080-U+009F) and the bidirectional embedding/override/isolate characters
    U+202A-U+202E and U+2066-U+2069 - invisible characters that can hide or reorder text a model
    reads. Non-strings are not checked (``None`` is returned); type checks are the caller's.

    Args:
        value: The text.

    Returns:
        ``None``, or a message naming the first such character and its 1-based position, e.g.
        ``"holds U+202E RIGHT-TO-LEFT OVERRIDE at character 12 (3 such characters in all)"``.
        The raw character is never echoed. Callers add file, line and field, and
        :data:`TEXT_PROBLEM_FIX`.
    """
    if not isinstance(value, str):
        return None
    match = _FORBIDDEN_CHARS.search(value)
    if match is None:
        return None
    message = f"holds {char_name(match.group())} at character {match.start() + 1}"
    count = len(_FORBIDDEN_CHARS.findall(value))
    return message + (f" ({count} such characters in all)" if count > 1 else "")


# Problems of user paths: say what is there instead of "missing".


def path_problem(path: Path | str, kind: Literal["file", "folder"] = "file") -> str | None:
    """Why ``path`` cannot be opened as a ``kind``, or None when it can.

    Distinguishes what a bare "file is missing" hides: a folder given where a file is expected
    (and the reverse), a symbolic-link loop, a broken link, a device or pipe, no permission.

    Args:
        path: The path a user gave (or one built from it).
        kind: ``file`` (a regular file, links followed) or ``folder``.

    Returns:
        None, or a phrase to put after the path: ``"is a directory, not a file: pass the file
        inside it"``, ``"is a symbolic-link loop ..."``, ``"does not exist"`` ... The part
        before a colon reads on its own; callers add their own fix.
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        return _stat_failure(path, kind, exc)
    if kind == "file" and stat.S_ISDIR(info.st_mode):
        return "is a directory, not a file: pass the file inside it"
    if kind == "file" and not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a device, pipe or socket): pass a file"
    if kind == "folder" and not stat.S_ISDIR(info.st_mode):
        return "is a file, not a folder: pass the folder that holds it"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied): give yourself read access or copy it"
    return None


def _stat_failure(path: Path, kind: str, exc: OSError) -> str:
    """The phrase of :func:`path_problem` for a path that cannot even be looked at."""
    if exc.errno == errno.ELOOP:
        return (f"is a symbolic-link loop (the link leads back to itself): point it at a real {kind}, or pass the "
                f"{kind} itself")
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        if path.is_symlink():
            return f"is a broken symbolic link (to {os.readlink(path)}, which does not exist): fix the link or pass the {kind}"
        return "does not exist"
    if exc.errno == errno.EACCES:
        return "cannot be reached (permission denied on a folder on its way)"
    return f"cannot be opened ({exc.strerror or type(exc).__name__})"
