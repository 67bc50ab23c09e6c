"""What only some users need is an extra: a missing one is named with the install that adds it."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from evolve.data import load_cases
from evolve.errors import EXTRAS, MissingExtraError, require_extra

REPO = Path(__file__).resolve().parents[2]


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` look uninstalled to :func:`require_extra`."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a))


def test_a_missing_extra_is_named_with_its_install(monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra("otb", "OpenTumorBoard")  # the test install has every extra
    _without(monkeypatch, "wordllama")
    with pytest.raises(MissingExtraError) as err:
        require_extra("otb", "OpenTumorBoard's embedding similarity")
    assert str(err.value) == ("OpenTumorBoard's embedding similarity needs wordllama, which the core install leaves "
                              "out. Install the extra: pip install 'evolve[otb]'")


def test_a_parquet_case_file_without_pyarrow_says_which_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cases.parquet"
    pd.DataFrame({"doi": ["c1"], "title": ["t"], "case_text": ["text"], "answer": ["a"]}).to_parquet(path)
    assert [c.case_id for c in load_cases(path)] == ["c1"]
    _without(monkeypatch, "pyarrow")
    with pytest.raises(MissingExtraError, match=re.escape(f"{path}: reading a Parquet file needs pyarrow")) as err:
        load_cases(path)
    assert "pip install 'evolve[parquet]'" in str(err.value)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is in the standard library from Python 3.11")
def test_the_extras_of_pyproject_provide_the_modules_evolve_names() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    core = {re.split(r"[<>=\[ ]", d)[0].lower() for d in project["dependencies"]}
    for extra, modules in EXTRAS.items():
        names = {re.split(r"[<>=\[ ]", d)[0].lower().replace("-", "_") for d in extras[extra]}
        assert set(modules) <= names, (extra, modules, names)
        assert not {m.replace("_", "-") for m in modules} & core, f"{extra}'s modules are in the core install too"
    assert "evolve[otb,parquet]" in extras["test"] and "evolve[otb,parquet]" in extras["all"]
