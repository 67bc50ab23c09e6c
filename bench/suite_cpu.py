"""CPU time of the fast test suite, with the machine's speed measured in the same run.

The suite's CPU time on this machine has moved by a quarter within an hour, with nothing else
running in the VM: the host's speed changes. So this script times a fixed reference workload
(a small calibration on the fake endpoint, the kind of work most of the suite's time goes to:
pandas on small frames, pydantic records, the model client, the report) before and after the
suite and prints the suite's CPU time in units of it. Two trees, or two hours, compare by that
ratio; the seconds alone compare only within one run of this script.

    python bench/suite_cpu.py [--repeats 3] [-- extra pytest arguments]

Run it from the repository root (it runs ``python -m pytest -m "not slow" -q`` there, with
``CI=true`` as CI does); about five minutes on 2 idle cores.
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
import sys, tempfile, time, warnings
from pathlib import Path
sys.path.insert(0, {repo!r})
from evolve import calibrate
from evolve.data import write_pack
from evolve.llm import Client, ResponseCache
from evolve.testing import FakeProvider
from tests.conftest import fake_endpoint, make_tiny_pack
warnings.simplefilter("ignore")
root = Path(tempfile.mkdtemp())
write_pack(make_tiny_pack(), root / "pack")
times = []
for i in range({runs}):
    with Client(FakeProvider(fake_endpoint), cache=ResponseCache(root / f"cache{{i}}.sqlite")) as client:
        start = time.process_time()
        calibrate(root / "pack", rubric="kqa-entailment", endpoint=client, run_id=f"run{{i}}",
                  archives_dir=root / "archives", config={{"budget": {{"accepted": 2, "max_attempts": 4, "batch_size": 2}}}})
        times.append(time.process_time() - start)
print(sorted(times[1:])[len(times[1:]) // 2])  # the first run pays the imports; the median of the rest
"""


def reference_cpu(runs: int = 7) -> float:
    """CPU seconds of one small calibration on the fake endpoint (median of ``runs - 1``, after a
    warm-up run), in a fresh interpreter with light reports."""
    env = {**os.environ, "EVOLVE_REPORT_REPLICATES": "50", "EVOLVE_REPORT_FIGURES": "0"}
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run([sys.executable, "-c", _REFERENCE.format(repo=str(REPO), runs=runs)], cwd=cwd, env=env,
                             check=True, capture_output=True, text=True)
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
    print(f"reference calibration: median {ref * 1000:.0f} ms CPU (before: {', '.join(f'{r * 1000:.0f}' for r in refs[:args.repeats])}; "
          f"after: {', '.join(f'{r * 1000:.0f}' for r in refs[args.repeats:])} ms)")
    print(f"suite / reference: {cpu / ref:.0f} reference calibrations")


if __name__ == "__main__":
    main()
