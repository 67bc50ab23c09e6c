"""MAP-Elites archives of guidance texts, the LLM mutation emitter and the run journal.

Each rubric criterion gets its own pyribs ``GridArchive`` whose solutions are guidance
*texts* (object dtype). The objective is ``-MAE`` against physicians on training cases
(pyribs maximises); the two measures are guidance length and the judge's signed bias
(:data:`MEASURE_NAMES`). :class:`MutationEmitter` is a pyribs emitter whose ``ask()`` returns
LLM-written texts derived from sampled parent elites, after rejecting empty, duplicate and
over-long (> 800 characters) proposals.
"""

from evolve.archive._archive import MEASURE_NAMES, make_archive, make_grid, measures_of
from evolve.archive._emitter import MutationEmitter, Proposal, Proposer

__all__ = [
    "MEASURE_NAMES",
    "MutationEmitter",
    "Proposal",
    "Proposer",
    "make_archive",
    "make_grid",
    "measures_of",
]
