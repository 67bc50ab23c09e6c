"""Where a rubric id is looked up: the prompts root given > EVOLVE_PROMPTS_ROOT > the shipped rubrics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evolve.config import resolve_config
from evolve.consilium import resolve_bench_config
from evolve.errors import RubricError
from evolve.otb import resolve_otb_config
from evolve.rubric import (
    PROMPTS_ROOT_ENV,
    default_prompts_root,
    load_initial_guidance,
    load_protocol,
    load_rubric,
    resolve_prompts_root,
    rubric_source,
    shipped_prompts_root,
)

SHIPPED = ("consilium", "kqa-entailment", "otb", "savage-rationale-errors")


def _own_copy(root: Path, rubric_id: str, *, title: str, source: str = "kqa-entailment") -> Path:
    """``root/<rubric_id>``: a copy of a shipped rubric under another id and title."""
    folder = root / rubric_id
    shutil.copytree(shipped_prompts_root() / source, folder)
    raw = json.loads((folder / "rubric.json").read_text(encoding="utf-8"))
    raw.update(id=rubric_id, title=title)
    (folder / "rubric.json").write_text(json.dumps(raw), encoding="utf-8")
    return folder


@pytest.fixture(autouse=True)
def _no_env_root(monkeypatch):
    monkeypatch.delenv(PROMPTS_ROOT_ENV, raising=False)


def test_shipped_root_holds_the_shipped_rubrics():
    root = shipped_prompts_root()
    assert root.is_dir() and default_prompts_root() == root
    for rid in SHIPPED:
        assert (root / rid / "rubric.json").is_file()
        assert rubric_source(rid) == root / rid


def test_resolve_prompts_root_order(tmp_path):
    env = {PROMPTS_ROOT_ENV: str(tmp_path / "from-env")}
    assert resolve_prompts_root(tmp_path / "given", environ=env) == tmp_path / "given"  # explicit first
    assert resolve_prompts_root(None, environ=env) == tmp_path / "from-env"  # then the environment
    assert resolve_prompts_root(None, environ={}) is None  # then: the shipped rubrics only
    assert resolve_prompts_root(None, environ={PROMPTS_ROOT_ENV: "  "}) is None
    assert resolve_prompts_root("~/rubrics", environ={}) == Path.home() / "rubrics"


def test_own_rubric_in_the_given_root(tmp_path):
    _own_copy(tmp_path, "mine", title="My rubric")
    assert load_rubric("mine", root=tmp_path).title == "My rubric"
    assert rubric_source("mine", root=tmp_path) == tmp_path / "mine"
    assert load_protocol("mine", root=tmp_path) == load_protocol("kqa-entailment")
    assert [name for name, _ in load_initial_guidance("mine", "entailment", root=tmp_path)] == ["initial_1", "initial_2"]


def test_given_root_comes_before_the_shipped_rubrics_which_remain_the_fallback(tmp_path):
    _own_copy(tmp_path, "kqa-entailment", title="Edited kqa")
    assert load_rubric("kqa-entailment", root=tmp_path).title == "Edited kqa"
    # a rubric the given root does not hold comes from the shipped ones
    assert rubric_source("consilium", root=tmp_path) == shipped_prompts_root() / "consilium"
    assert load_rubric("consilium", root=tmp_path).id == "consilium"


def test_environment_root_is_used_when_none_is_given(tmp_path, monkeypatch):
    env_root, given = tmp_path / "env", tmp_path / "given"
    _own_copy(env_root, "kqa-entailment", title="From the environment")
    _own_copy(given, "kqa-entailment", title="Given")
    monkeypatch.setenv(PROMPTS_ROOT_ENV, str(env_root))
    assert load_rubric("kqa-entailment").title == "From the environment"
    assert load_rubric("kqa-entailment", root=given).title == "Given"  # explicit beats the environment


def test_one_rubric_folder_is_never_mixed_with_the_shipped_one(tmp_path):
    folder = _own_copy(tmp_path, "kqa-entailment", title="No protocol")
    (folder / "protocol.md").unlink()
    with pytest.raises(RubricError) as info:
        load_protocol("kqa-entailment", root=tmp_path)
    assert str(folder / "protocol.md") in str(info.value)


def test_unknown_rubric_names_every_root_searched_and_the_fixes(tmp_path):
    _own_copy(tmp_path, "mine", title="Mine")
    with pytest.raises(RubricError) as info:
        load_rubric("expert-claims", root=tmp_path)
    msg = str(info.value)
    assert f"the prompts root given {tmp_path} (rubrics: mine)" in msg
    assert f"the shipped rubrics {shipped_prompts_root()} (rubrics: " in msg and "kqa-entailment" in msg
    for fix in ("--prompts-root DIR", f"{PROMPTS_ROOT_ENV}=DIR", "evolve rubric new expert-claims"):
        assert fix in msg
    assert "Pass --prompts-root" not in msg
    with pytest.raises(RubricError) as info:  # without a root: the shipped rubrics only
        load_rubric("expert-claims")
    assert "the prompts root given" not in str(info.value) and "the shipped rubrics" in str(info.value)


def test_a_given_root_that_is_no_folder_is_an_error_not_a_silent_fallback(tmp_path, monkeypatch):
    with pytest.raises(RubricError, match="is not a folder"):
        load_rubric("kqa-entailment", root=tmp_path / "typo")
    monkeypatch.setenv(PROMPTS_ROOT_ENV, str(tmp_path / "typo"))
    with pytest.raises(RubricError, match="is not a folder"):
        load_rubric("kqa-entailment")


@pytest.mark.parametrize("bad", ["", ".", "..", "../kqa-entailment", "a/b"])
def test_rubric_id_must_be_a_plain_folder_name(bad):
    with pytest.raises(RubricError, match="plain folder name"):
        rubric_source(bad)


def test_configs_take_prompts_root_from_the_environment_below_explicit_values(tmp_path):
    env = {PROMPTS_ROOT_ENV: str(tmp_path / "env")}
    base = {"run_id": "r", "pack": "p", "splits": "s"}
    assert resolve_config(overrides=base, environ=env).prompts_root == tmp_path / "env"
    assert resolve_config(overrides={**base, "prompts_root": tmp_path / "cli"}, environ=env).prompts_root == tmp_path / "cli"
    assert resolve_config(overrides=base, environ={}).prompts_root is None
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"prompts_root": str(tmp_path / "file")}), encoding="utf-8")
    assert resolve_config(config_file=config_file, overrides=base, environ={}).prompts_root == tmp_path / "file"
    assert resolve_config(config_file=config_file, overrides=base, environ=env).prompts_root == tmp_path / "env"
    bench = resolve_bench_config(overrides={"run_id": "b", "cases": "c.jsonl"}, environ=env)
    assert bench.prompts_root == tmp_path / "env"
    otb = resolve_otb_config(overrides={"run_id": "o", "board": "task1.jsonl"}, environ=env)
    assert otb.prompts_root == tmp_path / "env"
