"""What a benchmark run and its judging will send, before anything is sent (``--plan``).

:func:`plan_bench_run` counts the calls of ``evolve bench run`` stage by stage, and
:func:`plan_bench_judge` those of ``evolve bench judge`` on a generated run, as a
:class:`~evolve.runs.CallPlan` (issue 25, item 1).

How the pipeline spends calls (consilium paper, role assignment-5.5, :class:`~evolve.consilium.ConsiliumPipeline`), per
case and generating model:

- **role assignment**: once per topology, shared by every condition: one call (``single``), or
  one per worker and one consolidation (``n+1``);
- per condition and topology, with a panel of ``R`` roles (1-5, chosen by the model):
  **opinions** ``R`` (``n+1``: ``R`` x workers, then ``R`` consolidations); **synthesis** 1;
  **review votes** ``R`` per round; **moderator** 1 per round without consensus; **finalizer** 1;
- every call may be **re-asked** up to ``generation.max_reasks`` times (cut, invalid or
  rule-breaking answer).

What the model answers decides ``R``, the rounds (consensus ends them early) and the re-asks, so
every pipeline phase is a range: *low* = one role, consensus in the first round, no re-ask; *high* =
five roles, every round up to ``max_rounds`` with dissent and a revision, every call re-asked
``max_reasks`` times. A stage that fails ends its pipeline run, so a run with failures makes fewer
calls than its *low*. These phases are interactive (each call waits on earlier answers): no Batch API.

**Judging** (:func:`~evolve.consilium.judge_bench`) is not interactive (``batchable``): per
successful pipeline run the final report, and in the structured condition (or with
``free_form_roles``) the primary role's reasoning and opinion, on every criterion the rubric
applies to them; once per case, model and topology the panel (component ``case``); each
``judge_repeats`` times. Before generation it assumes every pipeline run succeeds (a failed one is
not judged); on a generated run it is the exact list :func:`judge_bench` would send.

Tokens: each case's role-assignment prompt, which depends only on the case, is built exactly as
the pipeline sends it and counted (the server's tokenizer when the ``counter`` asks one, else the
stated estimate); every other prompt is built from the pipeline's own templates - an opinion's
with a placeholder role name, later ones with the generated texts left empty - and measured at
the tokens per character of that case's counted prompt, and the generated texts it quotes are
added at their expected sizes (:func:`expected_sizes`). Completion tokens are those expected
sizes - estimates, never the output limits (an answer is at most its stage's limit).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evolve.consilium._config import BenchConfig, load_bench_config
from evolve.consilium._context import TYPICAL_FIELD_TOKENS, TYPICAL_TEXT_TOKENS, _bounded
from evolve.consilium._models import MAX_PANEL_ROLES, RoleOpinion, RoundRecord, Vote
from evolve.consilium._pipeline import ConsiliumPipeline, _ConsiliumMaterial
from evolve.consilium._prompts import render
from evolve.data import Case, Target
from evolve.runs import CHARS_PER_TOKEN, BenchFolder, CallPlan, PhasePlan, count_tokens, prompt_text

if TYPE_CHECKING:  # pragma: no cover
    from evolve.judge import Judge
    from evolve.rubric import Rubric

__all__ = [
    "BENCH_PHASES",
    "PHASE_OF_STAGE",
    "ExpectedSizes",
    "FinishedWork",
    "expected_sizes",
    "finished_work",
    "plan_bench_judge",
    "plan_bench_run",
    "shared_prefix",
]

TokenCounter = Callable[[Sequence[str]], tuple[list[int], str]]
"""``texts -> (tokens per text, how they were counted)``."""

ROLES, OPINIONS, SYNTHESIS, VOTES, MODERATOR, FINALIZER, JUDGING = (
    "role assignment", "opinions", "synthesis", "review votes", "moderator", "finalizer", "judging")
BENCH_PHASES: tuple[str, ...] = (ROLES, OPINIONS, SYNTHESIS, VOTES, MODERATOR, FINALIZER, JUDGING)
"""The phases of a bench plan, in the order they run."""

PHASE_OF_STAGE: dict[str, str] = {
    "role_assignment": ROLES, "role_worker": ROLES, "role_consolidation": ROLES,
    "opinion": OPINIONS, "opinion_worker": OPINIONS, "opinion_consolidation": OPINIONS,
    "synthesis": SYNTHESIS, "vote": VOTES, "moderator": MODERATOR, "finalizer": FINALIZER, "judge": JUDGING,
}
"""Plan phase of each request tag (a pipeline stage, or ``judge``)."""

ROLE_TOKENS = 50
"""Expected tokens of one role in a panel answer (its name, primary flag and rationale)."""

JSON_TOKENS = 15
"""Expected tokens of a structured answer's keys and punctuation."""

