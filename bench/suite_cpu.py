"""CPU time of the fast test suite, with the machine's speed measured in the same run.

The suite's CPU time on this machine has moved by a fifth within half an hour, with nothing else
running in the VM: the host's speed changes. So this script times a fixed reference workload
that calls nothing of ``evolve`` (the kind of work most of the suite's time goes to: pandas on
small frames, pydantic records through JSON, SQLite, a small bootstrap) before and after the
suite and prints the suite's CPU time in units of it. Two trees, or two hours, compare by that
ratio; the seconds alone compare only within one run of this script.

    python bench/suite_cpu.py [--repeats 3] [-- extra pytest arguments]

It runs ``python -m pytest -m "not slow" -q`` in the checkout it belongs to, with ``CI=true``
as CI does (to time another tree, copy it there and put that tree first on ``PYTHONPATH``, so
the ``evolve`` commands tests start use it too); about five minutes on 2 idle cores.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_REFERENCE = """
import json, sqlite3, time
import numpy as np, pandas as pd
from pydantic import BaseModel

class Row(BaseModel):
    case_id: str
    target_id: str
    score: float
    rationale: str

rng = np.random.default_rng(0)
frame = pd.DataFrame({{"case_id": [f"c{{i % 12}}" for i in range(240)], "target_id": [f"t{{i % 60}}" for i in range(240)],
                      "split": ["train", "validation"] * 120, "score": rng.integers(0, 4, 240).astype(float)}})
records = [dict(case_id=f"c{{i}}", target_id=f"t{{i}}", score=float(i % 4), rationale="x" * 200) for i in range(300)]

def once():
    for split in ("train", "validation"):  # small-frame pandas, as the engine and the reports do it
        for c in range(12):
            part = frame[(frame["split"] == split) & (frame["case_id"] == f"c{{c}}")]
            part.groupby("target_id")["score"].mean()
    frame.merge(frame[["target_id", "score"]].rename(columns={{"score": "rater"}}), on="target_id").groupby("case_id").size()
    for r in records:  # records crossing a boundary
        Row.model_validate_json(json.dumps(r)).model_dump_json()
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
    db.executemany("INSERT INTO t VALUES (?, ?)", [(str(i), json.dumps(records[i % 300])) for i in range(2000)])
    draws = rng.integers(0, 12, (50, 12))  # a small bootstrap
    np.quantile(np.array([frame["score"].to_numpy()[d].mean() for d in draws]), [0.025, 0.975])

once()
times = []
for _ in range({runs}):
    start = time.process_time()
    for _ in range(10):
        once()
    times.append(time.process_time() - start)
print(sorted(times)[len(times) // 2])
"""


def reference_cpu(runs: int = 7) -> float:
    """CPU seconds of the reference workload (median of ``runs``, after a warm-up), in a fresh
    interpreter. It calls nothing of ``evolve``, so a change to ``evolve`` cannot move it: small
    pandas frames, pydantic records through JSON, SQLite inserts and a small bootstrap, the mix
    the suite's time goes to."""
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run([sys.executable, "-c", _REFERENCE.format(runs=runs)], cwd=cwd, check=True,
                             capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def suite_cpu(extra: list[str]) -> tuple[float, str]:
    """CPU seconds (user + system of pytest and its children) of the fast suite, and its last line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider", *extra],
                          cwd=REPO, env={**os.environ, "CI": "true"}, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stdout.strip().splitlines()
    return cpu, lines[-1] if lines else done.stderr.strip()[-300:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Reference timings before and after the suite (each a median).")
    parser.add_argument("pytest_args", nargs="*", help="Extra pytest arguments, after --.")
    args = parser.parse_args()
    refs = [reference_cpu() for _ in range(args.repeats)]
    cpu, summary = suite_cpu(args.pytest_args)
    refs += [reference_cpu() for _ in range(args.repeats)]
    ref = statistics.median(refs)
    print(f"suite: {cpu:.1f} s CPU ({summary})")
    print(f"reference workload: median {ref * 1000:.0f} ms CPU (before: {', '.join(f'{r * 1000:.0f}' for r in refs[:args.repeats])}; "
          f"after: {', '.join(f'{r * 1000:.0f}' for r in refs[args.repeats:])} ms)")
    print(f"suite / reference: {cpu / ref:.0f} reference workloads")


if __name__ == "__main__":
    main()
