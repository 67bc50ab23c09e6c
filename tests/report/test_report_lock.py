"""A report rebuilt into a run folder that another process is writing is refused in one line
(the holder named, exit 2, nothing written); once the holder is gone (even by kill -9) it is
rebuilt. Reading the run needs no lock."""

from __future__ import annotations

import signal
import subprocess
import sys

from typer.testing import CliRunner

from evolve.cli import app
from tests.report.conftest import bench_folder

_HOLD = """
import sys, time
from evolve.runs import BenchFolder
with BenchFolder(sys.argv[1]).exclusive():
    print("held", flush=True)
    time.sleep(600)
"""


def test_bench_report_is_refused_while_another_process_writes_the_run_and_rebuilt_after_its_kill(tmp_path):
    run = bench_folder(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
        refused = CliRunner().invoke(app, ["bench", "report", str(run), "--no-html"])
        assert refused.exit_code == 2, refused.output
        assert f"being written by process {holder.pid} " in refused.output and "Traceback" not in refused.output
        assert {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()} == before  # nothing written
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    rebuilt = CliRunner().invoke(app, ["bench", "report", str(run), "--no-html"])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert (run / "bench_report.json").is_file() and not (run / ".lock").exists()


_HOLD_CALIBRATION = """
import sys, time
from evolve.runs import CalibrationFolder
with CalibrationFolder(sys.argv[1]).exclusive():
    print("held", flush=True)
    time.sleep(600)
"""


def test_report_of_a_run_still_being_written_names_its_writer_not_a_missing_file(tmp_path):
    """Before (issue 24 new-user check): `evolve report` on a calibration still running read the
    run first and said "scores.csv: not found ... complete the run with --resume" - advice the
    lock would then refuse. The lock is now taken before anything is read."""
    run = tmp_path / "archives" / "running"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}", encoding="utf-8")  # started, nothing scored yet
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_CALIBRATION, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = CliRunner().invoke(app, ["report", str(run), "--no-html"])
        assert refused.exit_code == 2, refused.output
        assert f"being written by process {holder.pid} " in refused.output, refused.output
        assert "not found" not in refused.output and "--resume" not in refused.output.split("process")[0]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