_ROLE_NAMES = tuple(f"Clinical specialty {k}" for k in range(1, MAX_PANEL_ROLES + 1))


@dataclass(frozen=True)
class ExpectedSizes:
    """Expected sizes of what one model writes in one pipeline run, tokens (estimates).

    Attributes:
        role: One role of a panel answer (name and rationale).
        opinion: One role's opinion (free-form text or the five structured fields).
        report: The synthesised (or revised) shared report.
        field: A critique, a proposed revision or a moderator summary.
        final: The final opinion (free-form text or the structured fields).
        reask: The user message of one re-ask.
    """

    role: int
    opinion: int
    report: int
    field: int
    final: int
    reask: int

    def panel(self, roles: int) -> int:
        """A role-assignment answer with ``roles`` roles."""
        return JSON_TOKENS + (roles + 1) * self.role

    def vote(self, dissent: bool) -> int:
        """A vote: "yes" with empty texts, or "no" with a critique and a revision."""
        return JSON_TOKENS + (2 * self.field if dissent else 0)


def expected_sizes(pipe: ConsiliumPipeline, model: str, condition: str) -> ExpectedSizes:
    """What ``model`` is expected to write in a pipeline run of ``condition``, tokens.

    A text bounded in characters (``max_text_chars``, ``max_field_chars``) is expected at that
    bound; one bounded only by its output limit at the typical sizes the context check assumes
    (:data:`~evolve.consilium._context.TYPICAL_TEXT_TOKENS` for an opinion or a report,
    :data:`~evolve.consilium._context.TYPICAL_FIELD_TOKENS` for a critique or summary), never above
    the stage's output limit.

    Args:
        pipe: A pipeline with the run's settings (no client needed).
        model: The model writing.
        condition: ``free-form`` or ``structured``.
    """
    s = pipe.settings

    def tokens(chars: int | None, stage: str, typical: int, *, share: float = 1.0) -> int:
        bound, _ = _bounded(chars, int(s.limit(model, stage) * share), typical)  # type: ignore[arg-type]
        return math.ceil(bound / CHARS_PER_TOKEN)

    fields = None if s.max_field_chars is None else s.max_field_chars
    if condition == "structured":
        opinion = tokens(None if fields is None else 5 * fields, "opinion", TYPICAL_TEXT_TOKENS)
        final = tokens(None if fields is None else 9 * fields, "finalizer", TYPICAL_TEXT_TOKENS)
    else:
        opinion = tokens(s.max_text_chars, "opinion", TYPICAL_TEXT_TOKENS)
        final = tokens(s.max_text_chars, "finalizer", TYPICAL_TEXT_TOKENS)
    return ExpectedSizes(
        role=min(ROLE_TOKENS, s.limit(model, "role_assignment") // (MAX_PANEL_ROLES + 1)),
        opinion=opinion, final=final,
        report=tokens(s.max_text_chars, "synthesis", TYPICAL_TEXT_TOKENS),
        field=tokens(fields, "vote", TYPICAL_FIELD_TOKENS, share=0.5),
        reask=math.ceil(len(render("reask.user", problem="x" * 120)) / CHARS_PER_TOKEN),
    )


# -- adding up ---------------------------------------------------------------------------------


@dataclass
class _Span:
    """Calls and tokens of one phase, low and high (floats until the plan is built)."""

    calls: list[float] = field(default_factory=lambda: [0.0, 0.0])
    prompt: list[float] = field(default_factory=lambda: [0.0, 0.0])
    completion: list[float] = field(default_factory=lambda: [0.0, 0.0])
    cached: list[float] = field(default_factory=lambda: [0.0, 0.0])

    def add(self, side: int, calls: float, prompt: float, completion: float, reasks: int = 0,
            reask_tokens: float = 0) -> None:
        """``calls`` calls of ``prompt``/``completion`` tokens each on ``side`` (0 low, 1 high),
        each asked ``reasks`` more times: re-ask ``i`` resends the prompt with ``i`` earlier
        answers and re-ask messages."""
        tries = 1 + reasks
        self.calls[side] += calls * tries
        self.prompt[side] += calls * (tries * prompt + reasks * tries / 2 * (completion + reask_tokens))
        self.completion[side] += calls * tries * completion

    def phase(self, name: str, *, batchable: bool = False, note: str = "") -> PhasePlan:
        def up(v: list[float]) -> tuple[int, int]:
            return math.ceil(v[0] - 1e-9), max(math.ceil(v[0] - 1e-9), math.ceil(v[1] - 1e-9))

        (c0, c1), (p0, p1), (o0, o1) = up(self.calls), up(self.prompt), up(self.completion)
        k0, k1 = (min(math.floor(k), p) for k, p in zip(self.cached, (p0, p1)))
        return PhasePlan(phase=name, calls_low=c0, calls_high=c1, prompt_tokens_low=p0, prompt_tokens_high=p1,
                         completion_tokens_low=o0, completion_tokens_high=o1, cached_prompt_tokens_low=min(k0, k1),
                         cached_prompt_tokens_high=k1, batchable=batchable, note=note)


class _Tokens:
    """Tokens of prompts: exact prompts counted (tokenizer or estimate), built ones measured at
    the tokens per character of the same case's exact prompts."""

    def __init__(self, pipe: ConsiliumPipeline, cases: Sequence[Case], counter: TokenCounter | None) -> None:
        texts = [prompt_text(pipe._role_ask(case, "m").messages) for case in cases]
        counts, self.source = (counter or count_tokens)(texts)
        self.per_char = {case.case_id: n / max(len(t), 1) for case, t, n in zip(cases, texts, counts)}
        self.exact = {case.case_id: n for case, n in zip(cases, counts)}

    def of(self, case: Case, messages: Sequence[object]) -> float:
        """Tokens of ``messages`` (a prompt of ``case``)."""
        return len(prompt_text(messages)) * self.per_char[case.case_id]


# -- the pipeline ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Prompts:
    """Prompt tokens of one case and condition with the generated texts left out (they are added
    at their expected sizes); ``synthesis`` is ``(one role, five roles)``."""

    role: float
    role_consolidation: float
    opinion: float
    opinion_consolidation: float
    synthesis: tuple[float, float]
    vote: tuple[float, ...]           # a vote of a full panel, by round (index 0: round 1)
    vote_single: float                # round 1, one role
    moderator: float
    finalizer_single: float           # one role, one round of consensus
    finalizer: tuple[float, ...]      # full panel, after n rounds (index n-1)


class _PlanMaterial(_ConsiliumMaterial):
    """The consilium's material with the generated texts left empty: nothing in them to strip
    (the case block itself is stripped as the pipeline strips it)."""

    def scrub(self, text: str) -> str:
        return text


def _case_prompts(pipe: ConsiliumPipeline, tokens: _Tokens, case: Case, condition: str, workers: int) -> _Prompts:
    """Prompt tokens of every stage of ``case`` under ``condition`` (generated texts empty)."""
    s = pipe.settings
    stage = "opinion_worker" if workers else "opinion"
    own = pipe._opinion_ask(case, _ROLE_NAMES[0], "m", condition, stage)  # type: ignore[arg-type]
    merge = pipe._consolidation_ask(case, _ROLE_NAMES[0], "m", condition, [""] * max(workers, 1))  # type: ignore[arg-type]
    panels = pipe._role_consolidation_ask(case, "m", [""] * max(workers, 1))

    def material(roles: int) -> _ConsiliumMaterial:
        return _PlanMaterial(case, [RoleOpinion(role=n, text="", reasoning="", opinion="")
                                         for n in _ROLE_NAMES[:roles]])

    one, full = material(1), material(MAX_PANEL_ROLES)
    votes = tuple(Vote(role=n, round=1, vote="no") for n in _ROLE_NAMES)
    rounds = [RoundRecord(number=k, report="", votes=votes, consensus=False, decision="revise")
              for k in range(1, s.max_rounds + 1)]
    consensus = [RoundRecord(number=1, report="", votes=votes[:1], consensus=True)]
    return _Prompts(
        role=tokens.exact[case.case_id],
        role_consolidation=tokens.of(case, panels.messages),
        opinion=tokens.of(case, own.messages),
        opinion_consolidation=tokens.of(case, merge.messages),
        synthesis=(tokens.of(case, pipe._synthesis_ask(one, "m").messages),
                   tokens.of(case, pipe._synthesis_ask(full, "m").messages)),
        vote=tuple(tokens.of(case, pipe._vote_asks(full, "m", k, "", rounds[k - 2] if k > 1 else None)[0].messages)
                   for k in range(1, s.max_rounds + 1)),
        vote_single=tokens.of(case, pipe._vote_asks(one, "m", 1, "", None)[0].messages),
        moderator=tokens.of(case, pipe._moderator_ask(full, "m", 1, "", votes).messages),
        finalizer_single=tokens.of(case, pipe._finalizer_ask(one, "m", condition, "", consensus).messages),  # type: ignore[arg-type]
        finalizer=tuple(tokens.of(case, pipe._finalizer_ask(full, "m", condition, "", rounds[:n]).messages)  # type: ignore[arg-type]
                        for n in range(1, s.max_rounds + 1)),
    )


def _add_roles(spans: dict[str, _Span], p: _Prompts, z: ExpectedSizes, workers: int, k: int) -> None:
    """Role assignment of one case, model and topology (``workers`` > 0: ``n+1``)."""
    span = spans[ROLES]
    for side, roles in ((0, 1), (1, MAX_PANEL_ROLES)):
        reasks = k if side else 0
        answer = z.panel(roles)
        if workers:
            span.add(side, workers, p.role, answer, reasks, z.reask)
            span.add(side, 1, p.role_consolidation + workers * answer, answer, reasks, z.reask)
        else:
            span.add(side, 1, p.role, answer, reasks, z.reask)


def _add_pipeline(spans: dict[str, _Span], p: _Prompts, z: ExpectedSizes, workers: int, k: int, rounds: int) -> None:
    """Every stage after role assignment of one pipeline run: low (one role, consensus in round
    1, no re-ask) and high (five roles, dissent and a revision every round, ``k`` re-asks)."""
    r = MAX_PANEL_ROLES
    if workers:
        spans[OPINIONS].add(0, workers, p.opinion, z.opinion)
        spans[OPINIONS].add(0, 1, p.opinion_consolidation + workers * z.opinion, z.opinion)
        spans[OPINIONS].add(1, r * workers, p.opinion, z.opinion, k, z.reask)
        spans[OPINIONS].add(1, r, p.opinion_consolidation + workers * z.opinion, z.opinion, k, z.reask)
    else:
        spans[OPINIONS].add(0, 1, p.opinion, z.opinion)
        spans[OPINIONS].add(1, r, p.opinion, z.opinion, k, z.reask)
    spans[SYNTHESIS].add(0, 1, p.synthesis[0] + z.opinion, z.report)
    spans[SYNTHESIS].add(1, 1, p.synthesis[1] + r * z.opinion, z.report, k, z.reask)
    spans[VOTES].add(0, 1, p.vote_single + z.opinion + z.report, z.vote(False))
    reviews = r * z.vote(True) + z.field  # the previous round's reviews and the moderator's summary
    for n in range(1, rounds + 1):
        quoted = z.opinion + z.report + (reviews if n > 1 else 0)
        spans[VOTES].add(1, r, p.vote[n - 1] + quoted, z.vote(True), k, z.reask)
        spans[MODERATOR].add(1, 1, p.moderator + z.report + r * z.vote(True), JSON_TOKENS + z.field + z.report,
                             k, z.reask)
    spans[FINALIZER].add(0, 1, p.finalizer_single + z.opinion + z.report + z.vote(False), z.final)
    quoted = r * z.opinion + z.report + rounds * (reviews)
    spans[FINALIZER].add(1, 1, p.finalizer[rounds - 1] + quoted, z.final, k, z.reask)


@dataclass(frozen=True)
class FinishedWork:
    """What a run folder already holds, which resuming it does not generate again.

    Attributes:
        runs: ``(case_id, model, condition, topology)`` of pipeline runs finished without failure.
        panels: ``(case_id, model, topology)`` of stored role assignments.
        blocked: ``(case_id, model, condition, topology)`` of pipeline runs the context check
            refuses before any call (a prompt alone exceeds the context,
            :func:`~evolve.consilium.plan_context`): no call, nothing to judge.
    """

    runs: frozenset[tuple[str, str, str, str]] = frozenset()
    panels: frozenset[tuple[str, str, str]] = frozenset()
    blocked: frozenset[tuple[str, str, str, str]] = frozenset()


def finished_work(config: BenchConfig, cases: Sequence[Case]) -> FinishedWork:
    """The pipeline runs and role assignments ``config.run_dir`` already holds (reads only; a
    failed or unreadable artifact counts as not finished, as the runner treats it)."""
    from pydantic import ValidationError

    from evolve.consilium._models import CaseRun
    from evolve.consilium._runner import case_artifact_path, role_file_path

    runs, panels = set(), set()
    for case in cases:
        for model in config.models:
            for topology in config.topologies:
                if role_file_path(config.run_dir, case.case_id, model, topology).is_file():
                    panels.add((case.case_id, model, topology))
                for condition in config.conditions:
                    path = case_artifact_path(config.run_dir, case.case_id, model, condition, topology)
                    try:
                        done = path.is_file() and CaseRun.model_validate_json(path.read_text("utf-8")).stop_reason != "failure"
                    except (OSError, ValidationError):
                        done = False
                    if done:
                        runs.add((case.case_id, model, condition, topology))
    return FinishedWork(frozenset(runs), frozenset(panels))


def _pipeline_spans(config: BenchConfig, cases: Sequence[Case], tokens: _Tokens, finished: FinishedWork) -> dict[str, _Span]:
    """Calls and tokens of every pipeline phase over the pipeline runs not ``finished``; a role
    assignment is counted when a run needs it and none is stored."""
    pipe = ConsiliumPipeline(None, config.pipeline_settings())  # type: ignore[arg-type]
    s = pipe.settings
    spans = {name: _Span() for name in BENCH_PHASES[:-1]}
    for case in cases:
        prompts = {c: {t: _case_prompts(pipe, tokens, case, c, len(config.workers) if t == "n+1" else 0)
                       for t in config.topologies} for c in config.conditions}
        for model in config.models:
            for topology in config.topologies:
                workers = len(config.workers) if topology == "n+1" else 0
                writer = (config.consolidator or model) if workers else model
                todo = [c for c in config.conditions
                        if (case.case_id, model, c, topology) not in finished.runs | finished.blocked]
                if todo and (case.case_id, model, topology) not in finished.panels:
                    z = expected_sizes(pipe, writer, config.conditions[0])
                    _add_roles(spans, prompts[config.conditions[0]][topology], z, workers, s.max_reasks)
                for condition in todo:
                    z = expected_sizes(pipe, writer, condition)
                    _add_pipeline(spans, prompts[condition][topology], z, workers, s.max_reasks, s.max_rounds)
    return spans


# -- judging -----------------------------------------------------------------------------------


def judge_completion_tokens(judge: Judge) -> tuple[int, int]:
    """Expected output of one judge call, tokens, ``(low, high)``: the score with a rationale of a
    quarter of, or all of, its schema limit (``rationale_max_chars``), at most the judge's
    ``max_tokens``."""
    s = judge.settings

    def tokens(chars: float) -> int:
        return min(s.max_tokens, JSON_TOKENS + math.ceil(chars / CHARS_PER_TOKEN))

    return tokens(s.rationale_max_chars / 4), tokens(s.rationale_max_chars)


def _bench_judge(config: BenchConfig, calibration_run: Path | None) -> tuple[Judge, Rubric, dict[str, str]]:
    """The judge, rubric and guidance texts a bench judging would use (nothing written)."""
    from evolve.consilium._judging import calibration_settings, load_calibrated_guidance
    from evolve.consilium._runner import BENCH_RUBRIC_ID
    from evolve.judge import Judge
    from evolve.rubric import load_protocol, load_rubric

    rubric = load_rubric(BENCH_RUBRIC_ID, root=config.prompts_root)
    judge = Judge(rubric, load_protocol(rubric.id, root=config.prompts_root),
                  calibration_settings(config.judge, calibration_run), schema_limits=config.endpoint.schema_limits)
    guidance = load_calibrated_guidance(calibration_run, rubric) if calibration_run is not None else {}
    return judge, rubric, {c: g.text for c, g in guidance.items() if g.text}


def _judging_before_generation(config: BenchConfig, cases: Sequence[Case], tokens: _Tokens, judge: Judge,
                               rubric: Rubric, guidance: Mapping[str, str], free_form_roles: bool,
                               blocked: frozenset[tuple[str, str, str, str]] = frozenset()) -> PhasePlan:
    """The judge calls of a run not generated yet: every pipeline run assumed to succeed; the
    judged texts at their expected sizes (panel: one to five roles)."""
    pipe = ConsiliumPipeline(None, config.pipeline_settings())  # type: ignore[arg-type]
    criteria = [c for c in rubric.criteria if c.judged]
    span = _Span()
    out = judge_completion_tokens(judge)
    repeats = config.judge_repeats
    for case in cases:
        base: dict[str, list[float]] = {}
        head: dict[str, float] = {}
        for component in ("final", "reasoning", "opinion", "case"):
            target = Target(target_id="t", case_id="c", component=component, text="x",
                            role=_ROLE_NAMES[0] if component in ("reasoning", "opinion") else "")
            messages = [judge.messages(case, target, c, guidance.get(c.criterion_id))
                        for c in criteria if rubric.applies(c.criterion_id, component)]
            base[component] = [tokens.of(case, m) for m in messages]
            head[component] = len(shared_prefix(prompt_text(messages[0]))) * tokens.per_char[case.case_id] if messages else 0
        for model in config.models:
            for topology in config.topologies:
                writer = (config.consolidator or model) if topology == "n+1" else model
                conditions = [c for c in config.conditions if (case.case_id, model, c, topology) not in blocked]
                for side, roles in ((0, 1), (1, MAX_PANEL_ROLES)) if conditions else ():
                    panel = expected_sizes(pipe, writer, config.conditions[0]).panel(roles)
                    _add_target(span, side, base["case"], head["case"], panel, out[side], repeats)
                for condition in conditions:
                    z = expected_sizes(pipe, writer, condition)
                    judged = {"final": z.final}
                    if condition == "structured" or free_form_roles:
                        judged |= {"reasoning": math.ceil(z.opinion * 0.8), "opinion": math.ceil(z.opinion * 0.2)}
                    for component, size in judged.items():
                        for side in (0, 1):
                            _add_target(span, side, base[component], head[component], size, out[side], repeats)
    return span.phase(
        JUDGING, batchable=True,
        note=("every pipeline run assumed to succeed (a failed one is not judged); judged texts at their expected "
              "sizes, the panel of 1-5 roles"))


def shared_prefix(text: str) -> str:
    """The part of a judge prompt every criterion of its target shares (protocol, case, target),
    which a warm prefix cache serves for the second criterion on (:class:`~evolve.judge.Judge`
    puts the criterion last for that)."""
    head, sep, _ = text.rpartition("\nCRITERION: ")
    return head if sep else ""


def _add_target(span: _Span, side: int, per_criterion: Sequence[float], head: float, size: float, out: float,
                repeats: int) -> None:
    """The judge calls of one target (every criterion, ``repeats`` times); what a warm prefix
    cache can serve: the shared prefix from the second criterion on, and whole prompts from the
    second repeat on (a repeat differs only by its seed)."""
    for b in per_criterion:
        span.add(side, repeats, b + size, out)
    if per_criterion:
        span.cached[side] += (len(per_criterion) - 1) * (head + size) + (repeats - 1) * sum(b + size for b in per_criterion)


# -- the plans ---------------------------------------------------------------------------------


_PIPELINE_NOTES = {
    ROLES: "1 call per case, model and topology (n+1: one per worker and a consolidation); high: every call re-asked",
    OPINIONS: "low: a panel of 1 role, high: 5 roles, every call re-asked (n+1: workers and consolidations)",
    SYNTHESIS: "1 per pipeline run; high: re-asked",
    VOTES: "low: 1 role agreeing in round 1; high: 5 roles dissenting in every round, re-asked",
    MODERATOR: "low: none (consensus in round 1); high: every round, re-asked",
    FINALIZER: "1 per pipeline run; high: re-asked",
}


def plan_bench_run(
    config: BenchConfig,
    cases: Sequence[Case],
    *,
    judge: bool = True,
    calibration_run: Path | None = None,
    free_form_roles: bool = False,
    counter: TokenCounter | None = None,
    finished: FinishedWork | None = None,
) -> CallPlan:
    """The calls, tokens and phases of ``evolve bench run`` on ``cases``, without a call.

    Args:
        config: The resolved benchmark configuration.
        cases: The run's cases (:func:`~evolve.consilium.load_bench_cases`).
        judge: The run judges its outputs afterwards (adds the batchable ``judging`` phase).
        calibration_run: The judge file guiding the judge (its guidance is in every judge prompt).
        free_form_roles: Role components of free-form pipelines are judged too.
        counter: ``texts -> (tokens, how they were counted)`` (e.g. the endpoint's ``/tokenize``,
            :func:`evolve.workflows.token_counter`); None estimates at
            :data:`~evolve.runs.CHARS_PER_TOKEN` (the embedded endpoint is never started for a plan).
        finished: What a resumed run folder already holds (:func:`finished_work`): those pipeline
            runs and role assignments are left out (the plan of what is left).

    Returns:
        One phase per pipeline stage group (interactive, ranges as the module docstring says),
        then ``judging`` when ``judge``.

    Raises:
        RunError, RubricError: The guidance or the consilium rubric cannot be read.
    """
    pipe = ConsiliumPipeline(None, config.pipeline_settings())  # type: ignore[arg-type]
    tokens = _Tokens(pipe, cases, counter)
    finished = finished or FinishedWork()
    spans = _pipeline_spans(config, cases, tokens, finished)
    phases = [spans[name].phase(name, note=_PIPELINE_NOTES[name]) for name in BENCH_PHASES[:-1]]
    if judge:
        j, rubric, guidance = _bench_judge(config, calibration_run)
        phases.append(_judging_before_generation(config, cases, tokens, j, rubric, guidance, free_form_roles,
                                                 finished.blocked))
    runs = len(cases) * len(config.models) * len(config.conditions) * len(config.topologies)
    left = (f"{len(finished.runs)} of them finished already (not counted above; the judging is counted whole: what "
            "an earlier judging of the run asked comes from the response cache)" if finished.runs else "")
    if finished.blocked:
        left += ("; " if left else "") + (f"{len(finished.blocked)} refused before any call (a prompt alone exceeds "
                                          "the context; see the warnings)")
    return CallPlan(
        command="evolve bench run", phases=tuple(phases), token_source=tokens.source,
        completion_source=_completion_source(config),
        notes=(f"{len(cases)} case(s) x {len(config.models)} model(s) x {len(config.conditions)} condition(s) x "
               f"{len(config.topologies)} topolog{'y' if len(config.topologies) == 1 else 'ies'} = {runs} pipeline "
               f"run(s){'; ' + left if left else ''}; at most {config.generation.max_rounds} review round(s), up to "
               f"{config.generation.max_reasks} re-ask(s) per call.",
               "Prompts after the opinions quote generated texts: built from the real templates with those texts at "
               "their expected sizes (estimates).",
               "Calls a resumed run already made come from the response cache, free."),
    )


def _completion_source(config: BenchConfig) -> str:
    g = config.generation
    bounded = "bounded texts at their character limits" if g.max_text_chars or g.max_field_chars else \
        f"opinions and reports about {TYPICAL_TEXT_TOKENS:,} tokens, critiques and summaries {TYPICAL_FIELD_TOKENS:,}"
    return (f"estimate: {bounded}, {ROLE_TOKENS} per panel role, a judge rationale a quarter of to all of its "
            f"{config.judge.rationale_max_chars:,}-character limit (each call at most its output limit)")


def _cached_tokens(texts: Sequence[str], counts: Sequence[int]) -> int:
    """Prompt tokens a warm prefix cache can serve, calls in order: a prompt sent before whole,
    else its :func:`shared_prefix` when an earlier call of the same target sent it."""
    seen: set[str] = set()
    heads: set[str] = set()
    cached = 0
    for text, n in zip(texts, counts):
        head = shared_prefix(text)
        if text in seen:
            cached += n
        elif head and head in heads:
            cached += math.floor(n * len(head) / max(len(text), 1))
        seen.add(text)
        heads.add(head)
    return cached


def plan_bench_judge(
    run_dir: Path | str,
    *,
    calibration_run: Path | None = None,
    repeats: int | None = None,
    free_form_roles: bool = False,
    prompts_root: Path | str | None = None,
    counter: TokenCounter | None = None,
) -> CallPlan:
    """The judge calls ``evolve bench judge`` would send on a generated run, without a call.

    The calls are exactly those of :func:`~evolve.consilium.judge_bench` (the same planning
    over the run's artifacts) and their prompts the real requests, counted by the server's
    tokenizer when ``counter`` asks one, else estimated. Completion tokens are estimated
    (:func:`judge_completion_tokens`).

    Args:
        run_dir: A folder written by :func:`~evolve.consilium.run_bench`.
        calibration_run: The judge file whose winners guide the judge.
        repeats: Judge calls per (target, criterion); None = the run's ``judge_repeats``.
        free_form_roles: Also judge free-form role components.
        prompts_root: As :func:`~evolve.consilium.judge_bench` takes it.
        counter: ``texts -> (tokens, source)``; None estimates.

    Raises:
        RunError: Not a benchmark run folder, or a bad calibration run.
        ConfigError: ``repeats`` < 1.
    """
    from evolve.consilium._judging import JudgeBenchResult, _planned_calls
    from evolve.errors import ConfigError
    from evolve.rubric import run_prompts_root

    run_dir = Path(run_dir)
    config = load_bench_config(run_dir)
    if prompts_root is not None:
        config = config.model_copy(update={"prompts_root": run_prompts_root(BenchFolder(run_dir).prompts_root,
                                                                            prompts_root)})
    n = config.judge_repeats if repeats is None else repeats
    if n < 1:
        raise ConfigError(f"judge repeats must be >= 1, got {n}; pass --repeats 1 or more.")
    judge, rubric, _ = _bench_judge(config, calibration_run)
    from evolve.consilium._judging import load_calibrated_guidance

    guidance = load_calibrated_guidance(calibration_run, rubric) if calibration_run is not None else {}
    seeds = [config.judge_seed + r for r in range(n)]
    result = JudgeBenchResult(run_dir=run_dir, path=run_dir, free_form_roles=free_form_roles)
    calls = [c for batch in _planned_calls(run_dir, config, rubric, guidance, seeds, result) for c in batch]
    texts = [prompt_text(judge.messages(case, target, crit, text)) for _, case, target, crit, text, _ in calls]
    counts, source = (counter or count_tokens)(texts)
    cached = _cached_tokens(texts, counts)
    reply = judge_completion_tokens(judge)
    phase = PhasePlan(
        phase=JUDGING, calls_low=len(calls), calls_high=len(calls), prompt_tokens_low=sum(counts),
        prompt_tokens_high=sum(counts), completion_tokens_low=len(calls) * reply[0],
        completion_tokens_high=len(calls) * reply[1], cached_prompt_tokens_low=cached,
        cached_prompt_tokens_high=cached, batchable=True,
        note=f"exact: {len(calls):,} judge request(s) of the run's successful pipeline runs")
    notes = [f"{result.skipped_runs} failed pipeline run(s) are not judged."] if result.skipped_runs else []
    notes.append("Calls answered by the response cache (an earlier judging with the same judge) are not paid again.")
    return CallPlan(command="evolve bench judge", phases=(phase,), token_source=source,
                    completion_source=(f"estimate: the score and a rationale a quarter of to all of its "
                                       f"{judge.settings.rationale_max_chars:,}-character limit, at most "
                                       f"{judge.settings.max_tokens:,} tokens a call"),
                    notes=tuple(notes))
