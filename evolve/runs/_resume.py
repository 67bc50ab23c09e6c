"""The one resume check: a run folder either starts empty or resumes with the same settings."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evolve.errors import RunError
from evolve.runs._folder import KINDS, folder_kind

__all__ = ["check_resumable", "check_same_settings"]


def check_resumable(run_dir: Path, marker: str, resume: bool, *, what: str = "a run", resume_flag: str = "--resume",
                    kind: str | None = None) -> bool:
    """Whether there is a run to resume in ``run_dir``, after refusing the three mistakes: a
    folder holding another kind of run, a run started again, nothing to resume.

    Args:
        run_dir: The run folder.
        marker: The file every started run has (``config.json``, ``manifest.json``).
        resume: Whether the user asked to resume.
        what: How to name the run in messages (``"a benchmark run"``).
        resume_flag: The option to suggest for continuing it.
        kind: The kind of run this is (a key of :data:`~evolve.runs.KINDS`); a folder holding
            another kind is refused, resumed or not (None: not checked).

    Returns:
        True when the folder holds a run (and ``resume`` is set); False for a fresh start.

    Raises:
        RunError: The folder holds another kind of run; or it holds a run and ``resume`` is
            false; or ``resume`` is set and there is nothing to resume.
    """
    found = folder_kind(run_dir) if kind is not None else None
    if found is not None and found != kind:
        raise RunError(f"{run_dir} holds {KINDS[found]}, not {what}: nothing of it is read or written. Choose another "
                       "--run-id (Python: run_id=) or archives folder.")
    if (Path(run_dir) / marker).exists():
        if not resume:
            raise RunError(
                f"{run_dir} already holds {what}. Pass {resume_flag} to continue it (finished calls are "
                "free from the cache; Python: resume=True), or choose another --run-id (Python: run_id=)."
            )
        return True
    if resume:
        raise RunError(f"{run_dir}: nothing to resume (no {marker}). Start the run without --resume (Python: "
                       "resume=False).")
    return False


def check_same_settings(path: Path, stored: Mapping[str, Any], current: Mapping[str, Any], *, ignore: tuple[str, ...] = (),
                        hint: str = "omit options to reuse the stored ones") -> None:
    """Refuse to resume with settings that change what the run computes.

    Args:
        path: The file the stored settings come from (named in the message).
        stored: The run's settings, as JSON-like data.
        current: This invocation's settings, same shape.
        ignore: Top-level keys that do not change the result (folder, run id, parallelism).
        hint: How to resume with the stored settings.

    Raises:
        RunError: Naming every top-level key that differs, then each differing field as a dotted
            path with its stored and current values (``decoding.temperature: 0.0 then, 0.5 now``).
    """
    diff = sorted(k for k in (set(stored) | set(current)) - set(ignore) if stored.get(k) != current.get(k))
    if diff:
        fields = [f for k in diff for f in _differences(k, stored.get(k, _UNSET), current.get(k, _UNSET))]
        shown = "; ".join(f"{name}: {_shown(then)} then, {_shown(now)} now" for name, then, now in fields[:_SHOWN])
        more = f"; and {len(fields) - _SHOWN} more" if len(fields) > _SHOWN else ""
        raise RunError(
            f"{path}: the stored configuration differs from this one in {diff} ({shown}{more}). Resume with the same "
            f"settings ({hint}), or start a new --run-id."
        )


_UNSET = object()
_SHOWN = 6
"""How many differing fields a refusal names before counting the rest."""


def _differences(name: str, then: Any, now: Any) -> list[tuple[str, Any, Any]]:
    """The fields under ``name`` that differ, as ``(dotted name, stored, current)``."""
    if isinstance(then, Mapping) and isinstance(now, Mapping):
        keys = sorted(set(then) | set(now), key=str)
        return [f for k in keys if then.get(k, _UNSET) != now.get(k, _UNSET)
                for f in _differences(f"{name}.{k}", then.get(k, _UNSET), now.get(k, _UNSET))]
    return [(name, then, now)]


def _shown(value: Any) -> str:
    text = "unset" if value is _UNSET else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
