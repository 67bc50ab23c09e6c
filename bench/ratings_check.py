"""Time ``evolve ratings check`` (the pack validator) and the pack loader on large invented packs.

Usage::

    python bench/ratings_check.py [--sizes 10000 100000 300000] [--old [REV]] [--cli] [--plan]

For each size, writes an invented rating pack into a temporary folder (removed afterwards,
never committed) on the ``consilium`` rubric: about 1,600 cases for 300k rows, ten targets per
case (four roles' reasoning and opinion, the final report, the case), three raters per case out
of thirty, every criterion that applies to a target's component, and comments with commas,
quotes, line breaks and non-ASCII letters. Then it times:

* ``check_pack`` (what ``evolve ratings check`` runs; ``--cli`` also times the command itself
  in a child process),
* ``load_pack`` (what ``evolve calibrate`` reads a pack with; ``--plan`` also times
  ``plan_calibration``: load, splits check and each criterion's items, on a fake endpoint),

and prints one JSON object per size: rows, file size, seconds (wall, and CPU of this process:
on a shared machine the wall time also counts the waits for a core, so the load average is
printed too), rows per second, per-row microseconds (equal per-row times across sizes mean the
check is linear) and peak Python memory (tracemalloc, measured in a separate pass so it does not
slow the timed one). ``--old`` also
times ``check_pack`` of the pre-issue-24 ``evolve/data/_pack.py`` (read from git: one pydantic
``Rating`` per row, the garbage collector running) and prints the ratio.
Numbers depend on the CPU and on whatever else runs on it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evolve.rubric import load_rubric

ROLES = ("oncologist", "radiologist", "surgeon", "pathologist")
WORDS = (
    "dose", "staging", "margin", "node", "biopsy", "the", "plan", "seems", "reasonable", "but",
    "misses", "renal", "function", "Überweisung", "naïve", "follow-up", "contraindicated", "MRI",
)


def _comment(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.3:
        return ""
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
    if kind < 0.4:
        text += ', "quoted", with commas'
    elif kind < 0.45:
        text += "\nsecond line of the comment"
    return text


def write_invented_pack(folder: Path, n_rows: int, *, seed: int = 0) -> Path:
    """Write a valid invented pack of exactly ``n_rows`` ratings into ``folder`` (returned)."""
    rng = random.Random(seed)
    rubric = load_rubric("consilium")
    by_component: dict[str, list[str]] = {}
    for crit in rubric.criteria:
        for comp in crit.components:
            by_component.setdefault(comp, []).append(crit.criterion_id)
    raters = [f"physician-{i:02d}" for i in range(30)]
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    case_no = 0
    with open(folder / "cases.jsonl", "w", encoding="utf-8") as cases, \
            open(folder / "targets.jsonl", "w", encoding="utf-8") as targets, \
            open(folder / "ratings.csv", "w", encoding="utf-8", newline="") as ratings:
        out = csv.writer(ratings, lineterminator="\n")
        out.writerow(["case_id", "target_id", "rater_id", "criterion", "score", "not_evaluable", "comment"])
        while written < n_rows:
            case_no += 1
            case_id = f"case-{case_no:05d}"
            cases.write(json.dumps({"case_id": case_id, "title": f"Invented case {case_no}",
                                    "text": f"INVENTED. Patient {case_no}, 60-year-old with a mass."}) + "\n")
            units = [(f"{case_id}:{role}:{comp}", comp) for role in ROLES for comp in ("reasoning", "opinion")]
            units += [(f"{case_id}:final", "final"), (f"{case_id}:case", "case")]
            for target_id, comp in units:
                targets.write(json.dumps({"target_id": target_id, "case_id": case_id, "component": comp,
                                          "text": f"INVENTED {comp} text of {target_id}."}) + "\n")
            for rater in rng.sample(raters, 3):
                for target_id, comp in units:
                    for criterion_id in by_component[comp]:
                        if written == n_rows:
                            break
                        not_evaluable = rng.random() < 0.03
                        score = "" if not_evaluable else str(rng.randint(0, 3))
                        out.writerow([case_id, target_id, rater, criterion_id, score, str(not_evaluable).lower(),
                                      _comment(rng)])
                        written += 1
    manifest = {"version": 1, "name": "invented-bench", "description": "INVENTED ratings for a benchmark.",
                "rubric": {"id": rubric.id, "version": rubric.version}}
    (folder / "pack.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return folder


def _timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best wall time and best CPU time (this process) of ``repeat`` calls, in seconds."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def _peak_mib(fn: Callable[[], object]) -> float:
    """Peak Python memory of one call (tracemalloc; slows the call, so timed apart), in MiB."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _old_module(rev: str) -> Any:
    """``evolve/data/_pack.py`` as it was at git revision ``rev`` (the row-by-row reader)."""
    source = subprocess.run(["git", "show", f"{rev}:evolve/data/_pack.py"], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[1]).stdout
    module = types.ModuleType("evolve_old_pack")
    sys.modules[module.__name__] = module
    exec(compile(source, f"{rev}:evolve/data/_pack.py", "exec"), module.__dict__)  # noqa: S102 - our own file at a commit
    return module


