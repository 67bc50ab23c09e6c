"""``kill -9`` at any moment of ``evolve calibrate``: the folder left behind is completed by
``--resume`` into the same run an uninterrupted process makes, and ``evolve report`` on it
either reports or refuses in one line - never a traceback, never a half-written file.

The run is a real ``evolve`` process against an in-process OpenAI-compatible endpoint with a
little latency; the kill moments spread over the whole run, the write phase at its end included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.runs import RunFolder
from tests.faults.test_fault_injection import FaultyEndpoint

runner = CliRunner()
_CLI = [sys.executable, "-c", "from evolve.cli import main; main()"]
_FRACTIONS = (0.05, 0.25, 0.45, 0.65, 0.8, 0.9, 0.95, 0.99)


def _args(tmp_path: Path, pack: Path, splits: Path, base_url: str, run_id: str) -> list[str]:
    return ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", run_id, "--archives-dir",
            str(tmp_path / "archives"), "--base-url", base_url, "--model", "scripted", "--accepted", "2",
            "--max-attempts", "3", "--batch-size", "1"]


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "EVOLVE_CACHE_DIR": str(cache), "NO_COLOR": "1", "COLUMNS": "200"}


def _tables(run: Path) -> dict[str, pd.DataFrame]:
    scores = pd.read_csv(run / "scores.csv", dtype=str, keep_default_na=False).drop(columns=["cached"])
    candidates = pd.read_csv(run / "candidates.csv", dtype=str, keep_default_na=False)
    return {"scores": scores, "candidates": candidates}


def _files(run: Path) -> dict[Path, int]:
    """The run's files and their modification times, without the lock file: a killed holder
    leaves it behind (it is no lock then), and the next process to take the lock removes it."""
    if not run.exists():
        return {}
    return {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file() and p.name != RunFolder.LOCK}


def _one_line_or_report(run: Path) -> None:
    """``evolve report`` reports, or refuses in one line; nothing half-written either way."""
    before = _files(run)
    result = subprocess.run([*_CLI, "report", str(run)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
        assert _files(run) == before  # a refusal writes nothing
    for path in run.rglob("*"):
        assert not (path.is_file() and path.stat().st_size == 0 and path.suffix in {".csv", ".json", ".md"}), path


@pytest.mark.slow  # ~2 min: 9 evolve processes, 8 of them killed
@pytest.mark.timeout(900)
def test_kill_9_at_any_moment_leaves_a_folder_that_resume_completes(tmp_path, tiny_pack_dir, tiny_splits_dir):
    endpoint = FaultyEndpoint()
    endpoint.latency_s = 0.02
    try:
        start = time.monotonic()
        ref = subprocess.run([*_CLI, *_args(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint.base_url, "ref")],
                             env=_env(tmp_path / "cache-ref"), capture_output=True, text=True, timeout=300)
        elapsed = time.monotonic() - start
        assert ref.returncode == 0, ref.stderr
        reference = _tables(tmp_path / "archives" / "ref")
        left: list[tuple[str, ...]] = []  # what each kill left behind

        for i, fraction in enumerate(_FRACTIONS):
            run_id, cache = f"kill{i}", tmp_path / f"cache-{i}"
            args = _args(tmp_path, tiny_pack_dir, tiny_splits_dir, endpoint.base_url, run_id)
            proc = subprocess.Popen([*_CLI, *args], env=_env(cache), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(elapsed * fraction)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            run = tmp_path / "archives" / run_id
            left.append(tuple(sorted(p.name for p in run.glob("*"))) if run.exists() else ())
            _one_line_or_report(run)

            if (run / "config.json").exists():
                again = subprocess.run([*_CLI, "calibrate", "--resume", str(run)], env=_env(cache),
                                       capture_output=True, text=True, timeout=300)
            else:  # killed before the run existed: --resume says so in one line; the command starts it
                refused = runner.invoke(app, ["calibrate", "--resume", str(run)])
                assert refused.exit_code == 2 and "not a calibration run" in refused.output
                again = subprocess.run([*_CLI, *args], env=_env(cache), capture_output=True, text=True, timeout=300)
            assert again.returncode == 0, (fraction, again.stderr)
            resumed = _tables(run)
            for name, frame in reference.items():
                pd.testing.assert_frame_equal(resumed[name], frame, obj=f"{name} after a kill at {fraction:.0%}")
            report = json.loads((run / "report.json").read_text())
            assert report["table5"] == json.loads((tmp_path / "archives" / "ref" / "report.json").read_text())["table5"]
            _one_line_or_report(run)
        assert len(set(left)) >= 3, left  # the kills hit different phases of the run
    finally:
        endpoint.close()


def _bench_tables(run: Path) -> dict[str, object]:
    records = {p.relative_to(run).as_posix(): p.read_text() for p in sorted((run / "records").rglob("*.json"))}
    scores = pd.read_csv(run / "judge_scores.csv", dtype=str, keep_default_na=False).drop(columns=["cached"])
    return {"records": records, "scores": scores.sort_values(list(scores.columns)).reset_index(drop=True)}


@pytest.mark.slow  # ~1 min
@pytest.mark.timeout(900)
def test_kill_9_at_any_moment_of_a_bench_run_leaves_a_folder_that_resume_completes(tmp_path):
    from evolve.testing import LoopbackChatServer
    from tests.cli.test_cli_bench import respond
    from tests.consilium.bench_support import write_cases

    cases = write_cases(tmp_path / "cases.jsonl", n=3)
    endpoint = LoopbackChatServer(lambda body: (time.sleep(0.02), respond(body))[1])

    def args(run_id: str) -> list[str]:
        return ["bench", "run", "--cases", str(cases), "--run-id", run_id, "--archives-dir", str(tmp_path / "archives"),
                "--base-url", endpoint.base_url, "--model", "scripted", "--max-cases", "2"]

    try:
        start = time.monotonic()
        ref = subprocess.run([*_CLI, *args("ref")], env=_env(tmp_path / "cache-ref"), capture_output=True, text=True,
                             timeout=300)
        elapsed = time.monotonic() - start
        assert ref.returncode == 0, ref.stderr
        reference = _bench_tables(tmp_path / "archives" / "ref")
        for i, fraction in enumerate((0.2, 0.5, 0.8, 0.95)):
            run, cache = tmp_path / "archives" / f"kill{i}", tmp_path / f"cache-{i}"
            proc = subprocess.Popen([*_CLI, *args(run.name)], env=_env(cache), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(elapsed * fraction)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            report = subprocess.run([*_CLI, "bench", "report", str(run)], capture_output=True, text=True, timeout=120)
            assert "Traceback" not in report.stdout + report.stderr, report.stderr
            if report.returncode != 0:
                assert len([line for line in report.stderr.splitlines() if line.strip()]) == 1, report.stderr
            resume = [*_CLI, "bench", "run", "--resume", str(run)] if (run / "manifest.json").exists() else [*_CLI, *args(run.name)]
            again = subprocess.run(resume, env=_env(cache), capture_output=True, text=True, timeout=300)
            assert again.returncode == 0, (fraction, again.stderr)
            resumed = _bench_tables(run)
            assert resumed["records"] == reference["records"], fraction
            pd.testing.assert_frame_equal(resumed["scores"], reference["scores"])
    finally:
        endpoint.close()
