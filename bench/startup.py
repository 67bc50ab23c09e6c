"""CPU time of ``evolve --help`` and of each subcommand's ``--help`` (issue 26: < 0.25 s each).

Runs each help screen ``--repeats`` times in a fresh interpreter (the ``evolve`` on PATH, or
``--evolve``) and prints the median CPU seconds (user + system, from ``resource``), the bare
interpreter's for reference, and which screens meet the target. Measure in a virtual
environment with a regular (not editable) install: an editable install's import hook alone costs
tens of milliseconds.

    python bench/startup.py [--evolve /path/to/venv/bin/evolve] [--repeats 5]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

TARGET_S = 0.25
SCREENS = ([], ["calibrate"], ["report"], ["compare"], ["judge"], ["bench", "run"], ["otb", "run"], ["ratings", "import"],
           ["splits", "make"])


def _cpu(command: list[str]) -> float:
    """CPU seconds (user + system) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evolve", default=shutil.which("evolve"), help="the evolve command to time")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    evolve = Path(args.evolve)
    python = evolve.parent / "python"
    bare = statistics.median(_cpu([str(python if python.exists() else sys.executable), "-c", "pass"])
                             for _ in range(args.repeats))
    print(f"bare interpreter: {bare:.3f} s CPU (median of {args.repeats})")
    met = 0
    for screen in SCREENS:
        seconds = statistics.median(_cpu([str(evolve), *screen, "--help"]) for _ in range(args.repeats))
        ok = seconds < TARGET_S
        met += ok
        print(f"evolve {' '.join([*screen, '--help']):28} {seconds:.3f} s CPU  {seconds / TARGET_S:.2f}x the target  "
              f"{'met' if ok else 'NOT met'}")
    print(f"{met} of {len(SCREENS)} help screens under {TARGET_S} s CPU")


if __name__ == "__main__":
    main()
