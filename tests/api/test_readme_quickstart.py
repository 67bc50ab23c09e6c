"""The README's Python quickstart runs exactly as printed and does what the README says."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LIGHT_REPORT, REPO, readme_python_block

END = "<!-- quickstart:end -->"


def quickstart_code() -> str:
    """The Python block between the quickstart markers of README.md."""
    return readme_python_block("quickstart")


def shown_output() -> str:
    """The plain code block the README shows after the quickstart as its output."""
    after = (REPO / "README.md").read_text(encoding="utf-8").split(END, 1)[1]
    return after.split("\n```\n", 1)[1].split("\n```", 1)[0] + "\n"


def test_quickstart_is_short() -> None:
    assert len(quickstart_code().splitlines()) <= 15


_CHECK = '''
import logging, warnings
import numpy, pandas, scipy.special, scipy.stats, sklearn.metrics, matplotlib, ribs  # their own import-time filters
state = lambda: ({n: (l.level, list(l.handlers)) for n, l in logging.Logger.manager.loggerDict.items()
                  if isinstance(l, logging.Logger)}, logging.root.level, list(logging.root.handlers), list(warnings.filters))
before = state()
'''
_AFTER = '''
now = state()
changed = {n: v for n, v in now[0].items() if n in before[0] and before[0][n] != v}
set_new = {n: v for n, v in now[0].items()  # a logger made since, with a level or a handler that prints
           if n not in before[0] and (v[0] != logging.NOTSET or any(type(h) is not logging.NullHandler for h in v[1]))}
assert not changed and not set_new and now[1:] == before[1:], (changed, set_new, now[1:], before[1:])
print("logging untouched")
'''
UNTOUCHED = "logging untouched\n"


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The README quickstart, verbatim, run once in a fresh interpreter and folder, between a
    snapshot of the process's logging and warning state and a check that it did not change
    (the numeric libraries are imported before the snapshot: their import-time filters are
    theirs). Returns the folder it ran in and the finished process."""
    folder = tmp_path_factory.mktemp("quickstart")
    script = folder / "quickstart.py"
    script.write_text(_CHECK + quickstart_code() + _AFTER, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "EVOLVE_CACHE_DIR": str(folder / "cache"),
           "PYTHONPATH": str(REPO), **LIGHT_REPORT}  # what it prints does not depend on the report's figures or replicates
    done = subprocess.run([sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    return folder, done


def test_quickstart_runs_as_printed(quickstart: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, done = quickstart
    assert done.stdout.endswith(UNTOUCHED), done.stdout
    printed = done.stdout.removesuffix(UNTOUCHED)
    assert printed == shown_output()  # the README shows what it prints
    lines = printed.strip().splitlines()
    assert len(lines) == 2, printed
    summary = re.fullmatch(r"entailment: winner (entailment:\S+) \(mutation\), validation MAE ([\d.]+) .*"
                           r"too few cases to tell vs no_guidance: .*", lines[0])
    assert summary, lines[0]
    guidance = eval(lines[1])  # the printed dict of winning guidance  # noqa: S307 - our own output
    assert set(guidance) == {"entailment"} and guidance["entailment"].startswith("calibrated rule")
    # what it printed is the run's report, in the one run folder it made under ./archives
    (run,) = (folder / "archives").iterdir()
    report = json.loads((run / "report.json").read_text("utf-8"))
    (row,) = report["table5"]
    assert (row["evolved"], f"{row['evolved_val_mae']:.3f}") == (summary[1], summary[2])
    assert report["criteria"]["entailment"]["winner"]["text"] == guidance["entailment"]
    # 7 validation cases: fewer than MIN_CASES, so no better/worse verdict however large the difference
    assert row["vs_none_verdict"] == "too few cases to tell" and row["vs_none_diff"] < 0 and report["pack"] == "my-ratings"
    assert {"pack", "splits", "config.json", "report.md"} <= {p.name for p in run.iterdir()}


def test_a_library_run_leaves_the_callers_logging_and_warning_filters_alone(
        quickstart: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """evolve changes no global logging (levels, handlers) and no warning filter of the process
    that calls it: the check after the quickstart's calibration printed its last line."""
    _, done = quickstart
    assert done.stdout.rstrip().splitlines()[-1] == UNTOUCHED.strip(), done.stdout
