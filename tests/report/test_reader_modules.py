"""Which modules the readers of finished runs load: `read_run`, the judge file, `evolve report`
and `evolve compare` of calibration runs load no engine, no model client and no HTTP stack, and
importing the reporting and benchmark packages loads no MAP-Elites engine and no model client.

The steps run in order in one fresh interpreter, which reads ``sys.modules`` after each, so an
import added anywhere on the way (a package ``__init__``, a settings module) shows up here,
whatever the machine's speed. ``read_run`` goes first: it needs the least.
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
steps = json.loads(sys.argv[1])
loaded = []
for argv in steps:
    if argv[0] == "import":
        import importlib
        for name in argv[1:]:
            importlib.import_module(name)
    elif argv[0] == "read_run":
        from evolve.outputs import read_run
        read_run(argv[1])
    elif argv[0] == "load_judge_file":
        from evolve.calibrated import load_judge_file
        load_judge_file(argv[1]).bundle()
    else:
        from evolve.cli import main
        sys.argv = ["evolve", *argv]
        try:
            main()
        except SystemExit as exc:
            assert exc.code in (0, None), (argv, exc.code)
    loaded.append(sorted(sys.modules))
print(json.dumps(loaded))
'''


def _modules_after_each(*steps: tuple[str, ...]) -> list[set[str]]:
    """The modules loaded after each step (``("read_run", RUN)``, ``("load_judge_file", RUN)``,
    ``("import", MODULE, ...)`` or the arguments of an ``evolve`` command), the steps run in order in one fresh interpreter (one
    start-up for all; modules only accumulate, so a module absent after the last step was
    loaded by none, and the first step after which one appears is the one that loaded it)."""
    done = subprocess.run([sys.executable, "-c", _RUN, json.dumps([list(s) for s in steps])], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return [set(m) for m in json.loads(done.stdout.strip().splitlines()[-1])]


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


READER_PACKAGES = ("evolve.report", "evolve.cli", "evolve.calibrated", "evolve.audit", "evolve.consilium", "evolve.otb")
"""Packages whose import alone must load no engine (the readers of finished runs: reports, the judge
file, the audit, the benchmark judges' guidance)."""
NO_ENGINE_ON_IMPORT = ("ribs", "numba", "optuna", "openai", "evolve.calibration")


def test_readers_of_calibration_runs_load_no_engine_and_no_http_stack(calibration_runs, tmp_path: Path) -> None:
    first, second = calibration_runs
    steps = (("read_run", str(first)),
             ("load_judge_file", str(first)),
             ("report", str(first), "--n-boot", "20"),  # with its HTML page
             ("compare", str(first), str(second), "--reports-dir", str(tmp_path), "--n-boot", "20", "--no-html"))
    after = _modules_after_each(*steps, ("import", *READER_PACKAGES))
    assert "evolve.calibrated" in after[1] and "evolve.report" in after[2]  # the steps did run
    for step, modules in zip(steps, after, strict=False):
        assert not _loaded(modules, HTTP), f"`{step[0]}` loads {_loaded(modules, HTTP)}"
        assert not _loaded(modules, ENGINES), f"`{step[0]}` loads {_loaded(modules, ENGINES)}"
    assert not _loaded(after[-1], NO_ENGINE_ON_IMPORT), f"importing {READER_PACKAGES} loads {_loaded(after[-1], NO_ENGINE_ON_IMPORT)}"
    assert all(name in after[-1] for name in READER_PACKAGES)
    assert (first / "report.md").is_file() and any(tmp_path.iterdir())
