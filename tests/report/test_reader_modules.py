"""Which modules the readers of finished runs load: `evolve report` and `evolve compare` of
calibration runs, and `read_run`, load no engine, no model client and no HTTP stack.

Each check runs in a fresh interpreter and reads ``sys.modules`` afterwards, so an import added
anywhere on the way (a package ``__init__``, a settings module) shows up here, whatever the
machine's speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HTTP = ("httpx", "openai", "anyio", "tenacity", "h11", "httpcore")
ENGINES = ("evolve.calibration", "evolve.consilium", "evolve.otb", "evolve.audit", "evolve.scoring", "ribs", "numba",
           "optuna")

_RUN = r'''
import json, sys
argv = json.loads(sys.argv[1])
if argv[0] == "read_run":
    from evolve.outputs import read_run
    read_run(argv[1])
else:
    from evolve.cli import main
    sys.argv = ["evolve", *argv]
    try:
        main()
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
print(json.dumps(sorted(sys.modules)))
'''


def _modules(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", _RUN, json.dumps(list(argv))], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


def test_report_and_compare_of_calibration_runs_load_no_engine_and_no_http_stack(calibration_runs, tmp_path: Path) -> None:
    first, second = calibration_runs
    for argv in (("report", str(first), "--n-boot", "20", "--no-html"),
                 ("compare", str(first), str(second), "--reports-dir", str(tmp_path), "--n-boot", "20", "--no-html"),
                 ("read_run", str(first))):
        modules = _modules(*argv)
        assert "evolve.report" in modules or argv[0] == "read_run"  # the command did run
        assert not _loaded(modules, HTTP), f"`{argv[0]}` loads {_loaded(modules, HTTP)}"
        assert not _loaded(modules, ENGINES), f"`{argv[0]}` loads {_loaded(modules, ENGINES)}"
    assert (first / "report.md").is_file() and any(tmp_path.iterdir())
