"""Loading rubrics, protocols and initial guidance from ``judge_prompts/``.

Layout of one rubric folder (``judge_prompts/<rubric_id>/``)::

    rubric.json                  # Rubric (criteria, anchors, applicability, version)
    protocol.md                  # fixed judge protocol (system message)
    guidance/<criterion_id>/*.md # initial guidance candidates, sorted by file name
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from evolve.errors import RubricError
from evolve.rubric._models import Rubric

MAX_GUIDANCE_CHARS = 800
"""Upper bound on a guidance prompt, in characters (SPEC §4; longer candidates are rejected)."""


def default_prompts_root() -> Path:
    """The ``judge_prompts/`` folder shipped with the project (next to the package)."""
    return Path(__file__).resolve().parents[2] / "judge_prompts"


def _rubric_dir(root: Path | None, rubric_id: str) -> Path:
    root = Path(root) if root is not None else default_prompts_root()
    path = root / rubric_id
    if not (path / "rubric.json").is_file():
        known = sorted(p.name for p in root.iterdir() if (p / "rubric.json").is_file()) if root.is_dir() else []
        raise RubricError(
            f"{path / 'rubric.json'}: no such rubric. Known rubrics under {root}: {known or 'none'}. "
            "Pass --prompts-root to point at another judge_prompts folder, or fix the pack's "
            "pack.json 'rubric.id'."
        )
    return path


def load_rubric(rubric_id: str, *, root: Path | None = None, version: str | None = None) -> Rubric:
    """Load and validate ``<root>/<rubric_id>/rubric.json``.

    Args:
        rubric_id: Folder name under the prompts root.
        root: The ``judge_prompts`` folder; defaults to the project's.
        version: If given, the rubric file's version must equal it.

    Raises:
        RubricError: Missing file, invalid JSON, schema violation or version mismatch.
    """
    path = _rubric_dir(root, rubric_id) / "rubric.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RubricError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg}); fix the syntax.") from exc
    try:
        rubric = Rubric.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise RubricError(f"{path}: field '{loc}': {first['msg']}. Fix the rubric file.") from exc
    if rubric.id != rubric_id:
        raise RubricError(f"{path}: 'id' is {rubric.id!r} but the folder is {rubric_id!r}; make them equal.")
    if version is not None and rubric.version != version:
        raise RubricError(
            f"{path}: rubric version is {rubric.version!r} but {version!r} was requested (by the pack). "
            "Re-import the pack against this rubric version, or restore the matching rubric file."
        )
    return rubric


def load_protocol(rubric_id: str, *, root: Path | None = None) -> str:
    """Return the fixed judge protocol text (``protocol.md``) of a rubric.

    Raises:
        RubricError: The file is missing or empty.
    """
    path = _rubric_dir(root, rubric_id) / "protocol.md"
    if not path.is_file() or not path.read_text(encoding="utf-8").strip():
        raise RubricError(f"{path}: missing or empty judge protocol; write the protocol text there.")
    return path.read_text(encoding="utf-8").strip()


def load_initial_guidance(rubric_id: str, criterion_id: str, *, root: Path | None = None) -> list[tuple[str, str]]:
    """Return the initial guidance candidates of one criterion as ``(name, text)`` pairs.

    Files are ``guidance/<criterion_id>/*.md``, sorted by name; the name is the file stem.

    Raises:
        RubricError: No candidate files, or a candidate longer than 800 characters.
    """
    folder = _rubric_dir(root, rubric_id) / "guidance" / criterion_id
    files = sorted(folder.glob("*.md")) if folder.is_dir() else []
    if not files:
        raise RubricError(
            f"{folder}: no initial guidance candidates (*.md). Write at least one short guidance file "
            f"(<= {MAX_GUIDANCE_CHARS} characters) there."
        )
    out = []
    for f in files:
        text = f.read_text(encoding="utf-8").strip()
        if not text or len(text) > MAX_GUIDANCE_CHARS:
            raise RubricError(
                f"{f}: guidance has {len(text)} characters; it must be 1..{MAX_GUIDANCE_CHARS}. Shorten it."
            )
        out.append((f.stem, text))
    return out
