"""An emitter whose solutions are texts written by an LLM from parent elites."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from ribs.archives import ArchiveBase
from ribs.emitters import EmitterBase

from evolve.rubric import MAX_GUIDANCE_CHARS


@dataclass
class Proposal:
    """One mutation attempt.

    Attributes:
        attempt: 0-based attempt number within the criterion (also seeds the mutation call).
        parent_id: ``candidate_id`` of the parent elite.
        text: Proposed guidance, or None when the mutation call failed.
        note: The mutator's short analysis, or the failure reason.
        status: ``accepted`` or a rejection reason (``too_long``, ``empty``, ``duplicate``,
            ``mutation_failure``), set by the emitter; ``pruned`` or ``low_coverage`` when the
            engine withdraws an accepted text after judging it (:meth:`MutationEmitter.withdraw`).
        prompt_tokens: Tokens of the mutation call.
        completion_tokens: Tokens of the mutation call.
    """

    attempt: int
    parent_id: str
    text: str | None
    note: str = ""
    status: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict = field(default_factory=dict)


Proposer = Callable[[Sequence[dict], Sequence[int]], list[Proposal]]
"""``propose(parents, attempt_numbers) -> proposals``: one LLM mutation per parent elite."""


class MutationEmitter(EmitterBase):
    """Asks an LLM for new guidance from parent elites; rejects invalid texts; counts attempts.

    ``ask()`` samples parents uniformly from the archive's elites, calls ``propose`` once per
    parent and keeps the texts that are non-empty, at most 800 characters (consilium paper, calibration) and not
    duplicates of an earlier candidate. It keeps asking until ``batch_size`` texts are
    accepted or a budget runs out (``max_attempts`` attempts or ``accepted_budget`` accepted
    texts over the emitter's life).

    Args:
        archive: The criterion's archive (must hold at least one elite before ``ask``).
        propose: Makes one proposal per parent (see :data:`Proposer`).
        batch_size: Accepted texts wanted per ``ask``.
        max_attempts: Attempt budget (accepted + rejected).
        accepted_budget: Accepted-text budget.
        known_texts: Texts already in the run (initial candidates), for duplicate checks.
        on_proposal: Called with every :class:`Proposal` once its status is set.
    """

    def __init__(
        self,
        archive: ArchiveBase,
        propose: Proposer,
        *,
        batch_size: int,
        max_attempts: int,
        accepted_budget: int,
        known_texts: Sequence[str] = (),
        on_proposal: Callable[[Proposal], None] | None = None,
    ) -> None:
        super().__init__(archive, solution_dim=(), bounds=None, lower_bounds=None, upper_bounds=None)
        self._propose = propose
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.accepted_budget = accepted_budget
        self.attempts = 0
        self.accepted = 0
        self.rejections: Counter[str] = Counter()
        self._seen = {t.strip() for t in known_texts}
        self._on_proposal = on_proposal
        self.last_batch: list[Proposal] = []

    @property
    def exhausted(self) -> bool:
        """True when no further attempt is allowed."""
        return self.attempts >= self.max_attempts or self.accepted >= self.accepted_budget

    def _check(self, text: str | None) -> str:
        if text is None:
            return "mutation_failure"
        text = text.strip()
        if not text:
            return "empty"
        if len(text) > MAX_GUIDANCE_CHARS:
            return "too_long"
        if text in self._seen:
            return "duplicate"
        return "accepted"

    def ask(self) -> np.ndarray:
        """Return up to ``batch_size`` accepted guidance texts (object array, shape (n,))."""
        batch: list[Proposal] = []
        while len(batch) < self.batch_size and not self.exhausted:
            n = min(
                self.batch_size - len(batch),
                self.max_attempts - self.attempts,
                self.accepted_budget - self.accepted,
            )
            parents = self.archive.sample_elites(n)
            parent_rows = [
                {key: parents[key][i] for key in parents} for i in range(len(parents["candidate_id"]))
            ]
            numbers = list(range(self.attempts, self.attempts + n))
            for proposal in self._propose(parent_rows, numbers):
                self.attempts += 1
                proposal.status = self._check(proposal.text)
                if proposal.status == "accepted":
                    proposal.text = proposal.text.strip()  # type: ignore[union-attr]
                    self._seen.add(proposal.text)
                    self.accepted += 1
                    batch.append(proposal)
                else:
                    self.rejections[proposal.status] += 1
                if self._on_proposal is not None:
                    self._on_proposal(proposal)
        self.last_batch = batch
        return np.array([p.text for p in batch], dtype=object)

    def withdraw(self, proposal: Proposal, status: str) -> None:
        """Take back an accepted text that failed its evaluation (``pruned`` by racing, or
        ``low_coverage``): it no longer counts as accepted, so the budget can still be met by
        mutants that survive; it counts as a rejection under ``status``.

        Raises:
            ValueError: The proposal was not accepted.
        """
        if proposal.status != "accepted":
            raise ValueError(f"only an accepted proposal can be withdrawn, not one that is {proposal.status!r}")
        proposal.status = status
        self.accepted -= 1
        self.rejections[status] += 1

    def tell(self, solution, objective, measures, add_info, **fields) -> None:
        """Nothing to adapt: parents are sampled uniformly from the archive."""
