"""Small helpers shared by the importers."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from evolve.rubric import load_rubric

TITLE_WIDTH = 80
"""Maximum length of an imported case title, in characters."""


def shorten(text: str, width: int = TITLE_WIDTH) -> str:
    """Collapse whitespace and cut ``text`` to at most ``width`` characters at a word boundary.

    A cut title ends in ``...`` (counted in ``width``).
    """
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    cut = flat[: width - 3]
    if " " in cut[width // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:.") + "..."


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def is_missing(value: Any) -> bool:
    """True for ``None``, NaN and blank strings (how spreadsheets spell an empty cell)."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def rubric_version(rubric_id: str, prompts_root: Path | str | None) -> str:
    """The version string of a rubric under the prompts root (raises RubricError if absent)."""
    return load_rubric(rubric_id, root=Path(prompts_root) if prompts_root is not None else None).version
