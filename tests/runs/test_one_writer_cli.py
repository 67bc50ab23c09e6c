"""Real ``evolve calibrate`` processes on one run id against a loopback endpoint that counts its
requests: a second process and a ``--resume`` of the running run are refused in one line (the
holder's pid named, nothing written); after ``kill -9`` of the holder the journal already counts
the calls it was answered, and a resume proceeds (no stale lock) to a report whose usage equals
the endpoint's request count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evolve.runs import Journal, run_usage
from tests.faults.test_fault_injection import FaultyEndpoint

_CLI = [sys.executable, "-c", "from evolve.cli import main; main()"]


class _GatedEndpoint(FaultyEndpoint):
    """Answers the first ``open_for`` requests; later ones wait for ``gate`` (the run stays busy
    for as long as the test needs, whatever the machine's speed)."""

    def __init__(self, open_for: int) -> None:
        self.open_for = open_for
        self.gate = threading.Event()
        super().__init__()

    def _respond(self, body: dict):
        if len(self.bodies) > self.open_for:
            self.gate.wait(timeout=600)
        return super()._respond(body)


def _events(run: Path, name: str) -> int:
    return sum(1 for e in Journal(run / "journal.jsonl").events() if e["event"] == name)


def _refused(args: list[str], env: dict[str, str], holder: int) -> str:
    result = subprocess.run([*_CLI, *args], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and f"process {holder} " in lines[0], result.stderr
    return lines[0]


@pytest.mark.slow  # whole evolve processes, started and killed (~30 s of CPU)
def test_one_process_per_run_id_and_kill_9_leaves_usage_and_no_lock(tmp_path, tiny_pack_dir, tiny_splits_dir):
    endpoint = _GatedEndpoint(open_for=12)
    run = tmp_path / "archives" / "r"
    args = ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir), "--run-id", "r",
            "--archives-dir", str(tmp_path / "archives"), "--base-url", endpoint.base_url, "--model", "scripted",
            "--no-audit", "--accepted", "1", "--max-attempts", "2", "--batch-size", "1"]
    env = {**os.environ, "EVOLVE_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1", "COLUMNS": "400"}
    holder = subprocess.Popen([*_CLI, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while len(endpoint.bodies) < 14 and holder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # 12 answered, 2 (max_concurrency) waiting at the gate
        assert holder.poll() is None and len(endpoint.bodies) == 14, endpoint.bodies
        message = _refused(args, env, holder.pid)  # the same command again
        assert str(run) in message and "another --run-id" in message
        _refused(["calibrate", "--resume", str(run)], env, holder.pid)  # a resume of the running run
        assert _events(run, "run_started") == 1 and _events(run, "run_resumed") == 0  # the refused wrote nothing
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    endpoint.gate.set()
    usage = run_usage(Journal(run / "journal.jsonl"))["judge"]  # no usage snapshot was due yet (every 30 s)
    assert usage["calls"] == 12 and usage["in_flight"] == 2 and "failures" not in usage, usage  # = the endpoint's 14

    again = subprocess.run([*_CLI, "calibrate", "--resume", str(run)], env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr  # the killed holder left no lock
    total = json.loads((run / "report.json").read_text())["usage"]["total"]
    assert total["calls_made"] <= len(endpoint.bodies) <= total["calls_made"] + total.get("in_flight", 0), \
        (len(endpoint.bodies), total)
    assert not (run / ".lock").exists()
    endpoint.close()