def _cli_seconds(folder: Path) -> float:
    start = time.perf_counter()
    command = [sys.executable, "-c", "from evolve.cli import main; main()", "ratings", "check", str(folder)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"evolve ratings check failed: {done.stderr[-500:]}")
    return time.perf_counter() - start


def measure(n_rows: int, *, old: Any, cli: bool, plan: bool, repeat: int) -> dict[str, Any]:
    """Write a pack of ``n_rows`` ratings in a temporary folder and time what reads it."""
    from evolve.data import check_pack, load_pack

    with tempfile.TemporaryDirectory(prefix="evolve-bench-ratings-") as tmp:
        folder = write_invented_pack(Path(tmp) / "pack", n_rows)
        size = (folder / "ratings.csv").stat().st_size
        (check, check_cpu), (load, load_cpu) = _timed(lambda: check_pack(folder), repeat), _timed(lambda: load_pack(folder), repeat)
        result: dict[str, Any] = {
            "rows": n_rows,
            "ratings_csv_mb": round(size / 1e6, 1),
            "check_s": round(check, 3),
            "check_rows_per_s": round(n_rows / check),
            "check_us_per_row": round(check / n_rows * 1e6, 2),
            "check_cpu_s": round(check_cpu, 3),
            "load_s": round(load, 3),
            "load_rows_per_s": round(n_rows / load),
            "load_us_per_row": round(load / n_rows * 1e6, 2),
            "load_cpu_s": round(load_cpu, 3),
            "check_peak_mib": round(_peak_mib(lambda: check_pack(folder)), 1),
            "load_peak_mib": round(_peak_mib(lambda: load_pack(folder)), 1),
            "load_average_1min": round(os.getloadavg()[0], 1),
        }
        if old is not None:
            before, before_cpu = _timed(lambda: old.check_pack(folder), 1)
            result.update(old_check_s=round(before, 3), old_check_cpu_s=round(before_cpu, 3),
                          old_over_new=round(before / check, 1))
        if cli:
            result["cli_s"] = round(_cli_seconds(folder), 3)
        if plan:
            result["calibrate_plan_s"] = round(_plan_seconds(folder), 3)
        return result


def _plan_seconds(folder: Path) -> float:
    """Wall time of ``plan_calibration`` (what ``evolve calibrate`` does before its first call:
    load the pack, check the splits, pick each criterion's items), fake endpoint, nothing written."""
    from evolve.calibration import plan_calibration
    from evolve.config import resolve_config
    from evolve.data import load_pack
    from evolve.splits import make_splits, write_splits

    splits = folder.parent / "splits"
    write_splits(make_splits(load_pack(folder), holdout_fraction=0.2, validation_fraction=0.3, seed=1), splits)
    config = resolve_config(preset="quick", environ={}, overrides={
        "run_id": "bench", "pack": folder, "splits": splits, "archives_dir": folder.parent / "archives",
        "cache_path": folder.parent / "cache.sqlite", "endpoint": {"provider": "fake"}, "audit": False})
    start = time.perf_counter()
    plan_calibration(config)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000], help="Rows per pack.")
    parser.add_argument("--old", nargs="?", const="eba3594", default=None, metavar="REV",
                        help="Also time the reader of git revision REV (default eba3594, before issue 24).")
    parser.add_argument("--cli", action="store_true", help="Also time `evolve ratings check` as a command.")
    parser.add_argument("--plan", action="store_true", help="Also time calibrate's planning (load, splits, items).")
    parser.add_argument("--repeat", type=int, default=3, help="Timed calls per measure (the best is kept).")
    args = parser.parse_args()
    old = _old_module(args.old) if args.old else None
    for n in args.sizes:
        print(json.dumps(measure(n, old=old, cli=args.cli, plan=args.plan, repeat=args.repeat)), flush=True)


if __name__ == "__main__":
    main()
