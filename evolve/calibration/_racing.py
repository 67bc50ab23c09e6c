"""Racing new mutants on growing batches of training targets with optuna's WilcoxonPruner."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import optuna
from optuna.pruners import WilcoxonPruner
from optuna.trial import Trial, create_trial

from evolve.config import RacingSettings

__all__ = ["Race"]


class Race:
    """One criterion's race: an optuna study whose trials are candidates and whose steps are
    training targets (GEPA accepts on a minibatch before paying for a full evaluation; here the
    batches grow until a paired test decides or every target is judged).

    The incumbents (the initial candidates, then every mutant that survived) are complete
    trials whose intermediate values are their per-target errors; ``WilcoxonPruner`` compares a
    new mutant with the best of them on the targets both have seen and prunes it when a
    one-sided signed-rank test says it is worse (p below ``p_threshold``). The value of a
    trial is its mean per-target error, so "best" means best on the same footing.

    Args:
        n_targets: Training targets of the criterion.
        settings: First batch and p threshold.
        seed: Seed of the target order (one fixed order per criterion, so every candidate is
            judged on the same first targets and the test is paired).
    """

    def __init__(self, n_targets: int, settings: RacingSettings, seed: int) -> None:
        self.n_targets = n_targets
        self.order = np.random.default_rng(seed).permutation(n_targets)
        self.first_batch = settings.first_batch
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no INFO line per trial
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            pruner = WilcoxonPruner(p_threshold=settings.p_threshold, n_startup_steps=settings.first_batch)
        self.study = optuna.create_study(direction="minimize", pruner=pruner, storage=optuna.storages.InMemoryStorage())
        self._seen: dict[int, int] = {}  # targets reported per trial number

    def batches(self) -> list[np.ndarray]:
        """Target indices per batch: the first batch, then batches that double the targets seen."""
        ends, end = [], min(self.first_batch, self.n_targets)
        while True:
            ends.append(end)
            if end >= self.n_targets:
                break
            end = min(2 * end, self.n_targets)
        starts = [0, *ends[:-1]]
        return [self.order[a:b] for a, b in zip(starts, ends)]

    def add_incumbent(self, errors: Mapping[int, float]) -> None:
        """Record a fully judged candidate (per-target errors by target index)."""
        self.study.add_trial(create_trial(value=float(np.mean(list(errors.values()))), intermediate_values=dict(errors)))

    def start(self) -> Trial:
        """A trial for a new mutant."""
        return self.study.ask()

    def report(self, trial: Trial, errors: Mapping[int, float]) -> bool:
        """Report new per-target errors; True when the mutant is pruned (and the trial closed)."""
        for step, value in errors.items():
            trial.report(float(value), int(step))
        self._seen[trial.number] = self._seen.get(trial.number, 0) + len(errors)
        if self._seen[trial.number] >= self.n_targets:
            return False  # fully judged: nothing left to save
        if trial.should_prune():
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return True
        return False

    def drop(self, trial: Trial) -> None:
        """Close a mutant judged on every target that cannot be an incumbent (below min_coverage)."""
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def finish(self, trial: Trial, errors: Sequence[float]) -> None:
        """Close a mutant judged on every target: it becomes an incumbent."""
        self.study.tell(trial, float(np.mean(errors)))
