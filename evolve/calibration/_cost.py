"""The model calls a calibration will make, phase by phase, counted before any is made.

Each count follows the engine (:mod:`evolve.calibration._engine`) as it spends calls: a
request the run already sent (same text, same seed) is answered by the response cache and is
no call - the robust selection's fresh finalist seeds are the re-evaluation's first training
seeds, so those re-evaluation calls are free. Where what the models answer decides the count
(racing prunes mutants early; the winner may be an initial prompt), a phase is a range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from evolve.calibration._engine import CalibrationPlan, Item
from evolve.calibration._mutation import MUTATION_FORMAT, mutation_messages
from evolve.config import CalibrationConfig
from evolve.judge import Judge, derive_seed
from evolve.llm import ChatRequest

__all__ = ["CriterionCalls", "PhaseCalls", "calibration_calls", "calls_left", "race_rungs"]


@dataclass(frozen=True)
class PhaseCalls:
    """The calls of one calibration phase for one criterion.

    Attributes:
        phase: ``initial evaluation``, ``evolution``, ``mutation``, ``finalists`` or
            ``re-evaluation``.
        low: Fewest calls (see :func:`calibration_calls` for each phase's scenario).
        high: Most calls.
        requests: Real requests of the phase whose mean size stands for one call of it (all
            of them when the phase's calls are known in advance; for mutants, whose text is
            not, the initial prompts' requests on the same targets).
        batchable: No call of the phase waits on another's answer.
        note: What makes it a range, in a few words.
    """

    phase: str
    low: int
    high: int
    requests: tuple[ChatRequest, ...]
    batchable: bool
    note: str = ""


@dataclass(frozen=True)
class CriterionCalls:
    """The phases of one criterion, in the order the engine runs them."""

    criterion: str
    phases: tuple[PhaseCalls, ...]


def race_rungs(n_targets: int, first_batch: int) -> list[int]:
    """Training targets seen after each rung of a race (as :meth:`Race.batches`): the first
    batch, then doubling, the last rung being every target."""
    ends, end = [], min(first_batch, n_targets)
    while True:
        ends.append(end)
        if end >= n_targets:
            return ends
        end = min(2 * end, n_targets)


def calibration_calls(config: CalibrationConfig, plan: CalibrationPlan, judge: Judge) -> list[CriterionCalls]:
    """The judge and mutation calls of every criterion of a calibration, by phase.

    Counts, per criterion with ``n`` training and ``v`` validation targets, ``I`` initial
    prompts, ``R`` training repeats, ``Rr`` re-evaluation repeats, ``A`` accepted mutants and
    ``M`` attempts (``budget.attempts_for``), assuming every mutant the emitter accepts reaches
    ``min_coverage`` and the mutation model's proposals are accepted:

    * initial evaluation: ``I * n * R`` (exact);
    * mutation: ``min(A, M)`` (the budget met at once) to ``M`` (racing withdrew mutants, so
      attempts went on);
    * evolution, racing off: ``min(A, M) * n * R`` (exact); racing on, with rungs
      ``e_1 < ... < e_k = n`` (:func:`race_rungs`): low ``min(M * e_1, A * n) * R`` (every
      mutant pruned at the first rung, or none pruned), high ``(A * n + (M - A) * e_{k-1}) * R``
      (the budget met and every other attempt pruned at the last rung before the end);
    * racing noise (racing with a noise margin): the initial prompts judged again on training
      with the re-evaluation's first seed, ``I * n``;
    * finalists (``selection.rule`` robust): ``(I + m) * n * finalist_repeats`` with ``m`` the
      mutants re-judged, ``min(finalists, accepted mutants)`` (0 when racing may prune all),
      less what the racing noise already sent;
    * re-evaluation: no-guidance, the initial prompts and a mutant winner (0 or 1) on
      ``n + v`` targets with ``Rr`` seeds, less the finalists' calls it repeats
      (``min(finalist_repeats, Rr)`` seeds of the initial prompts and the winner on training).

    A mutant below ``min_coverage`` (a judge that fails or declines) is judged fully and does
    not count towards ``A``: at most ``M * n * R`` evolution calls then; rejected proposals
    (invalid, duplicate or too long) end a run below ``A`` with fewer calls.

    Args:
        config: The run's configuration.
        plan: Its checked inputs (:func:`plan_calibration`).
        judge: The judge that builds the requests (the run's rubric, protocol and settings).

    Returns:
        One entry per criterion, in run order.
    """
    out = []
    n_criteria = len(plan.criteria)
    for index, criterion in enumerate(plan.criteria):
        cid = criterion.criterion_id
        train, validation = plan.items[cid]
        initial = [text for _, text in plan.initial[cid]]

        def requests(texts: Sequence[str], items: Sequence[Item], phase: str, repeats: int,
                     criterion=criterion, cid=cid) -> tuple[ChatRequest, ...]:
            seeds = [derive_seed(config.seed, phase, cid, r) for r in range(repeats)]
            return tuple(judge.request(it.case, it.target, criterion, text or None, seed)
                         for text in texts for seed in seeds for it in items)

        attempts = config.budget.attempts_for(index, n_criteria)
        phases = _phases(config, len(train), len(validation), len(initial), attempts)
        evo_train = requests(initial, train, "evolution", config.budget.train_repeats)
        finalist_seeds = config.selection.finalist_repeats
        sample = {
            "initial evaluation": evo_train,
            "evolution": evo_train,
            "mutation": (_mutation_request(config, criterion, initial[0] if initial else "", train, index),),
            "finalists": requests(initial, train, "reeval", finalist_seeds),
            "racing noise": requests(initial, train, "reeval", 1),
            "re-evaluation": requests(["", *initial], list(train) + list(validation), "reeval",
                                      config.budget.reeval_repeats),
        }
        out.append(CriterionCalls(cid, tuple(
            PhaseCalls(name, low, high, sample[name], batchable, note) for name, low, high, batchable, note in phases
        )))
    return out


def _phases(config: CalibrationConfig, n: int, v: int, n_initial: int, attempts: int,
            accepted: int | None = None) -> list[tuple]:
    """``(phase, low, high, batchable, note)`` of one criterion (see :func:`calibration_calls`):
    each phase's least and most calls over the outcomes the models decide (how many mutants
    racing keeps, whether the winner is a mutant)."""
    b = config.budget
    accepted, repeats = min(b.accepted if accepted is None else accepted, attempts), b.train_repeats
    rungs = race_rungs(n, config.racing.first_batch)
    racing = config.racing.enabled and accepted > 0 and len(rungs) > 1
    # (mutants accepted, evolution judge calls, mutation calls) of each outcome
    outcomes = [(accepted, accepted * n * repeats, accepted)]
    if racing:
        outcomes += [(0, attempts * rungs[0] * repeats, attempts),
                     (accepted, (accepted * n + (attempts - accepted) * rungs[-2]) * repeats, attempts)]
    elif attempts > accepted:
        outcomes.append((accepted, accepted * n * repeats, attempts))  # rejected proposals: more attempts
    counts: dict[str, list[int]] = {}
    for mutants, evolution, mutation in outcomes:
        for mutant_wins in ({False, mutants > 0}):
            for dropped in {0, _most_dropped(config, mutants, mutant_wins)}:
                calls = _judged(config, n, v, n_initial, mutants, mutant_wins, dropped)
                calls.update({"evolution": evolution, "mutation": mutation})
                for phase, k in calls.items():
                    counts.setdefault(phase, []).append(k)
    notes = {
        "evolution": (f"racing: every mutant pruned after the first {rungs[0]} of {n} targets, up to {accepted} "
                      f"surviving and {attempts - accepted} pruned after {rungs[-2]}") if racing else
                     (f"{accepted} mutants judged on all {n} targets" if accepted else ""),
        "mutation": f"{accepted} to {attempts} attempts" if attempts > accepted else "",
        "finalists": "racing may leave no mutant to re-judge; adaptive selection may stop mutants after the first "
                     "share of targets",
        "re-evaluation": "the winner is an initial prompt (low) or a mutant (high)",
        "racing noise": "the initial prompts judged again with the re-evaluation's first seed (those calls serve "
                        "the finalists and the re-evaluation)",
    }
    order = ("initial evaluation", "racing noise", "evolution", "mutation", "finalists", "re-evaluation")
    interactive = {"evolution", "mutation"}
    return [(name, min(counts[name]), max(counts[name]), name not in interactive,
             notes.get(name, "") if min(counts[name]) < max(counts[name]) or name == "racing noise" else "")
            for name in order if name in counts]


def _finalist_mutants(config: CalibrationConfig, mutants: int) -> int:
    """Mutants robust selection re-judges when ``mutants`` were accepted."""
    return min(config.selection.finalists, mutants) if config.selection.rule == "robust" else 0


def _most_dropped(config: CalibrationConfig, mutants: int, mutant_wins: bool) -> int:
    """Most finalist mutants adaptive selection can stop after the first share of targets
    (``selection.adaptive``, with two or more mutant finalists; a winning mutant is kept)."""
    m = _finalist_mutants(config, mutants)
    if not getattr(config.selection, "adaptive", False) or m < 2:
        return 0
    return m - 1 if mutant_wins else m


def _first_share(config: CalibrationConfig, n: int) -> int:
    """Training targets every finalist is judged on before adaptive selection may stop one."""
    share = getattr(config.selection, "first_share", 1.0)
    return min(n, max(2, math.ceil(share * n)))


def _judged(config: CalibrationConfig, n: int, v: int, n_initial: int, mutants: int, mutant_wins: bool,
            dropped: int = 0) -> dict[str, int]:
    """New judge calls of the phases whose requests are known in advance, for one outcome: each
    phase's requests as (candidate, split, seed family, repeat) keys; a key an earlier phase
    already sent is a cache hit, not a call. ``dropped`` finalist mutants are judged on the
    first share of the training targets only (adaptive selection)."""
    b, sel = config.budget, config.selection
    initials = [f"initial {i}" for i in range(n_initial)]
    size = {"train": n, "validation": v, "first": _first_share(config, n)}
    phases: list[tuple[str, set[tuple[str, str, str, int]]]] = [
        ("initial evaluation", {(c, "train", "evolution", r) for c in initials for r in range(b.train_repeats)})]
    if config.racing.enabled and getattr(config.racing, "margin_sd", 0) > 0 and initials:
        phases.append(("racing noise", {(c, "train", "reeval", 0) for c in initials}))
    finalist_mutants = [f"mutant {j}" for j in range(_finalist_mutants(config, mutants))]
    kept, stopped = finalist_mutants[: len(finalist_mutants) - dropped], finalist_mutants[len(finalist_mutants) - dropped:]
    if sel.rule == "robust":
        phases.append(("finalists", {(c, split, "reeval", r) for c, split in [*((c, "train") for c in initials + kept),
                                                                              *((c, "first") for c in stopped)]
                                     for r in range(sel.finalist_repeats)}))
    winner = ["mutant 0"] if mutant_wins else []
    phases.append(("re-evaluation", {(c, split, "reeval", r) for c in ["none", *initials, *winner]
                                     for split in ("train", "validation") for r in range(b.reeval_repeats)}))
    sent: set[tuple[str, str, str, int]] = set()
    calls = {}
    for name, keys in phases:
        calls[name] = sum(size[k[1]] for k in keys - sent)
        sent |= keys
    return calls


def _mutation_request(config: CalibrationConfig, criterion, parent: str, train: Sequence[Item], index: int) -> ChatRequest:
    """A mutation request as the engine builds it, with an initial prompt as the parent and the
    first training items standing for the worst ones (their judge score unknown: shown as 0)."""
    m = config.mutation
    worst = [(it.case, it.target, 0.0, it.ratings) for it in list(train)[: m.worst_items]]
    messages = mutation_messages(criterion=criterion, parent_text=parent, parent_mae=0.5, parent_bias=0.0,
                                 worst=worst, excerpt_chars=m.excerpt_chars)
    return ChatRequest(model=m.model or config.endpoint.model, messages=messages, temperature=m.temperature,
                       seed=derive_seed(config.seed, "mutation", criterion.criterion_id, index),
                       max_tokens=m.max_tokens, response_format=MUTATION_FORMAT, tag="mutation")


FINISHED_BY = {
    "evolution": "evolution_finished", "mutation": "evolution_finished", "racing noise": "racing_noise",
    "finalists": "finalists_judged", "re-evaluation": "reevaluation_finished",
}
"""The journal event after which a phase of a criterion has made all its calls."""


def calls_left(config: CalibrationConfig, plan: CalibrationPlan, judge: Judge,
               events: Sequence[dict]) -> tuple[list[CriterionCalls], list[str]]:
    """The calls a resumed calibration still has to make, from its journal's events.

    A phase whose finishing event (:data:`FINISHED_BY`; the initial evaluation: every initial
    prompt evaluated) is journaled for a criterion makes no more calls: a resume replays it from
    the response cache. An evolution under way has the attempts and accepted mutants the journal
    records subtracted from the budget; the phases after it are counted whole.

    Args:
        config: The run's configuration.
        plan: Its checked inputs.
        judge: The judge that builds the requests.
        events: The run's journal events, in order.

    Returns:
        The calls left per criterion (phases with none left are kept, at 0), and one sentence per
        criterion with work done.
    """
    whole = calibration_calls(config, plan, judge)
    out, notes = [], []
    n_criteria = len(plan.criteria)
    for index, crit in enumerate(whole):
        mine = [e for e in events if e.get("criterion") == crit.criterion]
        finished = {e.get("event") for e in mine}
        initial_ids = {f"{crit.criterion}:{name}" for name, _ in plan.initial[crit.criterion]}
        evaluated = {e.get("candidate_id") for e in mine if e.get("event") == "candidate_evaluated"}
        attempts = {e.get("attempt") for e in mine if e.get("event") == "mutation_attempt"}
        accepted = sum(e.get("status") == "accepted" for e in mine if e.get("event") == "mutation_attempt") \
            - sum(e.get("event") == "candidate_pruned" for e in mine)
        evolution_left = None
        if attempts and "evolution_finished" not in finished:
            train, validation = plan.items[crit.criterion]
            budget = config.budget.attempts_for(index, n_criteria)
            left = _phases(config, len(train), len(validation), len(initial_ids), max(0, budget - len(attempts)),
                           accepted=max(0, config.budget.accepted - accepted))
            evolution_left = {name: (low, high) for name, low, high, _, _ in left}
        phases = []
        for p in crit.phases:
            done = (initial_ids <= evaluated) if p.phase == "initial evaluation" else FINISHED_BY.get(p.phase) in finished
            if done:
                p = PhaseCalls(p.phase, 0, 0, p.requests, p.batchable, "done")
            elif evolution_left is not None and p.phase in ("evolution", "mutation"):
                low, high = evolution_left[p.phase]
                p = PhaseCalls(p.phase, low, high, p.requests, p.batchable,
                               f"{len(attempts)} attempts made, {max(0, accepted)} mutants accepted so far")
            phases.append(p)
        if any(p.note == "done" or p.phase == "evolution" and evolution_left is not None for p in phases):
            names = [p.phase for p in phases if p.note == "done"]
            notes.append(f"{crit.criterion}: " + (f"{', '.join(names)} done" if names else "evolution under way")
                         + (f"; {len(attempts)} mutation attempts made" if attempts else ""))
        out.append(CriterionCalls(crit.criterion, tuple(phases)))
    return out, notes
