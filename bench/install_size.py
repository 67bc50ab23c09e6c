"""How big and how slow the core and the full install are.

Builds a wheel of this checkout, then installs it into two fresh virtual environments - the core
(``evolve``) and the full install (``evolve[all]``) - timing each ``pip install`` and measuring
each environment's size on disk and its number of installed distributions. Prints one table and
the full/core ratios, measured in this run. Needs PyPI (or a pip cache); takes minutes.

    python bench/install_size.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _size_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


def _install(root: Path, name: str, spec: str) -> dict[str, float]:
    venv = root / name
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    empty = _size_mib(venv)
    start = time.perf_counter()
    subprocess.run([str(python), "-m", "pip", "install", "-q", spec], check=True)
    seconds = time.perf_counter() - start
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True)
    return {"seconds": seconds, "mib": _size_mib(venv) - empty, "packages": len(listed.stdout.split())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build the environments here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "wheel"), str(REPO)], check=True)
        wheel = next((root / "wheel").glob("evolve-*.whl"))
        rows = {"core": _install(root, "core", str(wheel)), "full": _install(root, "full", f"{wheel}[all]")}
    print(f"{'install':8} {'pip install s':>14} {'MiB on disk':>12} {'packages':>9}")
    for name, row in rows.items():
        print(f"{name:8} {row['seconds']:14.1f} {row['mib']:12.0f} {row['packages']:9.0f}")
    core, full = rows["core"], rows["full"]
    print(f"full / core: {full['mib'] / core['mib']:.2f}x the disk, {full['seconds'] / core['seconds']:.2f}x the install time, "
          f"{full['packages'] - core['packages']:.0f} more packages (pip's wheel cache warm or cold as this machine had it)")


if __name__ == "__main__":
    main()
