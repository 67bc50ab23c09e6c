"""Which modules a command loads: help loads no model client, engine or numeric stack.

Each check runs the command line in a fresh interpreter and reads ``sys.modules`` afterwards,
so an import added anywhere on the way (a package ``__init__``, a module-level import in the
CLI) that drags in the HTTP stack shows up here - not as a slow ``--help`` on a user's machine.
Timings belong to ``bench/``; this test counts modules, which does not depend on the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("httpx", "openai", "anyio", "tenacity", "numpy", "pandas", "scipy", "sklearn", "ribs", "numba", "matplotlib",
         "pyarrow", "openpyxl", "jsonschema")
"""Packages no ``--help`` may load: the model client's HTTP stack and the numeric stack (pydantic
may load: typer itself uses it for some option types)."""

_RUN = r'''
import json, sys
from evolve.cli import app, main
import typer.main
def commands(command, path):
    yield path
    for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
        yield from commands(sub, [*path, name])
paths = list(commands(typer.main.get_command(app), []))
for path in paths:
    sys.argv = ["evolve", *path, "--help"]
    try:
        main()
    except SystemExit as exc:
        assert exc.code in (0, None), (path, exc.code)
print(json.dumps({"paths": [" ".join(p) for p in paths], "modules": sorted(sys.modules)}))
'''


def _help_of_every_command() -> dict:
    done = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_help_of_every_command_loads_no_model_client_engine_or_numeric_stack() -> None:
    seen = _help_of_every_command()
    assert {"", "calibrate", "report", "compare", "judge", "bench run", "otb run", "ratings import"} <= set(seen["paths"])
    modules = seen["modules"]
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    assert not heavy, f"--help loads {heavy}: import them where a command needs them"
    evolve_packages = sorted({".".join(m.split(".")[:2]) for m in modules if m.startswith("evolve.")})
    assert set(evolve_packages) <= {"evolve.cli", "evolve.errors", "evolve.runs"}, evolve_packages
    loaded_runs = {m for m in modules if m.startswith("evolve.runs.")}
    assert not loaded_runs & {"evolve.runs._client", "evolve.runs._batches"}, sorted(loaded_runs)
