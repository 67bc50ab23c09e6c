"""``kill -9`` soak: a small calibration killed at random moments, resumed each time, finished;
then compared with an uninterrupted run of the same command.

Usage::

    python bench/kill_soak.py                  # 20 kills (issue 24's Done-when)
    python bench/kill_soak.py --kills 40 --seed 3 --window 1.0

The world (all invented, no model, no network): the tests' tiny synthetic pack and split, and an
OpenAI-compatible endpoint on 127.0.0.1 (:class:`evolve.testing.LoopbackChatServer`) that answers
like the tests' scripted judge and mutator after ``--latency`` seconds and counts every request
it receives. Every ``evolve calibrate`` is a real process (the drift audit included; the endpoint
serves no embeddings, so the audit's embedding request is one failed call).

1. The reference: one uninterrupted run (its own response cache); its wall time ``T``.
2. The soak (another cache): start the run; at a moment drawn uniformly from
   ``[0, window * T]`` send ``SIGKILL``; start ``--resume`` (or the original command, when the kill came before the run
   folder held a run) and do it again until ``--kills`` processes were killed (a process that
   finishes before its moment is not a kill; the next resume rewrites the finished run, so kills
   also land in its write phase); then one last ``--resume`` runs to completion. A process that is
   refused (a stale lock) or fails is an error.
3. Compared: ``candidates.csv``, ``scores.csv`` (minus its ``cached`` column), ``table5.csv``,
   ``agreement.csv``, ``report.json``'s ``table5`` and the whole ``judge.json`` minus
   ``created_at``, ``run_id`` and ``source_run`` must be identical; the usage of the soak's
   report (every process of the run, from its journal) is compared with the requests the
   endpoint received during the soak: ``calls_made`` (answered + failed, cache hits excluded)
   <= requests <= ``calls_made`` + ``in_flight`` (requests sent by a killed process before its
   answer was recorded: the endpoint may or may not have received them).

Prints one line per kill (when, what the folder held, the endpoint's requests so far) and the
summary. Exit status 1 when a comparison fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from evolve.data import load_pack, write_pack  # noqa: E402
from evolve.splits import make_splits, write_splits  # noqa: E402
from evolve.testing import LoopbackChatServer  # noqa: E402
from tests.conftest import fake_endpoint, make_tiny_pack, request_of  # noqa: E402

CLI = [sys.executable, "-c", "from evolve.cli import main; main()"]
JUDGE_VOLATILE = ("created_at", "run_id", "source_run")


class CountingEndpoint(LoopbackChatServer):
    """The scripted judge and mutator over HTTP, after ``latency`` seconds; no embeddings (404)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        super().__init__(self._respond)

    def _respond(self, body: dict):
        if "input" in body:
            return 404, {"error": {"message": "no embeddings here"}}
        time.sleep(self.latency)
        return fake_endpoint(request_of(body))


def _world(tmp: Path) -> tuple[Path, Path]:
    pack, splits = tmp / "pack", tmp / "splits"
    write_pack(make_tiny_pack(), pack)
    write_splits(make_splits(load_pack(pack), holdout_fraction=0.2, validation_fraction=0.4, seed=3), splits)
    return pack, splits


def _args(pack: Path, splits: Path, archives: Path, run_id: str, base_url: str) -> list[str]:
    return ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", run_id, "--archives-dir",
            str(archives), "--base-url", base_url, "--model", "scripted", "--accepted", "2", "--max-attempts", "3",
            "--batch-size", "1"]


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "EVOLVE_CACHE_DIR": str(cache), "NO_COLOR": "1", "COLUMNS": "200"}


def _stage(run: Path, finished_before: bool) -> str:
    """What a kill hit, from what the run folder held after it."""
    if finished_before:
        return "a resume of the finished run"
    if not (run / "config.json").exists():
        return "before the run existed"
    if not (run / "scores.csv").exists():
        return "calls, no tables yet"
    if not (run / "report.json").exists():
        return "tables written, no report"
    return "report written, run not finished"


def _finished(run: Path) -> bool:
    journal = run / "journal.jsonl"
    return journal.exists() and '"event": "run_finished"' in journal.read_text()


