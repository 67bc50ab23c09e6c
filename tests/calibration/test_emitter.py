"""The mutation emitter over a real pyribs archive with text elites."""

from __future__ import annotations

import numpy as np

from evolve.archive import MutationEmitter, Proposal, make_archive, measures_of
from evolve.rubric import load_rubric


def _archive():
    crit = load_rubric("savage-rationale-errors").criteria[0]
    archive = make_archive(crit, length_bins=4, bias_bins=3, seed=0)
    archive.add(np.array(["seed guidance"], dtype=object), np.array([-1.0]),
                np.array([[13.0, 0.0]]), candidate_id=np.array(["c:init"], dtype=object))
    return crit, archive


def test_ask_rejects_long_empty_duplicate_and_failed_texts_and_counts_attempts():
    crit, archive = _archive()
    script = iter(["ok one", "x" * 801, "", "seed guidance", None, "ok two", "ok three"])
    seen = []

    def propose(parents, numbers):
        assert all(p["candidate_id"] == "c:init" for p in parents)
        return [Proposal(attempt=n, parent_id=str(p["candidate_id"]), text=next(script)) for p, n in zip(parents, numbers)]

    em = MutationEmitter(archive, propose, batch_size=3, max_attempts=10, accepted_budget=3,
                         known_texts=["seed guidance"], on_proposal=seen.append)
    texts = em.ask()
    assert texts.dtype == object and texts.tolist() == ["ok one", "ok two", "ok three"]
    assert em.attempts == 7 and em.accepted == 3 and em.exhausted
    assert dict(em.rejections) == {"too_long": 1, "empty": 1, "duplicate": 1, "mutation_failure": 1}
    assert [p.status for p in seen] == ["accepted", "too_long", "empty", "duplicate", "mutation_failure", "accepted", "accepted"]


def test_attempt_budget_stops_asking():
    _, archive = _archive()
    em = MutationEmitter(archive, lambda ps, ns: [Proposal(attempt=n, parent_id="c:init", text="y" * 900) for n in ns],
                         batch_size=2, max_attempts=5, accepted_budget=2)
    assert em.ask().tolist() == [] and em.attempts == 5 and em.exhausted


def test_measures_are_clipped_and_flagged():
    crit, _ = _archive()
    m, clipped = measures_of("abc", 5.0, crit)
    assert m.tolist() == [3.0, 3.0] and clipped
    m, clipped = measures_of("abc", None, crit)
    assert m.tolist() == [3.0, 0.0] and not clipped
