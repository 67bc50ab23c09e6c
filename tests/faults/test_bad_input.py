"""Bad input ends in one named error - never a traceback, never a half-written run."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app

runner = CliRunner()
CORPUS = Path(__file__).with_name("corpus")

CONFIG_DEFECTS = {
    "list.json": "holds one JSON object of settings",
    "null.json": "holds one JSON object of settings",
    "section-as-string.json": "'budget' must be an object of settings",
    "bad-number.json": "'budget.accepted'",
    "broken.json": "cannot read config JSON",
    "not-utf8.json": "cannot read config JSON",
}


@pytest.mark.parametrize("name", sorted(CONFIG_DEFECTS))
def test_calibrate_refuses_a_bad_config_file(name: str, tmp_path: Path, tiny_pack_dir: Path, tiny_splits_dir: Path) -> None:
    archives = tmp_path / "archives"
    args = ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir), "--archives-dir", str(archives),
            "--config", str(CORPUS / "config" / name)]
    args += ["--run-id", "r"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert CONFIG_DEFECTS[name] in result.output
    assert "Traceback" not in result.output
    assert not archives.exists()  # nothing written


@pytest.mark.parametrize("run_id", ["..", ".", "..."])
def test_a_run_id_never_leaves_the_archives_folder(run_id: str, tmp_path: Path, tiny_pack_dir: Path,
                                                   tiny_splits_dir: Path) -> None:
    archives = tmp_path / "deep" / "archives"
    result = runner.invoke(app, ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir),
                                 "--archives-dir", str(archives), "--run-id", run_id])
    assert result.exit_code == 2 and "a run id is a folder name" in result.output
    assert not (tmp_path / "deep").exists()
    result = runner.invoke(app, ["bench", "run", "--cases", str(tiny_pack_dir), "--archives-dir", str(archives),
                                 "--run-id", run_id])
    assert result.exit_code == 2 and "a run id is a folder name" in result.output
    assert not (tmp_path / "deep").exists()
