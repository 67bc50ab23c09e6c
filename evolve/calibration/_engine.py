"""The calibration engine: one isolated MAP-Elites archive per criterion (consilium paper, calibration)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from evolve.archive import MutationEmitter, Proposal, make_archive, measures_of
from evolve.calibration._mutation import (
    MUTATION_FORMAT,
    MutationReply,
    mutation_messages,
)
from evolve.calibration._order import interleave, lane_runs
from evolve.calibration._racing import Race, judge_noise_sd, prune_decision
from evolve.calibration._selection import choose_winner, paper_order
from evolve.config import CONFIG_PATHS, CONFIG_VERSION, CalibrationConfig, parse_run_config
from evolve.data import Case, Rating, RatingPack, Target, load_pack
from evolve.errors import NoWinnerError, RunError, SpendLimitReachedError
from evolve.judge import Judge, derive_seed
from evolve.llm import CallFailure, ChatRequest, Client, limits_sent, parse_json_object, validation_problem
from evolve.outputs import CalibrationReport
from evolve.rubric import (
    Criterion,
    Rubric,
    RubricBundle,
    load_initial_guidance,
    load_protocol,
    load_rubric,
    run_prompts_root,
    snapshot_changes,
    unedited_placeholders,
    write_prompts_snapshot,
)
from evolve.runs import (
    CalibrationFolder,
    Event,
    Journal,
    NoProgress,
    ProgressHook,
    atomic_write,
    check_resumable,
    check_same_settings,
    locks_run,
    on_call,
    owned_client,
    with_cache_path,
)
from evolve.splits import Splits, check_splits, load_splits
from evolve.stats import MIN_CASES, IndexedRatings, agreement, item_errors

SCORE_COLUMNS = [
    "candidate_id", "criterion", "target_id", "case_id", "split", "phase", "repeat", "seed",
    "outcome", "score", "prompt_tokens", "completion_tokens", "cached", "rubric_version",
    "prompt_hash", "rationale", "cached_prompt_tokens",
]
CANDIDATE_COLUMNS = [
    "candidate_id", "criterion", "parent_id", "origin", "length", "train_mae", "text", "seq",
    "status", "selected", "elite", "attempt", "train_signed_error", "train_coverage",
    "train_repeat_sd", "objective", "mutation_prompt_tokens", "mutation_completion_tokens", "note",
    "race_targets", "calls_saved", "finalist", "finalist_mae", "pooled_mae", "best_initial",
]



@dataclass
class Item:
    """One (case, target) the judge scores, with its numeric ratings on the criterion."""

    case: Case
    target: Target
    ratings: list[Rating]
    split: str


@dataclass
class Candidate:
    """A guidance candidate and what is known about it (one row of ``candidates.csv``)."""

    candidate_id: str
    criterion: str
    parent_id: str
    origin: str  # none | initial | mutation
    text: str
    seq: int
    status: str = "accepted"
    attempt: int | None = None
    note: str = ""
    train_mae: float | None = None
    train_signed_error: float | None = None
    train_coverage: float | None = None
    train_repeat_sd: float | None = None
    objective: float | None = None
    selected: bool = False
    elite: bool = False
    mutation_prompt_tokens: int = 0
    mutation_completion_tokens: int = 0
    race_targets: int | None = None  # training targets judged before racing decided (None: not raced)
    calls_saved: int = 0  # judge calls racing did not make
    finalist: bool = False
    finalist_mae: float | None = None  # MAE on the fresh finalist calls (robust selection)
    pooled_mae: float | None = None  # MAE on evolution + finalist calls
    best_initial: bool = False

    def row(self) -> dict:
        d = {k: getattr(self, k) for k in CANDIDATE_COLUMNS if k != "length"}
        d["length"] = len(self.text)
        return {k: d[k] for k in CANDIDATE_COLUMNS}


@dataclass
class CalibrationResult:
    """What :func:`calibrate` (and :func:`evolve.workflows.run_calibration`) return.

    Attributes:
        run_dir: The run folder.
        winners: Winning candidate id per criterion.
        report: The run's ``report.json`` (filled by the workflow; None from the engine).
        failed: Criteria that ended without a winner, with the reason (their tables are
            written; the other criteria are complete).
    """

    run_dir: Path
    winners: dict[str, str]
    report: CalibrationReport | None = None
    failed: dict[str, str] = field(default_factory=dict)


def _select_items(
    pack: RatingPack,
    splits: Splits,
    criterion: Criterion,
    side: str,
    limit: int | None,
    seed: int,
    conditions: Sequence[str] | None = None,
) -> list[Item]:
    """Applicable, rated targets of one split side, optionally a seeded subsample in source order.

    A target whose component the criterion does not apply to is never selected (a structural
    exclusion, consilium paper, rubric), nor is one outside ``conditions`` when given.
    """
    ids = set(getattr(splits, side))
    by_target: dict[str, list] = {}
    for r in pack.ratings_of(criterion.criterion_id):  # indexed once per pack, not a pass over all ratings
        if r.score is not None:
            by_target.setdefault(r.target_id, []).append(r)
    items = [
        Item(case=pack.case(t.case_id), target=t, ratings=by_target[t.target_id], split=side)
        for t in pack.targets
        if t.case_id in ids
        and t.component in criterion.components
        and t.target_id in by_target
        and (conditions is None or t.condition in conditions)
    ]
    if limit is not None and len(items) > limit:
        rng = np.random.default_rng([seed, 1 if side == "train" else 2])
        keep = set(rng.choice(len(items), size=limit, replace=False).tolist())
        items = [it for i, it in enumerate(items) if i in keep]
    return items


def _ratings_frame(items: Sequence[Item]) -> pd.DataFrame:
    rows = [r.model_dump() for it in items for r in it.ratings]
    return pd.DataFrame(rows, columns=["case_id", "target_id", "rater_id", "criterion", "score", "not_evaluable", "comment"])


class CriterionRun:
    """Evolution, selection and re-evaluation for one criterion, in its own archive."""

    def __init__(
        self,
        *,
        config: CalibrationConfig,
        criterion: Criterion,
        index: int,
        judge: Judge,
        client: Client,
        pack: RatingPack,
        train: list[Item],
        validation: list[Item],
        initial: list[tuple[str, str]],
        journal: Journal,
        progress: ProgressHook,
        n_criteria: int = 1,
    ) -> None:
        self.config = config
        self.criterion = criterion
        self.cid = criterion.criterion_id
        self.index = index
        self.n_criteria = n_criteria
        self.judge = judge
        self.client = client
        self.pack = pack
        self.train = train
        self.validation = validation
        self.initial = initial
        self.journal = journal
        self.progress = progress
        self.candidates: dict[str, Candidate] = {}
        self.score_rows: list[dict] = []
        self.train_ratings = IndexedRatings(_ratings_frame(train))  # joined after every batch of judge calls
        self._rows_by_candidate: dict[str, pd.DataFrame] = {}
        seed = config.seed + 7919 * index
        self.seed = seed
        self.archive = make_archive(
            criterion, length_bins=config.archive.length_bins, bias_bins=config.archive.bias_bins, seed=seed
        )
        self.race = Race(len(train), config.racing, derive_seed(config.seed, "racing", self.cid, 0)) \
            if config.racing.enabled else None
        self._trials: dict[str, Any] = {}  # candidate id -> its Entrant while it races

    # -- judging ---------------------------------------------------------------------------
    def _judge_many(
        self, cands: Sequence[Candidate], items: Sequence[Item], seeds: Sequence[int], phase: str,
        *, batchable: bool = False,
    ) -> list[dict]:
        """Score candidates x items x seeds; returns the new rows (also kept in ``score_rows``).

        Calls that share an item share their prompt up to the guidance (and items of one case up
        to the target), which the server can serve from the prefix cache of the slot that last
        saw them. With ``lanes`` calls in flight, the items, grouped by case, are cut into
        ``lanes`` runs, each judged item by item (every candidate and seed of an item together),
        each run is sent as one lane (:meth:`Client.map`: a lane's next call leaves when its last
        has come back), so a lane stays on the slot it started on (:mod:`evolve.calibration._order`).
        ``batchable``: a phase nothing waits on call by call (initial evaluation, finalists,
        re-evaluation), which ``--batch`` sends through the Batch API (:meth:`Client.map`)."""
        new_rows: list[dict] = []
        jobs = []
        lanes = max(1, self.client.max_concurrency)
        runs = [[(lane, cand, items[i], rep, seed) for i in run for cand in cands for rep, seed in enumerate(seeds)]
                for lane, run in enumerate(lane_runs([it.case.case_id for it in items], lanes))]
        for lane, cand, it, rep, seed in interleave(runs):
            req = self.judge.request(it.case, it.target, self.criterion, cand.text or None, seed)
            jobs.append((lane, cand, it, rep, seed, req))
        self.progress.phase(f"{self.cid}: {phase} judging", len(jobs), key=self.cid, unit="judge calls")
        results = self.client.map([j[5] for j in jobs], on_result=on_call(self.progress, self.cid), batchable=batchable,
                                  lanes=[j[0] for j in jobs])
        for (_, cand, it, rep, seed, req), res in zip(jobs, results):
            out = self.judge.parse(req, res, self.criterion)
            new_rows.append(
                {
                    "candidate_id": cand.candidate_id,
                    "criterion": self.cid,
                    "target_id": it.target.target_id,
                    "case_id": it.case.case_id,
                    "split": it.split,
                    "phase": phase,
                    "repeat": rep,
                    "seed": seed,
                    "outcome": out.outcome,
                    "score": out.score,
                    "prompt_tokens": out.prompt_tokens,
                    "completion_tokens": out.completion_tokens,
                    "cached": out.cached,
                    "rubric_version": self.judge.rubric.version,
                    "prompt_hash": out.prompt_hash,
                    "rationale": out.rationale,
                    "cached_prompt_tokens": out.cached_prompt_tokens,
                }
            )
        self.score_rows += new_rows
        return new_rows

    def _judge_train(self, cands: Sequence[Candidate], items: Sequence[Item], *, batchable: bool = False) -> pd.DataFrame:
        """Judge candidates on some training items with the evolution seeds; their rows are
        added to what each candidate already has. Returns the new rows."""
        seeds = [derive_seed(self.config.seed, "evolution", self.cid, r) for r in range(self.config.budget.train_repeats)]
        batch = pd.DataFrame(self._judge_many(cands, items, seeds, "evolution", batchable=batchable), columns=SCORE_COLUMNS)
        mine_by_id = _by_candidate(batch, (c.candidate_id for c in cands))
        for cand in cands:
            mine = mine_by_id[cand.candidate_id]
            before = self._rows_by_candidate.get(cand.candidate_id)
            self._rows_by_candidate[cand.candidate_id] = mine if before is None else pd.concat([before, mine])
        return batch

    def _score_on_train(self, cands: Sequence[Candidate]) -> None:
        """Training MAE, bias, coverage and objective of fully judged candidates (journaled)."""
        for cand in cands:
            ag = agreement(self._rows_by_candidate[cand.candidate_id], self.train_ratings)
            cand.train_mae, cand.train_signed_error = ag.mae, ag.signed_error
            cand.train_coverage, cand.train_repeat_sd = ag.coverage, ag.repeat_sd
            selectable = ag.mae is not None and ag.coverage >= self.config.min_coverage
            # A failed evaluation is never NaN (pyribs rejects it) nor a silent 0: it gets the
            # worst possible objective and cannot win.
            cand.objective = -ag.mae if selectable and ag.mae is not None else -float(self.criterion.scale_range)
            if not selectable:
                cand.status = "low_coverage"
            self.journal.append(
                Event.CANDIDATE_EVALUATED,
                criterion=self.cid,
                candidate_id=cand.candidate_id,
                train_mae=cand.train_mae,
                coverage=cand.train_coverage,
                signed_error=cand.train_signed_error,
                repeat_sd=cand.train_repeat_sd,
            )

    def _target_errors(self, cand: Candidate, indices: Iterable[int]) -> dict[int, float]:
        """Per training target (by index): mean |judge - rater| over its pairs; a target without a
        numeric judge score counts as the worst possible error (a failure is never a small one)."""
        errors = item_errors(self._rows_by_candidate[cand.candidate_id], self.train_ratings)
        by_target = errors.set_index("target_id")["abs_error"].replace(math.inf, math.nan).dropna()
        worst = float(self.criterion.scale_range)
        return {int(i): float(by_target.get(self.train[i].target.target_id, worst)) for i in indices}

    def _measures(self, cands: Sequence[Candidate]) -> np.ndarray:
        rows = []
        for cand in cands:
            m, clipped = measures_of(cand.text, cand.train_signed_error, self.criterion)
            if clipped:
                self.journal.append(Event.MEASURES_CLIPPED, criterion=self.cid, candidate_id=cand.candidate_id)
            rows.append(m)
        return np.array(rows)

    # -- mutation --------------------------------------------------------------------------
    def _propose(self, parents: Sequence[dict], attempts: Sequence[int]) -> list[Proposal]:
        mcfg = self.config.mutation
        requests = []
        by_id = {it.target.target_id: it for it in self.train}
        for parent, attempt in zip(parents, attempts):
            pid = str(parent["candidate_id"])
            pcand = self.candidates[pid]
            errors = item_errors(self._rows_by_candidate[pid], self.train_ratings)
            # a target whose every call failed says nothing about the guidance (the endpoint failed)
            errors = errors[errors["failures"] < errors["calls"]].head(mcfg.worst_items)
            worst = []
            for _, row in errors.iterrows():
                it = by_id[row["target_id"]]
                judge: float | str = "not evaluable (the judge declined to score)" if pd.isna(row.get("judge_mean")) \
                    else float(row["judge_mean"])
                worst.append((it.case, it.target, judge, it.ratings))
            messages = mutation_messages(
                criterion=self.criterion,
                parent_text=pcand.text,
                parent_mae=pcand.train_mae,
                parent_bias=pcand.train_signed_error,
                worst=worst,
                excerpt_chars=mcfg.excerpt_chars,
            )
            requests.append(
                ChatRequest(
                    model=mcfg.model or self.config.endpoint.model,
                    messages=messages,
                    temperature=mcfg.temperature,
                    top_p=1.0,
                    seed=derive_seed(self.config.seed, "mutation", self.cid, attempt),
                    max_tokens=mcfg.max_tokens,
                    response_format=MUTATION_FORMAT,
                    tag="mutation",
                )
            )
        self.progress.phase(f"{self.cid}: mutation", len(requests), key=self.cid, unit="mutation calls")
        results = self.client.map(requests, on_result=on_call(self.progress, self.cid))
        proposals = []
        for parent, attempt, res in zip(parents, attempts, results):
            pid = str(parent["candidate_id"])
            if isinstance(res, CallFailure):
                proposals.append(Proposal(attempt=attempt, parent_id=pid, text=None, note=f"endpoint: {res.error}"))
                continue
            tokens: dict[str, Any] = dict(prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens)
            if res.finish_reason != "stop":
                proposals.append(
                    Proposal(attempt=attempt, parent_id=pid, text=None, note=f"cut ({res.finish_reason})", **tokens)
                )
                continue
            try:
                reply = MutationReply.model_validate(parse_json_object(res.text))
            except (ValueError, ValidationError) as exc:
                proposals.append(Proposal(attempt=attempt, parent_id=pid, text=None, note=f"invalid: {validation_problem(exc)}", **tokens))
                continue
            proposals.append(Proposal(attempt=attempt, parent_id=pid, text=reply.guidance, note=reply.analysis, **tokens))
        return proposals

    def _record_proposal(self, p: Proposal) -> None:
        seq = len(self.candidates)
        cid = f"{self.cid}:m{p.attempt + 1:03d}"
        self.candidates[cid] = Candidate(
            candidate_id=cid,
            criterion=self.cid,
            parent_id=p.parent_id,
            origin="mutation",
            text=p.text or "",
            seq=seq,
            status=p.status,
            attempt=p.attempt,
            note=p.note,
            mutation_prompt_tokens=p.prompt_tokens,
            mutation_completion_tokens=p.completion_tokens,
        )
        p.extra["candidate_id"] = cid
        self.journal.append(
            Event.MUTATION_ATTEMPT,
            criterion=self.cid,
            candidate_id=cid,
            parent_id=p.parent_id,
            attempt=p.attempt,
            status=p.status,
            length=len(p.text or ""),
        )

    # -- the whole criterion ---------------------------------------------------------------
    def run(self) -> str:
        """Evolve, select and re-evaluate; returns the winner's candidate id."""
        cfg = self.config
        none = Candidate(candidate_id=f"{self.cid}:none", criterion=self.cid, parent_id="", origin="none", text="", seq=0)
        self.candidates[none.candidate_id] = none
        inits = [self._add_initial(name, text) for name, text in self.initial]
        self.journal.append(
            Event.CRITERION_STARTED, criterion=self.cid, n_train=len(self.train), n_validation=len(self.validation),
            initial=[c.candidate_id for c in inits],
        )
        self._judge_train(inits, self.train, batchable=True)
        self._score_on_train(inits)
        self._stop_if_every_call_failed(inits)
        self._insert(inits)
        if self.race is not None:
            for cand in inits:
                if cand.status == "accepted":
                    self.race.add_incumbent(self._target_errors(cand, range(len(self.train))))
            self._measure_noise([c for c in inits if c.status == "accepted"])
        emitter = self._evolve(inits)
        self.journal.append(
            Event.EVOLUTION_FINISHED, criterion=self.cid, attempts=emitter.attempts, accepted=emitter.accepted,
            rejections=dict(emitter.rejections), archive_cells=int(self.archive.cells), elites=len(self.archive),
        )
        elite_ids = set(self.archive.data("candidate_id").tolist()) if len(self.archive) else set()
        for cand in self.candidates.values():
            cand.elite = cand.candidate_id in elite_ids

        winner = self._select()
        winner.selected = True
        self.journal.append(Event.WINNER_SELECTED, criterion=self.cid, candidate_id=winner.candidate_id,
                            train_mae=winner.train_mae, rule=cfg.selection.rule)

        reeval = [none, *inits] + ([winner] if winner.origin == "mutation" else [])
        seeds = [derive_seed(cfg.seed, "reeval", self.cid, r) for r in range(cfg.budget.reeval_repeats)]
        self._judge_many(reeval, self.train + self.validation, seeds, "reeval", batchable=True)
        self.journal.append(Event.REEVALUATION_FINISHED, criterion=self.cid, candidates=[c.candidate_id for c in reeval])
        self._snapshot(None)
        return winner.candidate_id

    def _add_initial(self, name: str, text: str) -> Candidate:
        cand = Candidate(candidate_id=f"{self.cid}:{name}", criterion=self.cid, parent_id="", origin="initial",
                         text=text, seq=len(self.candidates))
        self.candidates[cand.candidate_id] = cand
        return cand

    def _insert(self, cands: Sequence[Candidate]) -> None:
        """Add fully judged candidates to the archive (pyribs keeps the better one per cell)."""
        if cands:
            self.archive.add(
                np.array([c.text for c in cands], dtype=object),
                np.array([c.objective for c in cands]),
                self._measures(cands),
                candidate_id=np.array([c.candidate_id for c in cands], dtype=object),
            )

    def _evolve(self, inits: Sequence[Candidate]) -> MutationEmitter:
        """Ask the mutation LLM for batches of mutants until the budget is spent; race or judge
        each batch; insert the survivors that reached ``min_coverage`` into the archive."""
        budget = self.config.budget
        emitter = MutationEmitter(
            self.archive, self._propose, batch_size=budget.batch_size,
            max_attempts=budget.attempts_for(self.index, self.n_criteria),
            accepted_budget=budget.accepted, known_texts=[c.text for c in inits], on_proposal=self._record_proposal,
        )
        iteration = 0
        while not emitter.exhausted:
            emitter.ask()
            proposals = list(emitter.last_batch)
            if not proposals:  # only when the budget ran out inside ask()
                break
            batch = [self.candidates[p.extra["candidate_id"]] for p in proposals]
            survivors = self._race(batch) if self.race is not None else self._judge_fully(batch)
            self._score_on_train(survivors)
            self._stop_if_every_call_failed(batch)
            for p, cand in zip(proposals, batch):
                if cand.status != "accepted":  # pruned, or below min_coverage: never in the archive
                    emitter.withdraw(p, cand.status)
            kept = [c for c in survivors if c.status == "accepted"]
            self._insert(kept)
            if self.race is not None:
                for cand in survivors:
                    trial = self._trials.pop(cand.candidate_id)
                    if cand.status == "accepted":
                        self.race.finish(trial, list(self._target_errors(cand, range(len(self.train))).values()))
                    else:
                        self.race.drop(trial)
            iteration += 1
            self._snapshot(iteration)
        return emitter

    def _judge_fully(self, batch: Sequence[Candidate]) -> list[Candidate]:
        """Judge every mutant on every training target (the paper's protocol, ``--racing off``)."""
        self._judge_train(batch, self.train)
        return list(batch)

    def _race(self, batch: Sequence[Candidate]) -> list[Candidate]:
        """Judge the batch on growing batches of training targets, dropping each mutant as soon
        as the pruner finds it worse than the criterion's best; returns the survivors, judged on
        every target. Pruned mutants get status ``pruned``, their targets and the calls saved."""
        assert self.race is not None
        alive = list(batch)
        for cand in alive:
            self._trials[cand.candidate_id] = self.race.start()
        seen = 0
        per_target = self.config.budget.train_repeats
        for indices in self.race.batches():
            if not alive:
                break
            self._judge_train(alive, [self.train[i] for i in indices])
            seen += len(indices)
            still = []
            for cand in alive:
                if self.race.report(self._trials[cand.candidate_id], self._target_errors(cand, indices)):
                    self._trials.pop(cand.candidate_id)
                    cand.status, cand.race_targets = "pruned", seen
                    cand.calls_saved = (len(self.train) - seen) * per_target
                    partial = agreement(self._rows_by_candidate[cand.candidate_id], self.train_ratings).mae
                    cand.note = (f"pruned after {seen} of {len(self.train)} training targets (MAE there "
                                 f"{'n/a' if partial is None else f'{partial:.3f}'}); " + cand.note)[:1000]
                    self.journal.append(Event.CANDIDATE_PRUNED, criterion=self.cid, candidate_id=cand.candidate_id,
                                        targets=seen, calls_saved=cand.calls_saved, partial_mae=partial)
                else:
                    cand.race_targets = seen
                    still.append(cand)
            alive = still
        return alive

    def _measure_noise(self, inits: Sequence[Candidate]) -> None:
        """The judge's seed-to-seed noise, for the racing margin: the initial prompts judged on
        training again with the re-evaluation's first seed - calls the finalists and the
        re-evaluation make anyway, so they come back from the response cache there and cost
        nothing extra - compared target by target with their evolution calls (journaled as
        ``racing_noise``)."""
        assert self.race is not None
        if self.config.racing.margin_sd <= 0 or not inits:
            return
        seed = derive_seed(self.config.seed, "reeval", self.cid, 0)
        again = pd.DataFrame(self._judge_many(inits, self.train, [seed], "noise", batchable=True), columns=SCORE_COLUMNS)
        first: dict[tuple[str, str], float] = {}
        second: dict[tuple[str, str], float] = {}
        again_by_id = _by_candidate(again, (c.candidate_id for c in inits))
        for cand in inits:
            for rows, into in ((self._rows_by_candidate[cand.candidate_id], first), (again_by_id[cand.candidate_id], second)):
                errors = item_errors(rows, self.train_ratings)
                for tid, err in zip(errors["target_id"], errors["abs_error"]):
                    into[(cand.candidate_id, str(tid))] = float(err)
        sd = judge_noise_sd(first, second)
        self.race.set_noise(sd)
        self.journal.append(Event.RACING_NOISE, criterion=self.cid, noise_sd=sd, pairs=len(first.keys() & second.keys()))

    def _stop_if_every_call_failed(self, cands: Sequence[Candidate]) -> None:
        """A batch whose every judge call failed means the endpoint is not judging: stop the
        criterion now, with the endpoint's own error, rather than spend the mutation budget."""
        rows = self._training_rows(c.candidate_id for c in cands)
        if len(rows) and (rows["outcome"] == "model_failure").all():
            raise NoWinnerError(
                f"criterion {self.cid!r}: every one of {len(rows)} judge calls of the last batch failed "
                f"({_commonest(rows['rationale'])!r}); stopped before spending more of the "
                "budget. Fix the endpoint (see the error), then resume the run."
            )

    def _training_rows(self, candidate_ids: Iterable[str]) -> pd.DataFrame:
        """The training judge calls of these candidates, in one frame."""
        frames = [self._rows_by_candidate[c] for c in candidate_ids if c in self._rows_by_candidate]
        return pd.concat(frames) if frames else pd.DataFrame(columns=SCORE_COLUMNS)

    def _select(self) -> Candidate:
        """The winner by ``config.selection.rule``; marks the best initial prompt by the same rule."""
        pool = [
            c for c in self.candidates.values()
            if c.origin in ("initial", "mutation") and c.status == "accepted" and c.train_mae is not None
        ]
        if not pool:
            raise NoWinnerError(
                f"criterion {self.cid!r}: no candidate reached min_coverage={self.config.min_coverage} on training "
                f"items (the judge failed or declined too often{self._failures()}). Check the endpoint with a small "
                "run, raise judge max_tokens, or lower --min-coverage."
            )
        if self.config.selection.rule == "paper":
            initials = [c for c in pool if c.origin == "initial"]
            if initials:
                min(initials, key=paper_order).best_initial = True
            return min(pool, key=paper_order)
        return self._select_robust(pool)

    def _select_robust(self, pool: list[Candidate]) -> Candidate:
        """Finalists re-judged on training with fresh seeds, the winner picked on the pooled
        evidence (with ``selection.gate``, a mutant must also be shown better than the best
        initial prompt on the fresh calls alone); see :func:`choose_winner`."""
        sel = self.config.selection
        initials = [c for c in pool if c.origin == "initial"]
        mutants = sorted((c for c in pool if c.origin == "mutation"), key=paper_order)[: sel.finalists]
        finalists = initials + mutants
        # fresh to evolution, and the re-evaluation's own training seeds: its training calls of the
        # initial prompts and the winner are these calls again (from the cache), not new ones
        seeds = [derive_seed(self.config.seed, "reeval", self.cid, r) for r in range(sel.finalist_repeats)]
        if sel.adaptive and len(mutants) > 1:
            fresh, mutants = self._judge_finalists_adaptively(initials, mutants, seeds)
        else:
            fresh = pd.DataFrame(self._judge_many(finalists, self.train, seeds, "finalist", batchable=True),
                                 columns=SCORE_COLUMNS)
        frames = _by_candidate(fresh, (c.candidate_id for c in [*initials, *mutants]))
        decision = choose_winner(initials, mutants, frames, self._rows_by_candidate, self.train_ratings,
                                 confidence=sel.confidence, seed=derive_seed(self.config.seed, "selection", self.cid, 0),
                                 gate=sel.gate)
        self.journal.append(Event.FINALISTS_JUDGED, criterion=self.cid, **decision.journal())
        return decision.winner

    def _judge_finalists_adaptively(
        self, initials: Sequence[Candidate], mutants: Sequence[Candidate], seeds: Sequence[int]
    ) -> tuple[pd.DataFrame, list[Candidate]]:
        """Fresh finalist calls in two steps, stopping a mutant once the ranking is settled.

        Every finalist is judged with the fresh seeds on a first share of the training targets
        (``selection.first_share``, in the race's fixed order). On those targets the leader is
        the finalist with the lowest pooled (evolution + fresh) error; a mutant finalist that a
        one-sided paired signed-rank test finds worse than the leader at level ``(1 -
        selection.confidence) / 2`` (:func:`~evolve.calibration._racing.prune_decision`, no
        margin) cannot win and is judged no further. The others are judged on the remaining
        targets. The initial prompts and the eventual winner are re-scored on every training
        target by the re-evaluation anyway (these calls come back from the cache there), so
        what a settled ranking saves is the losing mutants' remaining calls.

        Returns:
            The fresh calls (every finalist's), and the mutants still in the final.
        """
        sel = self.config.selection
        order = self.race.order if self.race is not None else np.arange(len(self.train))
        k = min(len(order), max(2, math.ceil(sel.first_share * len(order))))
        first, rest = [self.train[i] for i in order[:k]], [self.train[i] for i in order[k:]]
        finalists = [*initials, *mutants]
        fresh = pd.DataFrame(self._judge_many(finalists, first, seeds, "finalist", batchable=True), columns=SCORE_COLUMNS)
        fresh_by_id = _by_candidate(fresh, (c.candidate_id for c in finalists))
        errors = {c.candidate_id: self._pooled_errors(c, fresh_by_id[c.candidate_id], first) for c in finalists}
        leader = min(finalists, key=lambda c: (float(np.mean(list(errors[c.candidate_id].values()))), c.seq))
        kept = []
        for cand in mutants:
            diffs = [errors[cand.candidate_id][t] - errors[leader.candidate_id][t] for t in errors[cand.candidate_id]]
            out, p = prune_decision(diffs, p_threshold=(1 - sel.confidence) / 2, margin=0.0) \
                if cand is not leader else (False, 1.0)
            if out:
                cand.finalist = True
                cand.note = (f"out of the final after {k} of {len(self.train)} training targets (worse than "
                             f"{leader.candidate_id}, p = {p:.3f}); " + cand.note)[:1000]
            else:
                kept.append(cand)
        if rest:
            more = self._judge_many([*initials, *kept], rest, seeds, "finalist", batchable=True)
            fresh = pd.concat([fresh, pd.DataFrame(more, columns=SCORE_COLUMNS)], ignore_index=True)
        return fresh, kept

    def _pooled_errors(self, cand: Candidate, fresh: pd.DataFrame, items: Sequence[Item]) -> dict[str, float]:
        """Per target of ``items``: mean |judge - rater| over the candidate's evolution calls and
        its ``fresh`` calls; a target with no numeric score counts as the worst possible error."""
        ids = {it.target.target_id for it in items}
        rows = pd.concat([self._rows_by_candidate[cand.candidate_id], fresh])
        errors = item_errors(rows[rows["target_id"].isin(ids)], self.train_ratings)
        by = errors.set_index("target_id")["abs_error"].replace(math.inf, math.nan).dropna()
        worst = float(self.criterion.scale_range)
        return {t: float(by.get(t, worst)) for t in sorted(ids)}

    def _failures(self) -> str:
        """``: 12 of 12 training calls failed, most often with "<error>"`` ('' when none failed)."""
        rows = self._training_rows(self._rows_by_candidate)
        if rows.empty:
            return ""
        failed = rows.loc[rows["outcome"] == "model_failure", "rationale"]
        if failed.empty:
            return f": {int((rows['outcome'] == 'not_evaluable').sum())} of {len(rows)} training calls declined"
        return f": {len(failed)} of {len(rows)} training calls failed, most often with {_commonest(failed)!r}"

    def _snapshot(self, iteration: int | None) -> None:
        """Archive snapshot for inspection: ``archive_<criterion>.csv`` (overwritten)."""
        path = self.config.run_dir / f"archive_{self.cid}.csv"
        if len(self.archive):
            atomic_write(path, self.archive.data(return_type="pandas").to_csv(index=False))
        if iteration is not None:
            self.journal.append(Event.ARCHIVE_SNAPSHOT, criterion=self.cid, iteration=iteration, elites=len(self.archive))


