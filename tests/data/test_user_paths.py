"""A user path that is a directory, a symbolic-link loop or a broken link is named as such, never
reported as "file is missing" (issue 24 item 5)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from evolve.config import resolve_config
from evolve.data import load_cases, load_consilium_records, load_pack
from evolve.errors import ConfigError, DataError, PackError, RubricError, SplitError, path_problem
from evolve.otb._records import open_jsonl
from evolve.rubric import load_rubric
from evolve.splits import load_splits
from tests.data.conftest import REPO_ROOT

LOOP = "is a symbolic-link loop"
DIRECTORY = "is a directory, not a file"


@pytest.fixture()
def loop(tmp_path: Path) -> Path:
    link = tmp_path / "loop"
    os.symlink(link, link)  # a link to itself
    return link


def test_path_problem_tells_the_cases_apart(tmp_path: Path, loop: Path) -> None:
    (tmp_path / "file.txt").write_text("x", encoding="utf-8")
    os.symlink(tmp_path / "gone", tmp_path / "broken")
    assert path_problem(tmp_path / "file.txt") is None and path_problem(tmp_path, "folder") is None
    assert path_problem(tmp_path / "nope") == "does not exist"
    assert path_problem(tmp_path).startswith(DIRECTORY) and "pass the file inside it" in path_problem(tmp_path)
    assert path_problem(tmp_path / "file.txt", "folder").startswith("is a file, not a folder")
    assert path_problem(loop).startswith(LOOP) and path_problem(loop / "x", "folder").startswith(LOOP)
    assert path_problem(tmp_path / "broken").startswith(f"is a broken symbolic link (to {tmp_path / 'gone'}")
    if Path("/dev/null").exists():
        assert path_problem("/dev/null").startswith("is not a regular file")


def test_case_file_loop_and_directory(tmp_path: Path, loop: Path) -> None:
    with pytest.raises(DataError, match=f"the case file {LOOP}"):
        load_cases(loop)
    (tmp_path / "cases.jsonl").mkdir()  # a folder named like the file, without the file in it
    with pytest.raises(DataError, match="cases.jsonl: a folder without cases.jsonl. Pass the case file inside it"):
        load_cases(tmp_path / "cases.jsonl")
    (tmp_path / "pack").mkdir()
    os.symlink(tmp_path / "pack" / "cases.jsonl", tmp_path / "pack" / "cases.jsonl")
    with pytest.raises(DataError, match=f"the case file {LOOP}"):
        load_cases(tmp_path / "pack")  # a folder means its cases.jsonl, here a loop


def test_pack_file_that_is_a_directory_or_a_loop_is_not_called_missing(tmp_path: Path, loop: Path) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(REPO_ROOT / "ratings" / "example", pack)
    (pack / "ratings.csv").unlink()
    (pack / "ratings.csv").mkdir()
    (pack / "cases.jsonl").unlink()
    os.symlink(pack / "cases.jsonl", pack / "cases.jsonl")
    with pytest.raises(PackError) as err:
        load_pack(pack)
    message = str(err.value)
    assert f"ratings.csv: {DIRECTORY}" in message and f"cases.jsonl: {LOOP}" in message
    assert "file is missing" not in message
    with pytest.raises(PackError, match=f"loop: the pack {LOOP}"):
        load_pack(loop)


def test_config_file_that_is_a_directory_or_a_loop(tmp_path: Path, loop: Path) -> None:
    for path, said in ((tmp_path, DIRECTORY), (loop, LOOP)):
        with pytest.raises(ConfigError, match=f"the config file {said}"):
            resolve_config(config_file=path, overrides={"run_id": "r", "pack": "p", "splits": "s"}, environ={})


def test_split_manifest_that_is_a_directory(tmp_path: Path, loop: Path) -> None:
    from evolve.splits import make_splits, write_splits

    split_dir = tmp_path / "splits"
    write_splits(make_splits(load_pack(REPO_ROOT / "ratings" / "example")), split_dir)
    (split_dir / "train.txt").unlink()
    (split_dir / "train.txt").mkdir()
    with pytest.raises(SplitError, match=f"train.txt: {DIRECTORY}"):
        load_splits(split_dir)
    with pytest.raises(SplitError, match=f"the split directory {LOOP}"):
        load_splits(loop)


def test_table_records_and_otb_files(tmp_path: Path, loop: Path) -> None:
    with pytest.raises(PackError, match=f"the table {LOOP}"):
        _check_table_file(loop)
    with pytest.raises(DataError, match=f"the records folder {LOOP}"):
        load_consilium_records(loop)
    with pytest.raises(DataError, match=DIRECTORY):
        open_jsonl(tmp_path)


def _check_table_file(path: Path) -> None:
    from evolve.data._table import _check_file  # what import_table runs first on each file

    _check_file(path)


def test_prompts_root_loop(loop: Path) -> None:
    with pytest.raises(RubricError, match=rf"Python's prompts_root=\) {LOOP}"):
        load_rubric("kqa-entailment", root=loop)


def test_rubric_folder_is_unaffected(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(REPO_ROOT / "judge_prompts" / "kqa-entailment", root / "kqa-entailment")
    assert load_rubric("kqa-entailment", root=root).id == "kqa-entailment"
    assert json.loads((root / "kqa-entailment" / "rubric.json").read_text(encoding="utf-8"))["id"] == "kqa-entailment"
