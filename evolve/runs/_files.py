"""Writing run files: whole or not at all."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

__all__ = ["atomic_write", "holds_interrupt", "replace_folder"]


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a hidden temporary file, fsync and a rename.

    A reader (or a resumed run after a kill) sees the old file or the new one, never half of
    one. The folder is created when missing; the temporary file is removed on any failure.

    Args:
        path: Destination file.
        data: Text (written as UTF-8, newlines untouched) or bytes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_folder(dest: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write a whole folder at once: ``files`` go into a hidden sibling of ``dest`` (each file
    fsynced), which then replaces ``dest`` by renames (an existing ``dest`` is swapped out and
    removed). A reader sees the old folder or the new one, never a mix; a failure while writing
    removes the hidden folder and leaves ``dest`` as it was (one between the two renames leaves
    the old folder beside it as ``.<name>.old-*``).

    Args:
        dest: The folder to write (created or replaced).
        files: Content by path relative to ``dest`` (``/``-separated; subfolders are created);
            text is written as UTF-8.

    Returns:
        ``dest``.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()  # same filesystem as dest, so the renames are atomic
    try:
        for rel, data in files.items():
            atomic_write(tmp / rel, data)
        if dest.exists():
            old = dest.parent / f".{dest.name}.old-{uuid.uuid4().hex[:12]}"
            os.replace(dest, old)
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def holds_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is, or is an exception group holding, a KeyboardInterrupt."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    return any(holds_interrupt(e) for e in getattr(exc, "exceptions", ()) if isinstance(e, BaseException))