def _by_candidate(calls: pd.DataFrame, ids: Iterable[str]) -> dict[str, pd.DataFrame]:
    """The rows of ``calls`` of each candidate id (an empty frame for one without calls), split
    once: a comparison per candidate costs a scan of the whole frame each."""
    groups = dict(iter(calls.groupby("candidate_id", sort=False)))
    return {cid: groups.get(cid, calls.iloc[:0]) for cid in ids}


def _commonest(rationales: pd.Series) -> str:
    """The most frequent rationale (an endpoint's error message), at most 300 characters."""
    return str(rationales.astype(str).mode().iloc[0])[:300]


MIN_PROPOSALS = 3
"""Fewer mutants per criterion than this draws a budget warning (:func:`budget_warnings`)."""

EXCLUSION_COLUMNS = ["criterion", "component", "split", "n_targets", "n_ratings", "reason"]


def structural_exclusions(
    pack: RatingPack,
    splits: Splits,
    rubric: Rubric,
    criteria: Sequence[Criterion],
    conditions: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Which (criterion, component) pairs a run never judges, and how much material they hold.

    consilium paper, rubric: a criterion outside a component's set is structurally inapplicable - not scored,
    not zero, reported separately. Physician ratings of such pairs (a workbook has a cell for
    every criterion of every component) live in the pack's ``structural_exclusions.csv``, when
    present, and are counted here; they never reach fitness or the report's MAE.

    Returns:
        One row per (criterion, inapplicable component, split) with ``n_targets`` (targets of
        that component on that side, after the condition filter) and ``n_ratings`` (excluded
        physician ratings), columns :data:`EXCLUSION_COLUMNS`.
    """
    side_of = {cid: side for side in ("train", "validation", "holdout") for cid in getattr(splits, side)}
    excluded = pack.path / "structural_exclusions.csv" if pack.path is not None else None
    extra = pd.read_csv(excluded, dtype=str, keep_default_na=False) if excluded is not None and excluded.is_file() else None
    rows = []
    for crit in criteria:
        for component in rubric.components:
            if rubric.applies(crit.criterion_id, component):
                continue
            targets = [
                t for t in pack.targets
                if t.component == component and (conditions is None or t.condition in conditions)
            ]
            for side in ("train", "validation"):
                ids = {t.target_id for t in targets if side_of.get(t.case_id) == side}
                n_ratings = 0
                if extra is not None and ids:
                    n_ratings = int(((extra["criterion"] == crit.criterion_id) & extra["target_id"].isin(ids)).sum())
                if ids or n_ratings:
                    rows.append([crit.criterion_id, component, side, len(ids), n_ratings, "structurally inapplicable"])
    return pd.DataFrame(rows, columns=EXCLUSION_COLUMNS)


def _write_tables(run_dir: Path, runs: Sequence[CriterionRun]) -> None:
    """``candidates.csv`` and ``scores.csv`` of all criteria, in criterion order."""
    cand_frame = pd.DataFrame([c.row() for run in runs for c in run.candidates.values()], columns=CANDIDATE_COLUMNS)
    for column in ("attempt", "race_targets"):
        cand_frame[column] = cand_frame[column].astype("Int64")
    atomic_write(run_dir / CalibrationFolder.CANDIDATES, cand_frame.to_csv(index=False))
    scores = pd.DataFrame([row for run in runs for row in run.score_rows], columns=SCORE_COLUMNS)
    scores["score"] = scores["score"].astype("Int64")  # integers on the rubric's scale ("2", never "2.0")
    atomic_write(run_dir / CalibrationFolder.SCORES, scores.to_csv(index=False))


def run_config_json(config: CalibrationConfig) -> str:
    """``config.json`` of a run: the configuration, its relative paths relative to the run folder
    (so :func:`load_run_config` finds them from any current folder)."""
    data = CalibrationFolder(config.run_dir).portable_fields(json.loads(config.model_dump_json()), CONFIG_PATHS)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _absolute_paths(config: CalibrationConfig) -> dict[str, Any]:
    """The configuration as JSON, its path fields absolute (relative ones from the current folder),
    its endpoint as far as it changes results (prices and spending limits may change on resume)."""
    data = json.loads(config.model_dump_json())
    data["endpoint"] = config.endpoint.resume_fields()
    for name in CONFIG_PATHS:
        if data.get(name) is not None:
            data[name] = os.path.normpath(Path.cwd() / data[name])
    return data


OLDER_RULES: dict[int, str] = {
    1: "other judge seeds, no racing, the paper's selection",
    2: "racing by a plain paired test without the noise margin, finalists judged on every target",
    3: "judge prompts laid out target first (case, target, criterion, guidance)",
}
"""What a run of an older configuration version did differently (the reason it cannot resume)."""


def _check_resume(config: CalibrationConfig, resume: bool) -> None:
    if not check_resumable(config.run_dir, CalibrationFolder.CONFIG, resume, what="a calibration run", kind="calibration"):
        return
    path = config.run_dir / CalibrationFolder.CONFIG
    try:
        # validated, so fields added since the run started compare at their defaults
        stored = _absolute_paths(parse_run_config(config.run_dir))
    except (OSError, ValueError) as exc:  # ValidationError and JSONDecodeError are ValueErrors
        raise RunError(f"{path}: cannot read the stored configuration ({exc}); start a new --run-id.") from exc
    if stored.get("version", 1) < CONFIG_VERSION:
        version = stored.get("version", 1)
        what = OLDER_RULES.get(version, "other rules")
        raise RunError(f"{config.run_dir} was started by an older evolve (configuration version {version}: {what}), "
                       "so this version cannot replay it. Finish it with the evolve that started it, or start a new "
                       "--run-id (with the same --seed, the calls it shares with this run come from the response cache); "
                       "`evolve report` still reads it.")
    # where the run folder and its cache sit, its name and how many archives run at once do not
    # change what the run computes (runs made before the cache path was recorded resume too)
    # a run with its own rubric copy resumes on that copy, wherever the rubric was loaded from
    own_copy = ("prompts_root",) if run_prompts_root(CalibrationFolder(config.run_dir).prompts_root, None) else ()
    check_same_settings(path, stored, _absolute_paths(config),
                        ignore=("archives_dir", "run_id", "parallel_criteria", "cache_path", *own_copy))


@locks_run(lambda config, **_: config.run_dir)  # one process writes a run folder
def calibrate(
    config: CalibrationConfig,
    *,
    client: Client | None = None,
    resume: bool = False,
    progress: ProgressHook | None = None,
    plan: CalibrationPlan | None = None,
) -> CalibrationResult:
    """Run the calibration of every requested criterion and write the run folder.

    Replaying is how a run resumes: every finished LLM call is answered by the response cache
    (same request, same seed), so a resumed run pays only for calls that never finished, and
    the journal records the resumption.

    Args:
        config: Resolved configuration.
        client: A ready client (tests pass one over the fake provider); None builds one from
            ``config.endpoint`` (starting the embedded server if so configured) and closes it.
        resume: Continue the run in ``config.run_dir``.
        progress: Progress hook.
        plan: The run's inputs as :func:`plan_calibration` already checked them (for this
            ``config`` and ``resume``); None checks them here.

    Writes the run's tables (``candidates.csv``, ``scores.csv``, ...), not its report or audit:
    :func:`evolve.workflows.run_calibration` runs this, the drift audit and the report.

    Returns:
        The run folder and the winners (``report`` empty).

    Raises:
        RunError: Run folder exists without ``resume``, or configuration mismatch on resume.
        PackError, SplitError, RubricError: Invalid inputs (raised before any LLM call).
        KeyboardInterrupt: Passed on at once after the journal records ``run_interrupted``
            (resume with ``resume=True``). An owned client is closed with its calls in flight
            cancelled; with a borrowed ``client`` the caller cancels them by
            ``client.close(cancel=True)`` (criterion threads may run until then).
    """
    progress = progress or NoProgress()
    config = with_cache_path(config)  # recorded, so a resume finds the same cache whatever EVOLVE_CACHE_DIR says
    plan = plan or plan_calibration(config, resume=resume)
    config = config.model_copy(update={"conditions": plan.conditions})  # prefer_condition resolved
    run_dir = config.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    journal = CalibrationFolder(run_dir).journal()
    if not resume:
        # the rubric's copy first: a run folder with a config.json always has it
        write_prompts_snapshot(CalibrationFolder(run_dir).prompts_root, [plan.rubric.id], root=config.prompts_root)
        atomic_write(run_dir / CalibrationFolder.CONFIG, run_config_json(config))
    exclusions = structural_exclusions(plan.pack, plan.splits, plan.rubric, plan.criteria, config.conditions)
    atomic_write(run_dir / CalibrationFolder.EXCLUSIONS, exclusions.to_csv(index=False))
    journal.append(Event.RUN_RESUMED if resume else Event.RUN_STARTED, run_id=config.run_id,
                   criteria=[c.criterion_id for c in plan.criteria], inputs=input_fingerprints(plan.pack, plan.splits))
    for warning in plan.warnings:
        journal.append(Event.WARNING, message=warning)
    owns = client is None
    with owned_client(config.endpoint, cache_path=config.cache_path, journal=journal, client=client) as client:
        winners, failed = _run_criteria(config, client, plan, journal, progress, owns=owns)
    return CalibrationResult(run_dir=run_dir, winners=winners, failed=failed)


def input_fingerprints(pack: RatingPack, splits: Splits) -> dict[str, str]:
    """sha256 of what a calibration computes from, as the journal's ``run_started`` records it:
    ``splits`` (the train, validation and holdout case ids) and ``pack`` (its cases, targets and
    ratings). A resume compares them, so a split or pack changed in place is named, never used."""
    def digest(value: Any) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()

    parts = {"train": splits.train, "validation": splits.validation, "holdout": splits.holdout}
    records = [[r.model_dump(mode="json") for r in rows] for rows in (pack.cases, pack.targets, pack.ratings)]
    return {"splits": digest(parts), "pack": digest(records)}


def _resume_notes(config: CalibrationConfig, pack: RatingPack, splits: Splits) -> list[str]:
    """Check a resume against its journal, read once: refuse a split or pack that changed since
    the run started (runs whose journal recorded no fingerprints resume unchecked), and say so
    when the run had finished.

    Returns:
        The note for a finished run, or nothing.

    Raises:
        RunError: Names the input that changed, where it is read from, and the fixes.
    """
    inputs: dict | None = None
    finished = False
    for e in CalibrationFolder(config.run_dir).journal().events():
        if inputs is None and e.get("event") == Event.RUN_STARTED and isinstance(e.get("inputs"), dict):
            inputs = e["inputs"]
        finished = finished or e.get("event") == Event.RUN_FINISHED
    if inputs:  # fingerprinted when it started
        _check_same_inputs(config, inputs, input_fingerprints(pack, splits))
    return [f"{config.run_dir} finished before: resuming replays it from the response cache (a call only for what was "
            "never cached, such as failed answers) and writes its report, tables and audit again."] if finished else []


def _check_same_inputs(config: CalibrationConfig, started: dict, now: dict[str, str]) -> None:
    """Refuse the resume when a fingerprint the run started with differs from ``now``.

    Raises:
        RunError: Names the input that changed, where it is read from, and the fixes.
    """
    where = {"splits": f"split {config.splits}", "pack": f"rating pack {config.pack}"}
    changed = [where[k] for k in ("splits", "pack") if k in started and started[k] != now[k]]
    if changed:
        raise RunError(f"{config.run_dir}: the {' and the '.join(changed)} changed since the run started, so resuming "
                       "would mix two calibrations. Put back what the run started with, or start a new --run-id (with "
                       "the same --seed, the calls the two share come from the response cache).")


@dataclass(frozen=True)
class CalibrationPlan:
    """A validated calibration, before anything is written or called (:func:`plan_calibration`).

    Attributes:
        pack: The rating pack.
        splits: Its case-disjoint split.
        rubric: The pack's rubric.
        protocol: The fixed judge protocol (system message).
        criteria: The criteria to calibrate, in order.
        initial: Initial guidance candidates per criterion id.
        items: ``(training items, validation items)`` per criterion id.
        warnings: :func:`budget_warnings` of the run.
        conditions: The target conditions used: ``config.conditions``, or
            ``(config.prefer_condition,)`` when that was None and the pack has such targets.
        notes: What the plan chose on the user's behalf, and on resume whether the rubric the
            run copied has changed at its source since (one sentence each).
    """

    pack: RatingPack
    splits: Splits
    rubric: Rubric
    protocol: str
    criteria: list[Criterion]
    initial: dict
    items: dict[str, tuple[list, list]]
    warnings: list[str] = field(default_factory=list)
    conditions: tuple[str, ...] | None = None
    notes: list[str] = field(default_factory=list)


def plan_calibration(config: CalibrationConfig, *, resume: bool = False) -> CalibrationPlan:
    """Check a calibration's inputs and choose its targets; write nothing, call no model.

    Raises:
        RunError: Run folder exists without ``resume``, configuration mismatch on resume, a
            criterion unknown or physician-only, or no training/validation targets.
        PackError, SplitError, RubricError: Invalid inputs.
    """
    _check_resume(with_cache_path(config), resume)
    root, notes = config.prompts_root, []
    if resume:  # a resumed run reads the rubric copy it started with (runs made before copies: the original)
        own = CalibrationFolder(config.run_dir).prompts_root
        root, notes = run_prompts_root(own, config.prompts_root), snapshot_changes(own)
    pack = load_pack(config.pack, prompts_root=root, require_ratings=True)
    splits = load_splits(config.splits)
    check_splits(splits, pack)
    if resume:
        notes += _resume_notes(config, pack, splits)
    rubric = load_rubric(pack.manifest.rubric.id, root=root, version=pack.manifest.rubric.version)
    if config.rubric is not None and config.rubric != rubric.id:
        raise RunError(
            f"--rubric {config.rubric!r} was requested but pack {pack.manifest.name!r} is rated on rubric "
            f"{rubric.id!r}. Import the ratings against {config.rubric!r} (e.g. `evolve ratings import-workbooks`) "
            "or drop --rubric."
        )
    criteria = _chosen_criteria(config, rubric)
    conditions, chosen = _conditions(config, pack)
    items = {}
    for i, c in enumerate(criteria):
        train = _select_items(pack, splits, c, "train", config.budget.max_train_targets, config.seed + i, conditions)
        val = _select_items(pack, splits, c, "validation", config.budget.max_validation_targets, config.seed + i, conditions)
        if not train or not val:
            raise RunError(
                f"criterion {c.criterion_id!r}: {len(train)} training and {len(val)} validation targets have "
                "ratings; both must be non-empty. Check the split fractions, --condition and the pack."
            )
        items[c.criterion_id] = (train, val)
    protocol = load_protocol(rubric.id, root=root)
    initial = {c.criterion_id: load_initial_guidance(rubric.id, c.criterion_id, root=root) for c in criteria}
    return CalibrationPlan(
        pack=pack, splits=splits, rubric=rubric, protocol=protocol, criteria=criteria, items=items, initial=initial,
        warnings=budget_warnings(config, len(criteria)) + validation_size_warnings(items)
        + placeholder_warnings(RubricBundle(rubric, protocol, {k: tuple(v) for k, v in initial.items()})),
        conditions=conditions, notes=notes + chosen,
    )


def validation_size_warnings(items: dict[str, tuple[list[Item], list[Item]]]) -> list[str]:
    """Warnings, before a run, about validation sets too small for any paired verdict.

    A verdict (winner against a baseline) needs :data:`~evolve.stats.MIN_CASES` validation
    cases; with fewer, the report can only say "too few cases to tell" - better known before
    paying for the run than after.

    Args:
        items: Criterion id -> (training items, validation items), as the run will judge them.

    Returns:
        One sentence per criterion whose validation items come from fewer cases.
    """
    out = []
    for criterion_id, (_, validation) in items.items():
        n_cases = len({it.case.case_id for it in validation})
        if n_cases < MIN_CASES:
            out.append(f"criterion {criterion_id}: its {len(validation)} validation target(s) come from {n_cases} "
                       f"case(s), fewer than the {MIN_CASES} a paired verdict needs, so every verdict of the report will "
                       "read 'too few cases to tell'. Rate more cases, give the split more validation cases (evolve "
                       "splits make --validation-fraction), or raise budget.max_validation_targets "
                       "(--max-validation-targets) where the preset subsamples them.")
    return out


def placeholder_warnings(bundle: RubricBundle) -> list[str]:
    """A warning, before a run pays for calls, when the rubric still holds the placeholder texts
    that ``evolve rubric new`` writes (the judge would be calibrated on them)."""
    places = unedited_placeholders(bundle)
    if not places:
        return []
    shown = ", ".join(places[:3]) + (f" and {len(places) - 3} more" if len(places) > 3 else "")
    return [f"rubric {bundle.rubric.id!r} still holds {len(places)} placeholder text(s) from `evolve rubric new` "
            f"({shown}): the judge would be calibrated on them. Write them, then check with `evolve rubric check "
            f"{bundle.rubric.id} --prompts-root DIR`."]


def _conditions(config: CalibrationConfig, pack: RatingPack) -> tuple[tuple[str, ...] | None, list[str]]:
    """The target conditions a run uses (see ``CalibrationConfig.prefer_condition``) and a note
    when the preferred condition was chosen for the user."""
    prefer = config.prefer_condition
    if config.conditions is not None or prefer is None:
        return config.conditions, []
    present = sorted({t.condition for t in pack.targets})
    if prefer not in present:
        return None, []
    n = sum(t.condition == prefer for t in pack.targets)
    note = (f"calibrating on the {n} {prefer!r} targets of {len(pack.targets)} (conditions in the pack: "
            f"{', '.join(map(repr, present))}), as the paper did; pass --condition to choose others")
    return (prefer,), ([note] if len(present) > 1 else [])


def budget_warnings(config: CalibrationConfig, n_criteria: int) -> list[str]:
    """Warnings, before a run, about a budget too small to calibrate anything.

    Returns:
        One sentence per problem: fewer than three mutants per criterion (too few real
        proposals to find, let alone show, an improvement), or a shared attempt budget whose
        share per criterion is below the accepted budget. A budget of no accepted mutant is a
        baseline run, said as such.
    """
    b = config.budget
    attempts = min(b.attempts_for(i, n_criteria) for i in range(n_criteria))
    out = []
    if b.accepted == 0:
        out.append("budget.accepted is 0: nothing is evolved, so each criterion's winner is its best initial "
                   "guidance, judged against the baselines on validation (a baseline run). Raise budget.accepted "
                   "(--accepted) to calibrate.")
    elif min(b.accepted, attempts) < MIN_PROPOSALS:
        out.append(f"the budget affords at most {min(b.accepted, attempts)} mutant(s) per criterion (accepted "
                   f"{b.accepted}, attempts {attempts}): too few to find, let alone show, an improvement - this run "
                   f"demonstrates the machinery. Raise budget.accepted and budget.max_attempts (--accepted and "
                   f"--max-attempts) to at least {MIN_PROPOSALS} (the paper preset: 25 accepted, 320 attempts shared by "
                   "the criteria).")
    if b.shared_attempts is not None and attempts < b.accepted:
        out.append(f"the shared budget of {b.shared_attempts} attempts gives {attempts} per criterion over "
                   f"{n_criteria} criteria, fewer than the {b.accepted} accepted mutants asked for; the attempts will "
                   "run out first.")
    return out


def _chosen_criteria(config: CalibrationConfig, rubric: Rubric) -> list[Criterion]:
    """The criteria to calibrate: ``config.criteria`` or every evolvable one, each judged."""
    wanted = config.criteria or tuple(c.criterion_id for c in rubric.criteria if c.evolve)
    criteria = []
    for cid in wanted:
        try:
            crit = rubric.criterion(cid)
        except KeyError:
            raise RunError(f"criterion {cid!r} is not in rubric {rubric.id!r}; choose from {[c.criterion_id for c in rubric.criteria]}.") from None
        if not crit.judged:
            raise RunError(f"criterion {cid!r} is physician-only (the judge never scores it); drop it from --criterion.")
        criteria.append(crit)
    return criteria


def _run_criteria(config: CalibrationConfig, client: Client, plan: CalibrationPlan, journal: Journal,
                  progress: ProgressHook, *, owns: bool) -> tuple[dict[str, str], dict[str, str]]:
    """Evolve every criterion's archive in its own thread over one client; write the tables.

    Returns:
        The winning candidate id per criterion, and why each criterion without one failed.
    """
    runs: list[CriterionRun] = []
    pool = ThreadPoolExecutor(max_workers=min(config.parallel_criteria, len(plan.criteria)), thread_name_prefix="criterion")
    interrupted = False
    try:
        judge = Judge(plan.rubric, plan.protocol, config.judge, schema_limits=limits_sent(client))
        for i, c in enumerate(plan.criteria):
            train, val = plan.items[c.criterion_id]
            runs.append(CriterionRun(
                config=config, criterion=c, index=i, judge=judge, client=client, pack=plan.pack,
                train=train, validation=val, initial=plan.initial[c.criterion_id], journal=journal, progress=progress,
                n_criteria=len(plan.criteria),
            ))
        # The archives are isolated; only the client (concurrency bound, cache, usage) is shared.
        futures = [pool.submit(run.run) for run in runs]
        winners, failed = {}, {}
        for run, future in zip(runs, futures):
            try:
                winners[run.cid] = future.result()
            except NoWinnerError as exc:  # one criterion's failure keeps the others' finished work
                failed[run.cid] = str(exc)
                journal.append(Event.CRITERION_FAILED, criterion=run.cid, error=str(exc)[:500])
        _write_tables(config.run_dir, runs)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        journal.append(Event.RUN_INTERRUPTED, error=f"{type(exc).__name__}: {exc}"[:500])
        pool.shutdown(wait=False, cancel_futures=True)
        if owns and not isinstance(exc, SpendLimitReachedError):  # at a spend limit, calls out finish and are cached
            client.close(cancel=True)  # the criterion threads' calls in flight raise at once
        raise
    finally:
        # On Ctrl-C with a borrowed client, its owner cancels the calls in flight by closing it
        # (after we re-raise); waiting for the criterion threads here would hold the interrupt
        # until their calls finish. Any other error waits for them, as a finished run does.
        pool.shutdown(wait=owns or not interrupted)
    return winners, failed
