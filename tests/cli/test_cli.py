"""The command line: thin commands, clear errors, exit codes."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.config import resolve_config
from evolve.workflows import run_calibration as calibrate
from tests.conftest import REPO

runner = CliRunner()
EXAMPLE = REPO / "ratings" / "example"


def test_version_is_the_installed_distributions():
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"evolve {version('evolve')}\n"


def test_sigterm_stops_a_command_as_itself_exit_143_not_ctrl_cs_130():
    import os
    import signal
    import time

    import pytest
    import typer

    from evolve.cli._app import Terminated, _guarded, _interrupt_on_sigterm

    mine = signal.getsignal(signal.SIGTERM)
    def ctrl_c() -> None:
        raise KeyboardInterrupt

    for stop, code in ((lambda: os.kill(os.getpid(), signal.SIGTERM), 143), (ctrl_c, 130)):
        with pytest.raises(typer.Exit) as exit_:
            with _guarded(lambda: None, lambda: "interrupted"):
                _interrupt_on_sigterm()
                stop()
                time.sleep(5)  # the handler raises before this ends
        assert exit_.value.exit_code == code
    assert signal.getsignal(signal.SIGTERM) is mine
    assert f"{Terminated.__name__}: {Terminated('SIGTERM')}" == "Terminated: SIGTERM"  # as a journal records it


def test_a_slow_server_check_is_not_printed_as_0_tok_s():
    from evolve.cli._app import _rate

    assert [_rate(v) for v in (59.3, 12.0, 4.23, 0.384)] == ["59", "12", "4.2", "0.38"]


def test_ratings_check_prints_counts():
    result = runner.invoke(app, ["ratings", "check", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_targets"] == 8


def test_ratings_check_names_file_row_and_fix(tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(EXAMPLE, bad)
    with open(bad / "ratings.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[0].update(score="7", not_evaluable="false")  # off the 0-2 scale
    with open(bad / "ratings.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = runner.invoke(app, ["ratings", "check", str(bad)])
    assert result.exit_code == 2
    assert "ratings.csv" in result.output and "row 2" in result.output and "score" in result.output


def test_unknown_importer_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["ratings", "import", "nope", str(tmp_path), "--out", str(tmp_path / "p")])
    assert result.exit_code == 2 and "kqa" in result.output


def test_splits_make_then_check(tmp_path):
    out = tmp_path / "s"
    result = runner.invoke(app, ["splits", "make", str(EXAMPLE), "--out", str(out), "--holdout-fraction", "0.25",
                                 "--validation-fraction", "0.5"])
    assert result.exit_code == 0, result.output
    assert (out / "train.txt").is_file() and (out / "holdout.txt").read_text().strip()
    result = runner.invoke(app, ["splits", "check", str(out), "--pack", str(EXAMPLE)])
    assert result.exit_code == 0 and "ok" in result.output
    # a different seed into the same folder must not silently replace the manifests
    result = runner.invoke(app, ["splits", "make", str(EXAMPLE), "--out", str(out), "--seed", "1",
                                 "--holdout-fraction", "0.25", "--validation-fraction", "0.5"])
    assert result.exit_code == 2 and "overwrite" in result.output


def test_calibrate_needs_a_pack():
    result = runner.invoke(app, ["calibrate"])
    assert result.exit_code == 2 and "--pack" in result.output


def test_calibrate_reports_budget_errors_before_any_call(tmp_path):
    result = runner.invoke(app, ["calibrate", "--pack", str(EXAMPLE), "--splits", str(tmp_path),
                                 "--accepted", "5", "--max-attempts", "2", "--archives-dir", str(tmp_path)])
    assert result.exit_code == 2 and "max_attempts" in result.output


def test_resume_of_a_missing_run_is_explained(tmp_path):
    result = runner.invoke(app, ["calibrate", "--resume", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "config.json" in result.output


def test_report_rebuilds_from_artifacts(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    config = resolve_config(preset="quick", environ={}, overrides={
        "run_id": "r", "pack": tiny_pack_dir, "splits": tiny_splits_dir, "archives_dir": tmp_path / "a",
        "budget": {"accepted": 1, "max_attempts": 2, "batch_size": 1}})
    run = calibrate(config, client=fake_client).run_dir
    before = (run / "report.json").read_text()
    (run / "report.json").unlink()
    (run / "report.md").unlink()
    replicates = json.loads(before)["bootstrap"]["n_boot"]  # what the run's own report used (light in tests)
    result = runner.invoke(app, ["report", str(run), "--n-boot", str(replicates)])
    assert result.exit_code == 0, result.output
    assert (run / "report.json").read_text() == before and (run / "report.md").is_file()


def test_a_spending_stop_names_the_higher_limit_once(capsys) -> None:
    """``evolve judge`` repeats the command as given: a limit in it is replaced, not repeated
    (a new-user check saw ``--max-usd 0.005 --resume --max-usd MORE``)."""
    import typer

    from evolve.cli._app import _fail
    from evolve.errors import SpendLimitReachedError

    for given in ("--max-usd 0.005", "--max-usd=0.005"):
        with pytest.raises(typer.Exit):
            _fail(SpendLimitReachedError("the USD limit (--max-usd 0.005) would be passed"),
                  resume=f"evolve judge t.csv --judge archives/cal {given} --run-id j --resume")
        said = " ".join(capsys.readouterr().err.split())
        assert said.endswith("evolve judge t.csv --judge archives/cal --run-id j --resume --max-usd MORE"), said


def test_a_rejudge_command_is_quoted_for_a_shell(tmp_path) -> None:
    import shlex
    from types import SimpleNamespace

    from evolve.cli._app import _rejudge_command, _without_option

    options = SimpleNamespace(run_dir=tmp_path / "my run", guidance=tmp_path / "judge file.json", price_in=1.0,
                              price_out=2.0, price_cached_in=None, price_batch_in=None, price_batch_out=None, batch_api=True)
    command = _rejudge_command("evolve bench judge", options, "--repeats 2")
    assert shlex.split(command) == ["evolve", "bench", "judge", str(tmp_path / "my run"), "--guidance",
                                    str(tmp_path / "judge file.json"), "--repeats", "2", "--price-in", "1.0",
                                    "--price-out", "2.0", "--batch"]
    assert shlex.split(_without_option(command + " --max-usd 3", "--max-usd")) == shlex.split(command)
