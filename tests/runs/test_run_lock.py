"""One writing process per run folder: an OS lock on the folder, refused at once to a second
process (named error: folder, holder's pid, the fix), dropped by the kernel when its holder dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evolve.errors import RunError, RunLockedError
from evolve.runs import CalibrationFolder, Journal, lock_holder, locks_run, run_lock, run_usage

_HOLD = """
import sys, time
from evolve.runs import CalibrationFolder
with CalibrationFolder(sys.argv[1]).exclusive():
    print("held", flush=True)
    time.sleep(600)
"""


def _holder(folder: Path) -> subprocess.Popen:
    """Another process holding the folder's lock (it says so on stdout)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_with_the_holders_pid_and_kill_9_leaves_no_stale_lock(tmp_path):
    run = tmp_path / "archives" / "r"
    proc = _holder(run)
    try:
        with pytest.raises(RunLockedError) as refused, CalibrationFolder(run).exclusive():
            pytest.fail("two processes hold one run folder")
        message = str(refused.value)
        assert str(run) in message and f"process {proc.pid}" in message and "another --run-id" in message
        assert isinstance(refused.value, RunError)  # the CLI prints it as one line, exit 2
        assert lock_holder(run)["pid"] == proc.pid and CalibrationFolder(run).holder()["pid"] == proc.pid
        assert sorted(p.name for p in run.iterdir()) == [".lock"]  # the refused process wrote nothing
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert (run / ".lock").exists()  # the killed holder's file is left; its lock is not
    assert lock_holder(run) is None
    with CalibrationFolder(run).exclusive() as folder:
        assert lock_holder(run)["pid"] == os.getpid()
        folder.write("x.txt", "written")
    assert not (run / ".lock").exists() and (run / "x.txt").read_text() == "written"


def test_the_lock_is_reentrant_in_one_process_and_a_folder_it_made_for_nothing_is_removed(tmp_path):
    run = tmp_path / "archives" / "fresh"
    with run_lock(run):
        with CalibrationFolder(run).exclusive():  # a workflow's engine and report lock the folder again
            assert run.is_dir()
        assert lock_holder(run)["pid"] == os.getpid()  # still held by the outer block
    assert not (tmp_path / "archives").exists()  # made by the lock, nothing written: nothing left behind

    @locks_run(lambda run_dir, **_: run_dir)
    def writer(run_dir: Path, *, text: str) -> str:
        assert lock_holder(run_dir)["pid"] == os.getpid()
        (run_dir / "out.txt").write_text(text)
        return text

    assert writer(run, text="t") == "t" and sorted(p.name for p in run.iterdir()) == ["out.txt"]


def test_readers_of_a_finished_run_need_no_lock(tmp_path):
    run = tmp_path / "r"
    Journal(run / "journal.jsonl").append("usage", session="s", usage={"judge": {"calls": 2}})
    proc = _holder(run)
    try:
        assert run_usage(CalibrationFolder(run).journal()) == {"judge": {"calls": 2}}
        assert CalibrationFolder(run).read_json("missing.json", optional=True) is None
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
