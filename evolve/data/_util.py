"""Small helpers shared by the importers."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from evolve.errors import TEXT_PROBLEM_FIX as TEXT_PROBLEM_FIX  # the text check lives in evolve.errors (floor 0)
from evolve.errors import PackError, path_problem
from evolve.errors import char_name as char_name  # so that rubric loading (floor 2) can use it too
from evolve.errors import text_problem as text_problem
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


def cell_text(value: Any) -> str:
    """A table cell as stripped text (``''`` when :func:`is_missing`); a spreadsheet's ``3.0``
    reads as ``'3'``."""
    if is_missing(value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def unreadable_table(path: Path, exc: Exception, fix: str, kind: str = "a table") -> str:
    """The message for a table pandas could not parse: for a CSV row with more cells than the
    header (pandas: ``Expected 4 fields in line 5, saw 5``) or a quote never closed, the line and
    the fix; else that it cannot be read as ``kind``, in the parser's words on one line, then ``fix``."""
    import re

    text = " ".join(str(exc).split())
    cells = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", text)
    if path.suffix.lower() == ".csv" and cells is not None:
        expected, line, saw = cells.groups()
        return (f"{path}, line {line}: {saw} cells where the header has {expected}: usually a comma in a cell that is "
                "not quoted, or a quote opened on an earlier line and never closed (the rows between are read as one "
                "cell). Quote cells that hold commas and close every quote (a quote inside a quoted cell is written "
                "twice: \"\"), then try again.")
    if path.suffix.lower() == ".csv" and "EOF inside string" in text:
        line = re.search(r"starting at row (\d+)", text)
        where = f", line {int(line.group(1)) + 1}" if line else ""
        return (f"{path}{where}: a quote is opened and never closed, so the rest of the file would be read into one "
                "cell. Close the quote (a quote inside a quoted cell is written twice: \"\"), then try again.")
    return f"{path}: cannot be read as {kind} ({type(exc).__name__}: {text[:160]}). {fix}"


def read_source_table(path: Path, original: str) -> Any:
    """Read a source data set's table (``.csv`` as UTF-8 text, else the first sheet of an
    ``.xlsx``) with every cell as given, refusing what cannot be a data set.

    Args:
        path: The file.
        original: How to name the file a user should pass instead (in messages).

    Returns:
        A pandas DataFrame with at least one data row.

    Raises:
        PackError: The file is missing, a directory or a symbolic-link loop, empty, not UTF-8
            text, not a spreadsheet, unparseable, or holds a header and no rows - naming the
            file and what to pass instead.
    """
    import zipfile

    import pandas as pd

    if (problem := path_problem(path)) is not None:
        raise PackError(f"{path}: {problem}. Pass {original}.")
    try:
        if path.suffix.lower() == ".csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        else:
            frame = pd.read_excel(path, sheet_name=0, dtype=object, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        raise PackError(f"{path}: the file is empty. Pass {original}.") from None
    except UnicodeDecodeError as exc:
        raise PackError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}). Save it as UTF-8 (CSV UTF-8), "
                        f"or pass {original}.") from None
    except (pd.errors.ParserError, ValueError, zipfile.BadZipFile, KeyError, OSError) as exc:
        raise PackError(unreadable_table(path, exc, f"Pass {original}.")) from None
    if frame.empty:
        raise PackError(f"{path}: holds a header but no rows. Pass {original}.")
    return frame


def rubric_version(rubric_id: str, prompts_root: Path | str | None) -> str:
    """The version string of a rubric under the prompts root (raises RubricError if absent)."""
    return load_rubric(rubric_id, root=Path(prompts_root) if prompts_root is not None else None).version
