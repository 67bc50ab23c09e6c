"""A run killed while writing its files: `evolve report` and `evolve audit` either report or
refuse in one line naming the file and the resume command - never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.config import resolve_config
from evolve.runs import CalibrationFolder
from evolve.workflows import run_calibration

runner = CliRunner()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evolve.data import load_pack, write_pack
    from evolve.llm import Client, ResponseCache
    from evolve.splits import make_splits, write_splits
    from evolve.testing import FakeProvider
    from tests.conftest import fake_endpoint, make_tiny_pack

    tmp = tmp_path_factory.mktemp("finished")
    write_pack(make_tiny_pack(), tmp / "pack")
    write_splits(make_splits(load_pack(tmp / "pack"), seed=0), tmp / "splits")
    config = resolve_config(preset="quick", environ={}, overrides={
        "run_id": "r", "pack": tmp / "pack", "splits": tmp / "splits", "archives_dir": tmp / "archives",
        "budget": {"accepted": 1, "max_attempts": 2, "batch_size": 1}})
    with Client(FakeProvider(fake_endpoint), cache=ResponseCache(tmp / "cache.sqlite")) as client:
        return run_calibration(config, client=client).run_dir


@pytest.mark.parametrize("mode", ["empty", "missing"])
@pytest.mark.parametrize("name", [CalibrationFolder.CANDIDATES, CalibrationFolder.SCORES, CalibrationFolder.EXCLUSIONS,
                                  CalibrationFolder.AUDIT_JSON])
def test_report_and_audit_on_a_half_written_run(finished_run: Path, tmp_path: Path, name: str, mode: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    if mode == "empty":
        (run / name).write_text("")
    else:
        (run / name).unlink()
    for command in (["report", str(run)], ["audit", str(run), "--no-llm", "--no-embeddings"]):  # no model at all
        result = runner.invoke(app, command)
        assert result.exit_code in (0, 2), (command, result.output)
        assert not (result.exception and not isinstance(result.exception, SystemExit)), result.exception
        if result.exit_code == 2:
            error = [line for line in result.output.splitlines() if line.startswith("error:")]
            assert error and name in result.output and f"evolve calibrate --resume {run}" in result.output
    if name in (CalibrationFolder.CANDIDATES, CalibrationFolder.SCORES):  # required: the report refuses
        assert runner.invoke(app, ["report", str(run)]).exit_code == 2
