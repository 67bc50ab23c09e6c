"""Every ``evolve.…`` Python name the READMEs write exists, and the user's README names no
private module.

A dotted name (``evolve.data.import_table``, ``evolve.llm.SpendLimit``,
``evolve.runs.RunFolder.exclusive``) is resolved attribute by attribute from ``import evolve``,
importing a subpackage where the attribute is a module not yet loaded. A function renamed or
moved then fails here, not in a reader's hands; a private module (``_name``) in README.md is a
user pointed at code that may change without notice (folder READMEs for contributors may name
them).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

READMES = sorted([REPO / "README.md", *REPO.glob("*/README.md")])
NAME = re.compile(r"\bevolve(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _names(path: Path) -> list[str]:
    return sorted(set(NAME.findall(path.read_text("utf-8"))))


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    obj: object = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=2):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            return False
    return True


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_python_name_a_readme_writes_exists(readme: Path) -> None:
    missing = [name for name in _names(readme) if not _resolves(name)]
    assert not missing, f"{readme.relative_to(REPO)} names what evolve does not have: {missing}"


def test_the_users_readme_names_no_private_module() -> None:
    private = [name for name in _names(REPO / "README.md") if any(p.startswith("_") for p in name.split("."))]
    assert not private, f"README.md points users at private names: {private}"


def test_the_check_sees_the_names_and_refuses_a_made_up_one() -> None:
    names = _names(REPO / "README.md")
    assert {"evolve.calibrate", "evolve.data.import_table", "evolve.outputs.read_run"} <= set(names)
    assert _resolves("evolve.runs.RunFolder.exclusive") and not _resolves("evolve.data.import_tables")
    assert not _resolves("evolve.nothing_here")
