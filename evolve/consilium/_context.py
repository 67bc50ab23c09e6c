"""Will every prompt of a case fit the endpoint's context? Checked before any call is paid.

A consilium's prompts grow stage by stage: the opinions see the case; the synthesis sees the case
and every opinion; the last vote, the moderator and the finalizer also see the shared report and
the reviews of earlier rounds. Long case records fill a small context fast (a 4.8k-token NEJM
case makes a quick-preset finalizer prompt of about 7k tokens; the embedded server's slot holds
8,192 tokens, prompt and output together).

:func:`stage_bounds` builds each stage's real prompt (the pipeline's own templates) for one case
and measures it. The role-assignment and opinion prompts depend only on the case, so their
sizes are *exact* (up to the tokenizer); later prompts hold generated text, so they are *bounds*
built from a full panel, every round, and the largest texts the settings allow
(``max_text_chars``/``max_field_chars``). Where the settings bound a text only by its output
limit (the ``paper`` preset: 16,000 tokens an opinion), the true worst case is useless (a
finalizer of half a million tokens), so such a text is assumed no longer than
:data:`TYPICAL_TEXT_TOKENS` (an opinion, a report) or :data:`TYPICAL_FIELD_TOKENS` (a critique,
a revision, a moderator summary), and the message says so. Tokens are estimated as characters /
:data:`CHARS_PER_TOKEN` (no tokenizer of the endpoint's model is at hand).

:func:`check_context` turns the bounds into decisions per pipeline run: a case whose exact
prompt alone exceeds the context is failed before any call (it could never be answered); one
whose exact prompt plus its output limit, or whose bound, exceeds the context gets a warning
(the answer may be cut, and a cut answer is a failure).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from evolve.consilium._models import MAX_PANEL_ROLES, RoleOpinion, RoundRecord, Stage, Vote
from evolve.consilium._pipeline import ConsiliumPipeline, _ConsiliumMaterial
from evolve.data import Case
from evolve.llm import Message

__all__ = [
    "CHARS_PER_TOKEN", "TYPICAL_FIELD_TOKENS", "TYPICAL_TEXT_TOKENS", "ContextCheck", "StageBound", "check_context",
    "stage_bounds",
]

CHARS_PER_TOKEN = 3.5
"""Characters per token assumed for English clinical text (a little below the usual 4, so the
estimate errs towards too many tokens)."""

TYPICAL_TEXT_TOKENS = 1500
"""Assumed size of an opinion or a shared report that the settings bound only by an output limit."""

TYPICAL_FIELD_TOKENS = 300
"""Assumed size of a critique, a proposed revision or a moderator summary bound only by an output limit."""


@dataclass(frozen=True)
class StageBound:
    """One stage's prompt size for one case.

    Attributes:
        stage: Pipeline stage (the largest call of that stage).
        model: The model called (its output limit applies).
        prompt_tokens: Estimated prompt tokens.
        output_tokens: The stage's output limit, tokens.
        exact: The prompt holds only the case and fixed text (else it is an upper bound built
            from the largest generated texts the settings allow).
        assumed: Some generated text in it was bounded only by an output limit and assumed of
            typical size (:data:`TYPICAL_TEXT_TOKENS`, :data:`TYPICAL_FIELD_TOKENS`).
    """

    stage: str
    model: str
    prompt_tokens: int
    output_tokens: int
    exact: bool
    assumed: bool = False

    @property
    def total(self) -> int:
        """Prompt and output, tokens."""
        return self.prompt_tokens + self.output_tokens


def _tokens(messages: Sequence[Message]) -> int:
    return math.ceil(sum(len(m.content) for m in messages) / CHARS_PER_TOKEN) + 4 * len(messages)


def _filler(chars: int) -> str:
    """Text of ``chars`` characters that no identifier-stripping rule shortens."""
    word = "finding "
    return (word * (chars // len(word) + 1))[:chars]


def stage_bounds(pipe: ConsiliumPipeline, case: Case, *, model: str, condition: str, topology: str,
                 workers: Sequence[str] = (), consolidator: str | None = None) -> list[StageBound]:
    """Each stage's prompt size for one pipeline run of ``case`` (see the module docstring).

    Args:
        pipe: A pipeline with the run's settings (no client is needed).
        case: The case.
        model: The pipeline's model (every stage in ``single``; the default consolidator in ``n+1``).
        condition: ``free-form`` or ``structured``.
        topology: ``single`` or ``n+1``.
        workers: Worker models of ``n+1``.
        consolidator: Consolidating model of ``n+1`` (None: ``model``).

    Returns:
        One bound per stage, in pipeline order.
    """
    s = pipe.settings
    role = _filler(40)
    merger = consolidator or model
    if topology == "n+1":  # every worker proposes a panel, the consolidator merges them
        out = [StageBound("role_worker", w, _tokens(pipe._role_ask(case, w, "role_worker").messages),
                          s.limit(w, "role_worker"), True) for w in workers]
        proposal, guessed = _bounded(None, s.limit(merger, "role_consolidation"), TYPICAL_FIELD_TOKENS)
        panels = pipe._role_consolidation_ask(case, merger, [_filler(proposal)] * len(workers)).messages
        out.append(StageBound("role_consolidation", merger, _tokens(panels), s.limit(merger, "role_consolidation"),
                              False, guessed))
    else:
        out = [StageBound("role_assignment", model, _tokens(pipe._role_ask(case, model).messages),
                          s.limit(model, "role_assignment"), True)]
    opinion_models = list(workers) if topology == "n+1" else [model]
    stage: Stage = "opinion_worker" if topology == "n+1" else "opinion"
    for m in opinion_models:
        own = pipe._opinion_ask(case, role, m, condition, stage).messages  # type: ignore[arg-type]
        out.append(StageBound(stage, m, _tokens(own), s.limit(m, stage), True))
    opinion_chars, assumed = _opinion_chars(pipe, condition, opinion_models)
    if topology == "n+1":
        texts = [_filler(opinion_chars)] * len(workers)
        merged = pipe._consolidation_ask(case, role, merger, condition, texts).messages  # type: ignore[arg-type]
        out.append(StageBound("opinion_consolidation", merger, _tokens(merged),
                              s.limit(merger, "opinion_consolidation"), False, assumed))
        merged_chars, merged_assumed = _opinion_chars(pipe, condition, [merger])
        opinion_chars, assumed = max(opinion_chars, merged_chars), assumed or merged_assumed
    consilium_model = merger if topology == "n+1" else model  # the consolidator runs the n+1 consilium
    return out + _consilium_bounds(pipe, case, consilium_model, condition, opinion_chars, assumed)


def _bounded(chars: int | None, limit_tokens: int, typical_tokens: int) -> tuple[int, bool]:
    """The longest text, characters: its character bound if set (and below its output limit),
    else its output limit capped at the typical size (then True: an assumption)."""
    by_limit = int(limit_tokens * CHARS_PER_TOKEN)
    if chars is not None:
        return min(chars, by_limit), False
    typical = int(typical_tokens * CHARS_PER_TOKEN)
    return min(by_limit, typical), by_limit > typical


def _opinion_chars(pipe: ConsiliumPipeline, condition: str, models: Sequence[str]) -> tuple[int, bool]:
    """The longest opinion, characters, and whether its size was assumed."""
    s = pipe.settings
    limit = max(s.limit(m, "opinion") for m in models)
    if condition == "structured":
        five = None if s.max_field_chars is None else 5 * (s.max_field_chars + 40)  # five fields and their labels
        return _bounded(five, limit, TYPICAL_TEXT_TOKENS)
    return _bounded(s.max_text_chars, limit, TYPICAL_TEXT_TOKENS)


def _consilium_bounds(pipe: ConsiliumPipeline, case: Case, model: str, condition: str, opinion_chars: int,
                      assumed: bool) -> list[StageBound]:
    """Synthesis, the last round's vote and moderator, and the finalizer after every round, with
    a full panel and the longest texts the settings allow."""
    s = pipe.settings
    limit = s.limit(model, "vote")
    report_chars, report_assumed = _bounded(s.max_text_chars, limit, TYPICAL_TEXT_TOKENS)
    field_chars, field_assumed = _bounded(s.max_field_chars, limit // 2, TYPICAL_FIELD_TOKENS)
    report = _filler(report_chars)
    assumed = assumed or report_assumed or field_assumed
    opinions = [RoleOpinion(role=f"Role {k} {_filler(30)}", text=_filler(opinion_chars), reasoning="", opinion="")
                for k in range(1, MAX_PANEL_ROLES + 1)]
    seen = _ConsiliumMaterial(case, opinions)
    votes = tuple(Vote(role=o.role, round=1, vote="no", critique=_filler(field_chars),
                       proposed_revision=_filler(field_chars)) for o in opinions)
    rounds = [RoundRecord(number=r, report=report, votes=votes, consensus=False, decision="revise",
                          moderator_summary=_filler(field_chars), revised_report=report)
              for r in range(1, s.max_rounds + 1)]
    last = s.max_rounds
    vote = pipe._vote_asks(seen, model, last, report, rounds[-2] if last > 1 else None)[0]
    prompts: list[tuple[Stage, tuple[Message, ...]]] = [
        ("synthesis", pipe._synthesis_ask(seen, model).messages), ("vote", vote.messages),
        ("moderator", pipe._moderator_ask(seen, model, last, report, votes).messages),
        ("finalizer", pipe._finalizer_ask(seen, model, condition, report, rounds).messages),  # type: ignore[arg-type]
    ]
    return [StageBound(stage, model, _tokens(messages), s.limit(model, stage), False, assumed)
            for stage, messages in prompts]


@dataclass
class ContextCheck:
    """What :func:`check_context` decided for a run.

    Attributes:
        context: Context of one request, tokens (None: unknown, nothing checked).
        source: Where ``context`` comes from.
        blocked: Pipeline runs failed before any call, ``(case_id, model, condition, topology)``
            -> the reason.
        warnings: One sentence per stage whose prompt may not fit, naming the cases.
        largest: The largest estimated prompt + output over every checked run, tokens.
    """

    context: int | None
    source: str
    blocked: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    largest: int = 0


def check_context(pipe: ConsiliumPipeline, cases: Sequence[Case], runs: Sequence[tuple[str, str, str]],
                  context: int | None, source: str, *, workers: Sequence[str] = (),
                  consolidator: str | None = None) -> ContextCheck:
    """Compare every stage of every pipeline run with the endpoint's context, before any call.

    Args:
        pipe: A pipeline with the run's settings.
        cases: The run's cases.
        runs: ``(model, condition, topology)`` of every pipeline run per case.
        context: Context of one request, tokens; None checks nothing.
        source: Where ``context`` comes from (named in every message).
        workers, consolidator: The ``n+1`` models.

    Returns:
        The blocked runs and the warnings (see :class:`ContextCheck`).
    """
    check = ContextCheck(context, source)
    if context is None:
        return check
    risky: dict[str, list[tuple[int, str, StageBound]]] = {}
    for case in cases:
        for model, condition, topology in runs:
            key = (case.case_id, model, condition, topology)
            for b in stage_bounds(pipe, case, model=model, condition=condition, topology=topology,
                                  workers=workers, consolidator=consolidator):
                check.largest = max(check.largest, b.total)
                if b.exact and b.prompt_tokens > context and key not in check.blocked:
                    check.blocked[key] = (
                        f"the {b.stage} prompt alone is about {b.prompt_tokens:,} tokens, more than the "
                        f"{context:,}-token context ({source}); not sent. Use an endpoint with a longer context "
                        "(and state it as endpoint.context_tokens) or shorten the case text")
                elif b.total > context:
                    risky.setdefault(b.stage, []).append((b.total, case.case_id, b))
    for stage, hits in risky.items():
        hits.sort(key=lambda h: -h[0])
        total, case_id, b = hits[0]
        kind = "is about" if b.exact else "may reach"
        assumption = (f" (generated texts the settings do not bound assumed at most {TYPICAL_TEXT_TOKENS:,} tokens, "
                      f"{TYPICAL_FIELD_TOKENS:,} for a critique or summary)") if b.assumed else ""
        names = ", ".join(sorted({h[1] for h in hits})[:5]) + (" ..." if len({h[1] for h in hits}) > 5 else "")
        check.warnings.append(
            f"{stage}: in {len(hits)} pipeline run(s) (cases {names}) the prompt plus the output limit {kind} "
            f"{total:,} tokens (largest, case {case_id}: prompt {b.prompt_tokens:,} + output {b.output_tokens:,}) "
            f"against a {context:,}-token context ({source}){assumption}; an answer that runs into the context is cut and "
            "fails. Lower generation.limits, bound the texts (generation.max_text_chars / max_field_chars) or "
            "use a longer context")
    return check
