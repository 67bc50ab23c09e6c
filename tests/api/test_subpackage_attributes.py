"""After a plain ``import evolve``, every subpackage is an attribute (``evolve.rubric.scaffold_rubric``
as the README writes it), imported on first use and not before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import evolve

PACKAGE = Path(evolve.__file__).parent


def test_every_subpackage_is_an_attribute() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert len(folders) > 15 and folders <= set(dir(evolve))
    assert all(getattr(evolve, name).__name__ == f"evolve.{name}" for name in folders)


def test_a_subpackage_is_reached_as_an_attribute_and_loads_only_when_used() -> None:
    code = ("import sys, evolve; assert 'evolve.rubric' not in sys.modules; "
            "print(evolve.rubric.scaffold_rubric.__name__, evolve.outputs.read_run.__name__, 'stats' in dir(evolve))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["scaffold_rubric", "read_run", "True"]