def _results(run: Path) -> dict[str, object]:
    judge = json.loads((run / "judge.json").read_text())
    return {
        "candidates.csv": pd.read_csv(run / "candidates.csv", dtype=str, keep_default_na=False),
        "scores.csv": pd.read_csv(run / "scores.csv", dtype=str, keep_default_na=False).drop(columns=["cached"]),
        "table5.csv": (run / "table5.csv").read_text(),
        "agreement.csv": (run / "agreement.csv").read_text(),
        "report.json table5": json.loads((run / "report.json").read_text()).get("table5"),
        "judge.json": {k: v for k, v in judge.items() if k not in JUDGE_VOLATILE},
    }


def _same(a: object, b: object) -> bool:
    if isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame):
        return a.equals(b)
    return a == b


def _finish(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[3:6])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per endpoint answer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", type=float, default=0.6,
                        help="kill moments are drawn from [0, window x the uninterrupted run's wall time]")
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    tmp = Path(tempfile.mkdtemp(prefix="kill-soak-"))
    endpoint = CountingEndpoint(opts.latency)
    try:
        pack, splits = _world(tmp)
        archives = tmp / "archives"
        start = time.monotonic()
        _finish([*CLI, *_args(pack, splits, archives, "ref", endpoint.base_url)], _env(tmp / "cache-ref"))
        wall = time.monotonic() - start
        ref_requests = len(endpoint.bodies)
        ref_usage = json.loads((archives / "ref" / "report.json").read_text())["usage"]["total"]
        print(f"reference: {wall:.1f} s, {ref_requests} endpoint requests, report: {ref_usage['calls_made']} calls made, "
              f"{ref_usage['cache_hits']} cache hits", flush=True)

        run, env = archives / "soak", _env(tmp / "cache-soak")
        fresh = [*CLI, *_args(pack, splits, archives, "soak", endpoint.base_url)]
        resume = [*CLI, "calibrate", "--resume", str(run)]
        before, kills, finished, stages = len(endpoint.bodies), 0, 0, []
        while kills < opts.kills:
            cmd = resume if (run / "config.json").exists() else fresh
            moment, was_finished = rng.uniform(0, opts.window * wall), _finished(run)
            requests_before = len(endpoint.bodies)
            log = tmp / f"stderr-{kills}-{finished}.txt"
            with open(log, "w") as err:
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
            try:
                proc.wait(timeout=moment)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
                kills += 1
                stages.append(_stage(run, was_finished))
                print(f"kill {kills:2d} at {moment:5.1f} s: {stages[-1]:34s} requests by this process "
                      f"{len(endpoint.bodies) - requests_before:3d}, by the soak {len(endpoint.bodies) - before}",
                      flush=True)
                continue
            if proc.returncode != 0:
                raise SystemExit(f"a process failed before its kill ({proc.returncode}): {log.read_text()[-2000:]}")
            finished += 1
        _finish(resume, env)
        soak_requests = len(endpoint.bodies) - before
        usage = json.loads((run / "report.json").read_text())["usage"]["total"]

        ref, soak = _results(archives / "ref"), _results(run)
        differ = [name for name in ref if not _same(ref[name], soak[name])]
        made, in_flight = usage["calls_made"], usage.get("in_flight", 0)
        usage_ok = made <= soak_requests <= made + in_flight
        counts = {s: stages.count(s) for s in dict.fromkeys(stages)}
        print(f"\nkill -9 soak: {kills} kills ({', '.join(f'{n} {s}' for s, n in counts.items())}), "
              f"{finished} resumes finished before their kill, then one resume to the end")
        print(f"results vs the uninterrupted run: {'identical' if not differ else 'DIFFERENT: ' + ', '.join(differ)} "
              f"({', '.join(ref)})")
        print(f"usage: endpoint received {soak_requests} requests during the soak; the report counts {made} calls made "
              f"(answered + failed) + {in_flight} in flight when a process was killed, {usage['cache_hits']} cache hits "
              f"-> {'consistent' if usage_ok else 'INCONSISTENT'} ({made} <= {soak_requests} <= {made + in_flight}); "
              f"{soak_requests - ref_requests} requests more than the uninterrupted run's {ref_requests} "
              "(answers lost with a killed process, asked again)")
        return 0 if not differ and usage_ok else 1
    finally:
        endpoint.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
