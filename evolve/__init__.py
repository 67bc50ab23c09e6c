"""evolve: calibrate LLM judges of clinical text against physician ratings.

For each rubric criterion, `evolve` keeps an isolated MAP-Elites archive (pyribs) of short
guidance prompts appended to a fixed judge protocol; an LLM mutates elites, fitness is the
mean absolute error (MAE) between the judge's scores and every individual physician rating on
training cases, and winners are re-scored with fresh seeds on held-out validation cases against
no-guidance, initial-prompt and training-median baselines.
"""

from evolve.errors import EvolveError

__version__ = "0.1.0"

__all__ = ["EvolveError", "__version__"]
