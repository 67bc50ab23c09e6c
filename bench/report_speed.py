"""CPU time of building the calibration and bench reports, against another commit in the same run.

Makes two run folders once with this checkout (a tiny calibration on the fake provider and
the synthetic bench run of the bench-table tests), then builds their reports over and over in
fresh interpreters, alternating this checkout with a ``git worktree`` of ``--against``, and
prints the median CPU per build of each tree, the ratio, and whether the two trees wrote the
same ``report.json`` / ``bench_report.json`` (sha256; a speed-up that changes a number is a bug).
The host's speed moves by a fifth within half an hour here, so only the ratio of one run means
anything.

    python bench/report_speed.py [--against REV] [--rounds 3] [--builds 20] [--replicates 50]

Without ``--against`` it times this checkout alone. 50 replicates is what the tests' light reports
use; 2,000 is the default of a real report.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_TIMER = """
import hashlib, resource, sys
from pathlib import Path
from evolve.report import build_bench_report, build_report
calibration, bench, n, replicates = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
for name, build, run in (("calibration", build_report, calibration), ("bench", build_bench_report, bench)):
    digest = hashlib.sha256(build(run, n_boot=replicates).model_dump_json().encode()).hexdigest()[:16]
    start = cpu()
    for _ in range(n):
        build(run, n_boot=replicates)
    print(name, (cpu() - start) / n * 1000, digest)
"""


def _make_runs(root: Path) -> tuple[Path, Path]:
    """A tiny calibration (fake provider) and the synthetic bench run of the tests."""
    sys.path.insert(0, str(REPO))
    from evolve.data import load_pack, write_pack
    from evolve.splits import make_splits, write_splits
    from tests.conftest import light_report_settings, make_tiny_pack
    from tests.report.conftest import bench_folder, calibrate_tiny

    pack, splits = root / "packs" / "tiny", root / "splits" / "tiny"
    write_pack(make_tiny_pack(), pack)
    write_splits(make_splits(load_pack(pack), holdout_fraction=0.2, validation_fraction=0.4, seed=3), splits)
    with light_report_settings():
        calibration = calibrate_tiny(root, "guided", "judge-guided", pack, splits)
    (root / "bench").mkdir()
    return calibration, bench_folder(root / "bench")


def _time(tree: Path, runs: tuple[Path, Path], builds: int, replicates: int) -> dict[str, tuple[float, str]]:
    """``{report: (ms of CPU per build, sha256 prefix of its JSON)}`` with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", _TIMER, str(runs[0]), str(runs[1]), str(builds), str(replicates)],
                         cwd=tree, env=env, check=True, capture_output=True, text=True).stdout
    return {name: (float(ms), digest) for name, ms, digest in (line.split() for line in out.splitlines())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a commit to compare with (checked out in a temporary git worktree)")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two trees")
    parser.add_argument("--builds", type=int, default=20, help="builds of each report per round")
    parser.add_argument("--replicates", type=int, default=50, help="bootstrap replicates of each build")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = _make_runs(Path(tmp) / "runs")
        trees = {"this checkout": REPO}
        if args.against:
            other = Path(tmp) / "against"
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(other), args.against], cwd=REPO, check=True)
            trees[args.against] = other
        try:
            seen: dict[str, dict[str, list[tuple[float, str]]]] = {t: {} for t in trees}
            for _ in range(args.rounds):
                for label, tree in trees.items():
                    for name, result in _time(tree, runs, args.builds, args.replicates).items():
                        seen[label].setdefault(name, []).append(result)
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees[args.against])], cwd=REPO, check=True)
                shutil.rmtree(trees[args.against], ignore_errors=True)
    print(f"CPU per report build, {args.replicates} replicates, median of {args.rounds} rounds of {args.builds}:")
    for name in ("calibration", "bench"):
        medians = {label: statistics.median(ms for ms, _ in seen[label][name]) for label in trees}
        digests = {label: {d for _, d in seen[label][name]} for label in trees}
        line = ", ".join(f"{label} {ms:.1f} ms" for label, ms in medians.items())
        if args.against:
            ratio = medians["this checkout"] / medians[args.against]
            same = "the same JSON" if digests["this checkout"] == digests[args.against] else "DIFFERENT JSON"
            line += f"; ratio {ratio:.2f} ({same})"
        print(f"  {name} report: {line}")


if __name__ == "__main__":
    main()
