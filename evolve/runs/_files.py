"""Writing run files: whole or not at all."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["atomic_write", "holds_interrupt"]


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


def holds_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is, or is an exception group holding, a KeyboardInterrupt."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    return any(holds_interrupt(e) for e in getattr(exc, "exceptions", ()) if isinstance(e, BaseException))
