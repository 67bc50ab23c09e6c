"""pyproject.toml lists the packages (judge_prompts/ ships as evolve.judge_prompts): none may be missing."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")


def _setuptools() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _data_folders() -> set[str]:
    """The folders of package data that Python could import as namespace packages (every part of
    their path a name): setuptools warns, with a deprecation, for each one not listed."""
    rubric = {".".join(("evolve", *d.relative_to(REPO).parts)) for d in (REPO / "judge_prompts").rglob("*")
              if d.is_dir() and all(part.isidentifier() for part in d.relative_to(REPO).parts)}
    return rubric | {"evolve.outputs.schemas"}


def test_every_subpackage_of_evolve_is_listed():
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "evolve").rglob("__init__.py")}
    listed = set(_setuptools()["packages"])
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - on_disk == {"evolve.judge_prompts"} | _data_folders()


def test_every_data_folder_is_listed():
    missing = _data_folders() - set(_setuptools()["packages"])
    assert not missing, f"add these data folders to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"
    assert "evolve.judge_prompts.consilium.guidance.clinical_safety" in _data_folders()


def test_rubrics_ship_as_package_data():
    config = _setuptools()
    assert config["package-dir"] == {"evolve.judge_prompts": "judge_prompts"}
    assert (REPO / "judge_prompts").is_dir() and (REPO / "evolve" / "py.typed").is_file()
    data = config["package-data"]
    assert "py.typed" in data["evolve"]
    # every file a rubric folder holds, also in rubric folders added later
    assert {"**/*.json", "**/*.md"} <= set(data["evolve.judge_prompts"])
    kinds = {p.suffix for p in (REPO / "judge_prompts").rglob("*") if p.is_file()}
    assert kinds <= {".json", ".md"}, f"judge_prompts/ holds files the wheel would leave out: {kinds}"
