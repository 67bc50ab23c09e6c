"""Choosing a criterion's winner: the paper's rule, and the noise-aware rule over finalists."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from evolve.stats import IndexedRatings, PairedDifference, agreement, paired_mae_difference

if TYPE_CHECKING:
    from evolve.calibration._engine import Candidate

__all__ = ["Decision", "choose_winner", "paper_order"]


def paper_order(c: Candidate) -> tuple:
    """consilium paper, calibration order: lowest training MAE, then repeat SD, then shorter text, then program id
    (the candidate's sequence number). An empty repeat SD (one repeat) ties at 0."""
    return round(c.train_mae if c.train_mae is not None else math.inf, 12), round(c.train_repeat_sd or 0.0, 12), len(c.text), c.seq


def _pooled_order(c: Candidate) -> tuple:
    return (round(c.pooled_mae if c.pooled_mae is not None else math.inf, 12),
            round(c.finalist_mae if c.finalist_mae is not None else math.inf, 12), len(c.text), c.seq)


@dataclass
class Decision:
    """The outcome of robust selection.

    Attributes:
        winner: The selected candidate.
        best_initial: The initial prompt with the lowest pooled MAE (None if none was selectable).
        challenger: The mutant with the lowest pooled MAE (None without mutants).
        difference: Challenger minus best initial on the fresh finalist calls (None unless both
            exist); the challenger wins only when its verdict is ``better``.
    """

    winner: Candidate
    best_initial: Candidate | None
    challenger: Candidate | None
    difference: PairedDifference | None

    def journal(self) -> dict:
        """The fields of the ``finalists_judged`` journal event."""
        d = self.difference
        return {
            "winner": self.winner.candidate_id,
            "best_initial": self.best_initial.candidate_id if self.best_initial else None,
            "challenger": self.challenger.candidate_id if self.challenger else None,
            "difference": None if d is None else {"estimate": d.estimate, "low": d.low, "high": d.high,
                                                  "n_pairs": d.n_pairs, "verdict": d.verdict},
        }


def choose_winner(
    initials: Sequence[Candidate], mutants: Sequence[Candidate], fresh: Mapping[str, pd.DataFrame],
    evolution: Mapping[str, pd.DataFrame], ratings: pd.DataFrame | IndexedRatings, *, confidence: float, seed: int, gate: bool = True,
) -> Decision:
    """Pick the winner from finalists judged again on training with fresh seeds.

    Every finalist gets ``finalist_mae`` (fresh calls only) and ``pooled_mae`` (evolution and
    fresh calls). The best initial prompt and the challenger (best mutant) are the lowest
    pooled MAE of their kind, and the lower of the two wins. With ``gate`` the challenger wins
    only if its paired MAE difference to the best initial on the fresh calls - which played no
    part in choosing it - has an interval wholly below 0; otherwise the initial prompt is kept.
    The paired difference is computed (and journaled) either way.

    Args:
        initials: Selectable initial prompts (all are finalists).
        mutants: The finalist mutants.
        fresh: Fresh training calls per candidate id.
        evolution: Evolution calls per candidate id.
        ratings: Training ratings (or their :class:`~evolve.stats.IndexedRatings`).
        confidence: Level of the paired interval.
        seed: Bootstrap seed.
        gate: Require the challenger to be shown better (see above).
    """
    for cand in [*initials, *mutants]:
        cand.finalist = True
        cand.finalist_mae = agreement(fresh[cand.candidate_id], ratings).mae
        cand.pooled_mae = agreement(pd.concat([evolution[cand.candidate_id], fresh[cand.candidate_id]]), ratings).mae
    best_initial = min(initials, key=_pooled_order) if initials else None
    challenger = min(mutants, key=_pooled_order) if mutants else None
    if best_initial is not None:
        best_initial.best_initial = True
    if challenger is None or best_initial is None:
        winner = best_initial or challenger
        assert winner is not None  # the caller passes at least one candidate
        return Decision(winner, best_initial, challenger, None)
    difference = paired_mae_difference(fresh[challenger.candidate_id], fresh[best_initial.candidate_id], ratings,
                                       confidence=confidence, seed=seed)
    if gate:
        winner = challenger if difference.verdict == "better" else best_initial
    else:
        winner = min((challenger, best_initial), key=_pooled_order)
    return Decision(winner, best_initial, challenger, difference)
