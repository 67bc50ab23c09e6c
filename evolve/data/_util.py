"""Small helpers shared by the importers."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from pathlib import Path
from typing import Any

from evolve.errors import PackError
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


def cell_text(value: Any) -> str:
    """A table cell as stripped text (``''`` when :func:`is_missing`); a spreadsheet's ``3.0``
    reads as ``'3'``."""
    if is_missing(value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def read_source_table(path: Path, original: str) -> Any:
    """Read a source data set's table (``.csv`` as UTF-8 text, else the first sheet of an
    ``.xlsx``) with every cell as given, refusing what cannot be a data set.

    Args:
        path: The file.
        original: How to name the file a user should pass instead (in messages).

    Returns:
        A pandas DataFrame with at least one data row.

    Raises:
        PackError: The file is empty, not UTF-8 text, not a spreadsheet, unparseable, or holds a
            header and no rows - naming the file and what to pass instead.
    """
    import zipfile

    import pandas as pd

    try:
        if path.suffix.lower() == ".csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        else:
            frame = pd.read_excel(path, sheet_name=0, dtype=object)
    except pd.errors.EmptyDataError:
        raise PackError(f"{path}: the file is empty. Pass {original}.") from None
    except UnicodeDecodeError as exc:
        raise PackError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}). Save it as UTF-8 (CSV UTF-8), "
                        f"or pass {original}.") from None
    except (pd.errors.ParserError, ValueError, zipfile.BadZipFile, KeyError, OSError) as exc:
        raise PackError(f"{path}: cannot be read as a table ({type(exc).__name__}: {str(exc)[:160]}). "
                        f"Pass {original}.") from None
    if frame.empty:
        raise PackError(f"{path}: holds a header but no rows. Pass {original}.")
    return frame


def rubric_version(rubric_id: str, prompts_root: Path | str | None) -> str:
    """The version string of a rubric under the prompts root (raises RubricError if absent)."""
    return load_rubric(rubric_id, root=Path(prompts_root) if prompts_root is not None else None).version
