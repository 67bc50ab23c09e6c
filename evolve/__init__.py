"""evolve: calibrate LLM judges of clinical text against physician ratings.

For each rubric criterion, `evolve` keeps an isolated MAP-Elites archive (pyribs) of short
guidance prompts appended to a fixed judge protocol; an LLM mutates elites, fitness is the
mean absolute error (MAE) between the judge's scores and every individual physician rating on
training cases, and winners are re-scored with fresh seeds on held-out validation cases against
no-guidance, initial-prompt and training-median baselines.

The short path from Python (see the README's "Python quickstart")::

    import evolve

    summary = evolve.calibrate("ratings/kqa", endpoint="http://127.0.0.1:8080/v1")
    print(summary.describe())
    scored = evolve.load_judge(summary.run_dir).score(new_outputs)  # the calibrated judge on new outputs
    print(scored.describe())

``calibrate``, ``load_judge``, ``CalibrationSummary``, ``ScoringSummary``, ``RatingPack`` and
``RubricBundle`` are imported on first use, so ``import evolve`` (and ``evolve --help``) does not load the engines.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

from evolve.errors import EvolveError

if TYPE_CHECKING:  # pragma: no cover
    from evolve.data import RatingPack
    from evolve.rubric import RubricBundle
    from evolve.workflows import CalibratedJudge, CalibrationSummary, ScoringSummary, calibrate, load_judge

__version__ = "0.1.0"

_LAZY = {
    "calibrate": "evolve.workflows",
    "CalibrationSummary": "evolve.workflows",
    "load_judge": "evolve.workflows",
    "CalibratedJudge": "evolve.workflows",
    "ScoringSummary": "evolve.workflows",
    "RatingPack": "evolve.data",
    "RubricBundle": "evolve.rubric",
}
"""Names re-exported on first use, and the module that defines them."""

__all__ = ["CalibratedJudge", "CalibrationSummary", "EvolveError", "RatingPack", "RubricBundle", "ScoringSummary", "__version__",
           "calibrate", "load_judge"]


@functools.cache
def _subpackages() -> frozenset[str]:
    """The subpackages of ``evolve`` (read off the package's folder once, when first asked): each
    is reachable as an attribute after a plain ``import evolve`` (``evolve.rubric.scaffold_rubric``),
    imported on first use, as ``import evolve.rubric`` would."""
    import pkgutil

    return frozenset(module.name for module in pkgutil.iter_modules(__path__) if module.ispkg)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _subpackages():
        return importlib.import_module(f"evolve.{name}")  # the import binds it in this module's namespace
    raise AttributeError(f"module 'evolve' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_subpackages()})
