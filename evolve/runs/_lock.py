"""One writing process per run folder: an operating-system lock the kernel drops when its holder dies.

The lock is an exclusive ``flock`` (POSIX; a byte-range ``msvcrt`` lock on Windows) on a hidden
file inside the run folder, taken without waiting. The kernel releases it when the process ends,
however it ends (``kill -9`` included), so a lock is never stale: the file's *existence* means
nothing, only the lock on it does. While it holds the lock, the process writes its pid, host and
start time into the file, so that a refused process can say who is writing.

Held locks are counted per process (re-entrant): a workflow that locks a run folder can call
engines and report writers that lock the same folder again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

from evolve.errors import RunLockedError

__all__ = ["LOCK_FILE", "lock_holder", "locks_run", "run_lock"]

P = ParamSpec("P")
R = TypeVar("R")

LOCK_FILE = ".lock"
"""The lock file's name inside a run folder (removed again when its holder finishes)."""

_INFO_OFFSET = 1  # the holder's record starts after byte 0, the byte Windows locks


class _Held:
    """A lock this process holds: the open file and how many ``run_lock`` blocks hold it."""

    def __init__(self, fd: int, made: list[Path]) -> None:
        self.fd = fd
        self.count = 1
        self.made = made  # the folders the lock created, deepest first


_held: dict[str, _Held] = {}
_registry = threading.Lock()


@contextlib.contextmanager
def run_lock(folder: Path | str, *, what: str = "run folder") -> Iterator[None]:
    """Hold the exclusive lock of ``folder`` for the block (creating the folder if needed).

    Taken at once or refused, never waited for. Re-entrant within a process. On the last
    release the lock file is removed (while still locked), and so are the folder and its parents
    that this lock created, when nothing else was written into them.

    Args:
        folder: The run folder.
        what: How messages name it (``"run folder"``, ``"report folder"``).

    Raises:
        RunLockedError: Another process holds the lock; names the folder, the holder's pid,
            host and start time, and the fix.
    """
    folder = Path(folder)
    key = os.path.abspath(folder)
    with _registry:
        held = _held.get(key)
        if held is not None:
            held.count += 1
        else:
            held = _held[key] = _acquire(folder, what)
    try:
        yield
    finally:
        with _registry:
            held.count -= 1
            if held.count == 0:
                del _held[key]
                _release(folder, held)


def locks_run(folder_of: Callable[..., Path | str | None]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function that writes a run folder so that it runs under :func:`run_lock`.

    Args:
        folder_of: Called with the function's own arguments; returns the run folder it writes
            (or None: nothing to lock, e.g. an audit asked not to write), e.g.
            ``lambda config, **_: config.run_dir``.
    """
    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def locked(*args: P.args, **kwargs: P.kwargs) -> R:
            folder = folder_of(*args, **kwargs)
            if folder is None:
                return fn(*args, **kwargs)
            with run_lock(folder):
                return fn(*args, **kwargs)
        return locked
    return decorate


def lock_holder(folder: Path | str) -> dict | None:
    """The record the lock's holder wrote (``pid``, ``host``, ``started``, ``command``), or None
    when no process holds the lock of ``folder`` (a record left by a killed holder is not one)."""
    path = Path(folder) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        if _try_lock(fd):
            _unlock(fd)
            return None
        return _read_info(fd)
    finally:
        os.close(fd)


def _acquire(folder: Path, what: str) -> _Held:
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(fd):
            info = _read_info(fd)
            os.close(fd)
            raise RunLockedError(_locked_message(folder, what, info))
        if _same_file(fd, path):  # not a file its last holder removed while we opened it
            break
        _unlock(fd)
        os.close(fd)
    _write_info(fd)
    return _Held(fd, made)


def _release(folder: Path, held: _Held) -> None:
    try:
        if sys.platform != "win32":  # removed while locked: a waiter that opened it finds it gone and retries
            with contextlib.suppress(OSError):
                os.unlink(folder / LOCK_FILE)
            for made in held.made:  # only while empty: a run that never wrote anything leaves nothing
                try:
                    made.rmdir()
                except FileNotFoundError:
                    continue  # removed already (the clean-up of a start that failed): its parents may go
                except OSError:
                    break
    finally:
        _unlock(fd=held.fd)
        os.close(held.fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def _try_lock(fd: int) -> bool:
    """Lock ``fd`` exclusively without waiting; False when another process holds it."""
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":  # pragma: no cover
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


def _write_info(fd: int) -> None:
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": " ".join(sys.argv)[:300]}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b" " * _INFO_OFFSET + json.dumps(info).encode("utf-8") + b"\n")


def _read_info(fd: int) -> dict:
    os.lseek(fd, _INFO_OFFSET, os.SEEK_SET)
    try:
        data = json.loads(os.read(fd, 4096).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return {}  # the holder has not written its record yet
    return data if isinstance(data, dict) else {}


def _locked_message(folder: Path, what: str, info: dict) -> str:
    who = (f"process {info.get('pid', '?')} on {info.get('host', '?')} (started {info.get('started', '?')}"
           + (f": {info['command']}" if info.get("command") else "") + ")") if info else "another process"
    return (f"{folder}: this {what} is being written by {who}. One process writes a run at a time: wait for it to "
            "finish (or stop it; a resume then continues where it stopped), or choose another --run-id.")
