"""The generation core of the consilium: roles, opinions, review rounds, finalizer (consilium paper, role assignment-5.5).

:class:`ConsiliumPipeline` turns one case into a :class:`~evolve.consilium.CaseRun` through a
:class:`~evolve.llm.Client`. It holds no per-case state, so the runner may call it for several
cases at once from threads sharing one client.

Rules common to every stage (consilium paper, per-case record-5.6):

- decoding from :class:`PipelineSettings`: the same temperature, top_p and seed on every
  call (the requests of different stages, roles and rounds already differ by their messages,
  so no seed offset is needed, and a resumed run sends byte-identical requests and hits the
  response cache), ``max_tokens`` from the stage's limit, ``tag`` = the stage name;
- structured stages send a strict JSON-schema ``response_format`` built from the ``*Reply``
  model (every property required, no defaults; ``maxLength``/``minLength`` removed when
  ``schema_limits`` is False);
- an answer that is cut (``finish_reason != "stop"``), is not valid JSON, breaks the schema or
  a stage rule is *re-asked* up to ``max_reasks`` times: the previous messages, the model's
  answer and a user message naming the broken rule; after the last attempt the stage fails;
- a :class:`~evolve.llm.CallFailure` (the endpoint failed after the client's retries) fails
  the stage at once, without a re-ask;
- every call, re-asks included, is recorded as a :class:`~evolve.consilium.CallRecord` (tokens,
  cache hit, finish reason, prompt hash, attempt, error), in a deterministic order.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, ValidationError

from evolve.consilium._models import (
    MAX_ROUNDS,
    CallRecord,
    CaseRun,
    Condition,
    ModeratorReply,
    RoleAssignment,
    RoleAssignmentReply,
    RoleOpinion,
    RoundRecord,
    Stage,
    StopReason,
    StructuredFinalReply,
    StructuredOpinionReply,
    Topology,
    Vote,
    VoteReply,
    panel_problem,
)
from evolve.consilium._prompts import (
    block,
    case_block,
    consilium_case_block,
    fence,
    named_blocks,
    numbered_blocks,
    prompt_catalog,
    render,
    split_free_form,
    strip_identifiers,
)
from evolve.data import Case, PanelRole
from evolve.errors import ConfigError
from evolve.judge import prompt_hash
from evolve.llm import (
    MAX_OUTPUT_TOKENS,
    MAX_SEED,
    CallFailure,
    ChatRequest,
    ChatResponse,
    Client,
    Message,
    parse_json_object,
    response_format,
    strip_length_limits,
    validate_reply,
    validation_problem,
)
from evolve.records import Record

__all__ = [
    "PIPELINE_VERSION",
    "ConsiliumPipeline",
    "PipelineSettings",
    "StageLimits",
    "render_structured_final",
    "render_structured_opinion",
    "reply_format",
]

PIPELINE_VERSION = "5"  # 2: de-identification keeps clinical content, removes names, URLs, record numbers;
# 3: n+1 is the paper's 3+1 throughout (workers propose panels, the consolidator merges them and runs the consilium);
# 4: every stage sees the identifier-stripped case (dates, citations, case-number variants, hospitals too), and
# panel proposals and worker opinions are stripped before the consolidator reads them;
# 5: role names and rationales and re-asked answers are stripped too, a case number inside a sentence reads "this
# case", and the vote and moderator schemas no longer ask for text the prompts tell a "yes" or "no change" to leave empty
"""Version of the pipeline's prompts and rules; bump it when any template of
:func:`~evolve.consilium.prompt_catalog`, the block layout or a rule of this module changes."""

T = TypeVar("T")


class StageLimits(Record):
    """Output limits per stage, tokens (consilium paper, generation defaults; defaults inside the paper's ranges), each
    16..131,072 (:data:`evolve.llm.MAX_OUTPUT_TOKENS`).

    Attributes:
        role_assignment: Role assignment (paper: 1,024-4,096).
        opinion: Each pre-consilium opinion, each ``n+1`` worker opinion and each
            consolidation (paper: ~16,000).
        consilium: Synthesis, every vote and every moderator decision (paper: 16,000-32,768).
        finalizer: The final opinion.
    """

    role_assignment: int = Field(default=2048, ge=16, le=MAX_OUTPUT_TOKENS)
    opinion: int = Field(default=16000, ge=16, le=MAX_OUTPUT_TOKENS)
    consilium: int = Field(default=16000, ge=16, le=MAX_OUTPUT_TOKENS)
    finalizer: int = Field(default=16000, ge=16, le=MAX_OUTPUT_TOKENS)

    def for_stage(self, stage: Stage) -> int:
        """The limit that applies to ``stage``, tokens.

        Raises:
            ValueError: ``stage`` is not a generation stage (``judge``).
        """
        if stage in ("role_assignment", "role_worker", "role_consolidation"):
            return self.role_assignment
        if stage in ("opinion", "opinion_worker", "opinion_consolidation"):
            return self.opinion
        if stage in ("synthesis", "vote", "moderator"):
            return self.consilium
        if stage == "finalizer":
            return self.finalizer
        raise ValueError(f"stage {stage!r} is not a stage of the generation pipeline")


class PipelineSettings(Record):
    """Decoding and rules of every generating call (consilium paper, generation defaults: temperature 0, top_p 1, seed 42).

    Attributes:
        temperature: Sampling temperature of every call.
        top_p: Nucleus mass (1 = off).
        seed: Seed of every call.
        max_rounds: Most review rounds (consilium paper, interactive consilium: 5); a revision after the last round's
            dissent is kept without another vote.
        max_reasks: Re-asks after an invalid, cut or rule-breaking answer (0 = none), per call.
        limits: Output limits per stage, tokens.
        model_limits: Output limits of particular models (model id -> limits), replacing
            ``limits`` for that model's calls (the paper gave each model its own, consilium paper, generation defaults).
        schema_limits: Keep ``maxLength``/``minLength`` in the JSON schemas sent (constrained
            decoders need them; some hosted strict modes reject them).
        max_field_chars: Bound every text field of a structured answer to this many
            characters (``maxLength``), so a constrained decoder closes its JSON within a small
            output limit; None = only the bounds the reply models declare.
        max_text_chars: Bound free-form texts (free-form opinions and final opinions) and the
            moderator's revised report to this many characters: free-form stages are then
            asked for a JSON object ``{"text": ...}`` with that ``maxLength`` (the text itself
            stays free-form narrative); None = plain text, bounded only by the output limit.
            Both exist for small local models, whose free text otherwise runs into the token
            limit and is cut (a cut answer is a failure, never half a text).
    """

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int = Field(default=42, ge=0, le=MAX_SEED)
    max_rounds: int = Field(default=MAX_ROUNDS, ge=1)
    max_reasks: int = Field(default=2, ge=0, le=10)
    limits: StageLimits = Field(default_factory=StageLimits)
    model_limits: dict[str, StageLimits] = Field(default_factory=dict)
    schema_limits: bool = True
    max_field_chars: int | None = Field(default=None, ge=20, le=1_000_000)
    max_text_chars: int | None = Field(default=None, ge=50, le=1_000_000)

    def limit(self, model: str, stage: Stage) -> int:
        """Output limit of one call, tokens: the model's own limits, else the run's."""
        return self.model_limits.get(model, self.limits).for_stage(stage)


def _bound_strings(schema: Any, limit: int, wide: dict[str, int]) -> Any:
    """Cap the ``maxLength`` of every string property (``wide`` names properties with their own cap)."""
    if isinstance(schema, list):
        return [_bound_strings(v, limit, wide) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _bound_strings(v, limit, wide) for k, v in schema.items()}
    for name, prop in (out.get("properties") or {}).items():
        if isinstance(prop, dict) and prop.get("type") == "string" and "enum" not in prop:
            cap = wide.get(name, limit)
            prop["maxLength"] = min(prop.get("maxLength", cap), cap)
    return out


def _text_format(max_chars: int) -> dict:
    schema = {"type": "object", "properties": {"text": {"type": "string", "maxLength": max_chars}},
              "required": ["text"], "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "free_text", "schema": schema, "strict": True}}


# -- structured outputs -------------------------------------------------------------------------


def reply_format(model: type[BaseModel], name: str, *, schema_limits: bool = True) -> dict:
    """The ``response_format`` of a structured stage (strict JSON schema of ``model``).

    :func:`evolve.llm.response_format` (strict-mode safe); without ``schema_limits`` the
    length limits are stripped (:func:`evolve.llm.strip_length_limits`).
    """
    fmt = response_format(model, name)
    return fmt if schema_limits else strip_length_limits(fmt)


_OPINION_HEADINGS = (
    ("subjective_objective", "Subjective and objective information"),
    ("syndromes_mechanisms", "Clinical syndromes and mechanisms"),
    ("differential_diagnosis", "Differential diagnosis"),
    ("tactics", "Diagnostic and treatment tactics"),
    ("final_opinion", "Final clinical opinion"),
)
_FINAL_HEADINGS = (
    ("summary", "Summary"),
    ("resolved_disagreements", "Resolved disagreements"),
    ("unresolved_disagreements", "Unresolved disagreements"),
    ("final_differential", "Final differential diagnosis"),
    ("diagnostic_plan", "Diagnostic plan"),
    ("management_plan", "Management plan"),
    ("safety_warnings", "Safety warnings"),
    ("final_second_opinion", "Final second opinion"),
    ("confidence", "Confidence"),
)
_NOT_STATED = "(not stated)"


def _sections(reply: BaseModel, headings: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join(
        f"## {title}\n\n{(getattr(reply, key) or '').strip() or _NOT_STATED}" for key, title in headings
    )


def render_structured_opinion(reply: StructuredOpinionReply) -> tuple[str, str, str]:
    """A structured opinion as ``(text, reasoning, opinion)`` (consilium paper, pre-consilium opinions).

    ``text`` = all five fields under Markdown headings in schema order; ``reasoning`` = the
    first four the same way; ``opinion`` = ``final_opinion``. An empty field shows as
    "(not stated)".
    """
    text = _sections(reply, _OPINION_HEADINGS)
    reasoning = _sections(reply, _OPINION_HEADINGS[:4])
    return text, reasoning, reply.final_opinion.strip()


def render_structured_final(reply: StructuredFinalReply) -> str:
    """The finalizer's structured answer as text: the nine fields of
    :class:`~evolve.consilium.StructuredFinalReply` under Markdown headings, in schema order
    (summary first, confidence last; consilium paper, finalizer). An empty field shows as "(not stated)"."""
    return _sections(reply, _FINAL_HEADINGS)


# -- calls and re-asks -------------------------------------------------------------------------


class _Invalid(Exception):
    """An answer that breaks the format or a rule; the message is sent back on a re-ask."""


@dataclass(frozen=True)
class _Parsed(Generic[T]):
    value: T
    note: str = ""


@dataclass(frozen=True)
class _Ask(Generic[T]):
    """One logical call: its first messages and how to read the answer."""

    stage: Stage
    model: str
    messages: tuple[Message, ...]
    parse: Callable[[str], _Parsed[T]]
    role: str = ""
    round: int | None = None
    fmt: dict | None = None


@dataclass(frozen=True)
class _Failed:
    error: str


@dataclass
class _Trace:
    """The calls of one case, in order (local to one ``run_case``/``assign_roles`` call), and the
    case whose identifiers come out of any model text sent back (a re-ask quotes the answer)."""

    case: Case
    calls: list[CallRecord] = field(default_factory=list)


def _validation_message(exc: ValidationError) -> str:
    """The re-ask's problem: each field and its rule, never the value (a re-ask must not quote
    the answer's identifiers back; :func:`~evolve.llm.validation_problem`)."""
    return f"the answer does not match the required JSON fields ({validation_problem(exc, values=False)})"


def _json_reply(model: type[BaseModel], text: str, *, limits: bool = True) -> BaseModel:
    try:
        data = parse_json_object(text)
    except ValueError as exc:
        raise _Invalid(f"the answer is not a single valid JSON object ({str(exc)[:120]})") from exc
    try:
        return validate_reply(data, model, schema_limits=limits)
    except ValidationError as exc:
        raise _Invalid(_validation_message(exc)) from exc


def _norm(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class _OpinionValue:
    text: str
    reasoning: str
    opinion: str
    structured: StructuredOpinionReply | None = None


# -- the pipeline ------------------------------------------------------------------------------


class ConsiliumPipeline:
    """Generates one case's consilium: panel, role opinions, review rounds, final opinion (consilium paper, benchmark runner).

    Args:
        client: Where every call goes (its cache makes a repeated or resumed run free).
        settings: Decoding, round limit, re-asks and output limits; defaults to consilium paper, generation defaults.

    Example:
        >>> pipe = ConsiliumPipeline(client)                               # doctest: +SKIP
        >>> roles = pipe.assign_roles(case, model="m")                     # doctest: +SKIP
        >>> run = pipe.run_case(case, model="m", condition="structured", roles=roles)  # doctest: +SKIP
        >>> run.stop_reason, run.rounds_completed, run.tokens              # doctest: +SKIP
    """

    def __init__(self, client: Client, settings: PipelineSettings | None = None) -> None:
        self.client = client
        self.settings = settings or PipelineSettings()
        s = self.settings
        limits = s.schema_limits
        self._formats = {
            "role_assignment": reply_format(RoleAssignmentReply, "role_assignment", schema_limits=limits),
            "structured_opinion": reply_format(StructuredOpinionReply, "structured_opinion", schema_limits=limits),
            "vote": reply_format(VoteReply, "vote", schema_limits=limits),
            "moderator": reply_format(ModeratorReply, "moderator_decision", schema_limits=limits),
            "structured_final": reply_format(StructuredFinalReply, "structured_final", schema_limits=limits),
        }
        # A "no" vote needs a critique and a revision and a "revise" decision a report, but a
        # "yes" vote and "no_substantive_change" leave them empty, as the prompts say: a schema
        # cannot tie one field to another's value in the subset constrained decoders accept, so
        # the readers (_parse_vote, _parse_moderator) hold that rule and re-ask, and the schemas
        # sent accept every reply the readers accept - else an accepted reply would fail the
        # response cache's schema check and be paid for again on resume.
        if s.max_field_chars is not None and limits:
            wide = {"revised_report": s.max_text_chars} if s.max_text_chars else {}
            for fmt in self._formats.values():
                schema = fmt["json_schema"]["schema"]
                fmt["json_schema"]["schema"] = _bound_strings(schema, s.max_field_chars, wide)
        self._text_format = _text_format(s.max_text_chars) if s.max_text_chars is not None and limits else None
        if self._text_format is not None:
            self._formats["free_text"] = self._text_format

    # -- manifest ------------------------------------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        """What the run manifest should hold about the pipeline (consilium paper, generation defaults).

        Returns:
            ``{"pipeline_version", "settings", "prompts": {name: template}, "response_formats":
            {name: response_format}}`` - JSON-serialisable.
        """
        return {
            "pipeline_version": PIPELINE_VERSION,
            "settings": self.settings.model_dump(mode="json"),
            "prompts": prompt_catalog(),
            "response_formats": json.loads(json.dumps(self._formats)),
        }

    # -- one batch of calls with re-asks ------------------------------------------------------

    def _request(self, ask: _Ask, messages: tuple[Message, ...], case_id: str = "") -> ChatRequest:
        s = self.settings
        return ChatRequest(
            model=ask.model,
            messages=messages,
            temperature=s.temperature,
            top_p=s.top_p,
            seed=s.seed,
            max_tokens=s.limit(ask.model, ask.stage),
            response_format=ask.fmt if ask.fmt is not None else self._text_format,
            tag=ask.stage,
            affinity=case_id,  # a case's calls share its text: one replica (several endpoints)
        )

    def _where(self, ask: _Ask) -> str:
        parts: list[str] = [ask.stage]
        if ask.role:
            parts.append(f"role {ask.role!r}")
        if ask.round is not None:
            parts.append(f"round {ask.round}")
        return ", ".join(parts)

    def _ask_all(self, asks: Sequence[_Ask], trace: _Trace) -> list[_Parsed | _Failed]:
        """Send ``asks`` together (``client.map``), re-asking invalid answers; record every call.

        Calls are recorded batch by batch, each batch in the order of ``asks``, so the record
        does not depend on which concurrent call finished first.
        """
        results: list[_Parsed | _Failed | None] = [None] * len(asks)
        pending = {i: (a.messages, 1) for i, a in enumerate(asks)}
        while pending:
            order = sorted(pending)
            requests = [self._request(asks[i], pending[i][0], trace.case.case_id) for i in order]
            answers = self.client.map(requests)
            retry: dict[int, tuple[tuple[Message, ...], int]] = {}
            for i, request, answer in zip(order, requests, answers):
                ask, (messages, attempt) = asks[i], pending[i]
                record: dict[str, Any] = dict(
                    stage=ask.stage, role=ask.role, round=ask.round, model=ask.model,
                    prompt_hash=prompt_hash(request), attempt=attempt,
                )
                if isinstance(answer, CallFailure):
                    error = f"endpoint failure ({answer.kind}, {answer.attempts} attempt(s)): {answer.error}"
                    trace.calls.append(CallRecord(**record, error=error))
                    fix = ("The endpoint failed on every retry; check that it is up, then resume the run."
                           if answer.kind == "transient" else
                           "The endpoint refused the request (not retried); fix what it names before resuming - a "
                           "resumed run would send the same request.")
                    results[i] = _Failed(f"{self._where(ask)}: {error}. {fix}")
                    continue
                record.update(
                    prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
                    cached=answer.cached, cached_prompt_tokens=answer.cached_prompt_tokens, finish_reason=answer.finish_reason,
                )
                problem, parsed = self._read(ask, request, answer)
                if parsed is not None:
                    trace.calls.append(CallRecord(**record, error=parsed.note))
                    results[i] = parsed
                    continue
                trace.calls.append(CallRecord(**record, error=problem))
                if attempt <= self.settings.max_reasks:
                    follow_up = (  # the answer quoted back is stripped like any model text shown to a model
                        Message(role="assistant", content=_scrubbed_answer(answer.text, trace.case)),
                        Message(role="user", content=render("reask.user", problem=problem)),
                    )
                    retry[i] = (messages + follow_up, attempt + 1)
                else:
                    limit = _LIMIT_OF_STAGE.get(ask.stage, ask.stage)
                    hint = (
                        f"raise the output limit in a --config file: {{\"generation\": {{\"limits\": "
                        f"{{\"{limit}\": N}}}}}}, or for this model only: {{\"generation\": {{\"model_limits\": "
                        f"{{\"{ask.model}\": {{\"{limit}\": N}}}}}}}}"
                        if answer.finish_reason != "stop"
                        else "try another --model, or allow more re-asks in a --config file: "
                             "{\"generation\": {\"max_reasks\": N}}"
                    )
                    results[i] = _Failed(f"{self._where(ask)}: {problem} (after {attempt} attempt(s)); {hint}")
            pending = retry
        return results  # type: ignore[return-value]

    def _read(self, ask: _Ask, request: ChatRequest, answer: ChatResponse) -> tuple[str, _Parsed | None]:
        if answer.finish_reason != "stop":
            return (
                f"the answer was cut off (finish_reason={answer.finish_reason}) at the limit of "
                f"{request.max_tokens} output tokens; give a shorter answer that is complete",
                None,
            )
        text = answer.text
        if ask.fmt is None and self._text_format is not None:  # free text inside {"text": ...}
            try:
                text = str(parse_json_object(text)["text"])
            except (ValueError, KeyError):
                return 'the answer is not the JSON object {"text": "..."} that was asked for; answer again', None
        try:
            return "", ask.parse(text)
        except _Invalid as exc:
            return str(exc), None

    # -- consilium paper, role assignment role assignment ------------------------------------------------------------

    def assign_roles(
        self, case: Case, *, model: str, workers: Sequence[str] = (), consolidator: str | None = None
    ) -> RoleAssignment:
        """Ask for the case's panel: 1-5 roles, one primary, a rationale each (consilium paper, role assignment).

        Without ``workers``: one structured call to ``model``
        (:class:`~evolve.consilium.RoleAssignmentReply`) on the identifier-stripped case text
        (:func:`~evolve.consilium.strip_identifiers`; no id, no title, never the reference
        answer), as every stage sees it. With ``workers`` (the ``n+1``
        topology, the paper's 3+1): every worker proposes a panel (stage ``role_worker``), then
        ``consolidator`` (default ``model``) merges the proposals into the panel
        (``role_consolidation``); a worker that fails fails the assignment. A panel that breaks
        :func:`~evolve.consilium.panel_problem` (duplicate names ignoring case, not exactly one
        primary ...), invalid JSON or a cut answer is re-asked up to ``max_reasks`` times.
        Rationales longer than the schema allows are clipped.

        Args:
            case: The case.
            model: The pipeline's model (recorded as the assignment's model).
            workers: Worker models of ``n+1``; empty for a single-model assignment.
            consolidator: The model merging the workers' panels (default ``model``).

        Returns:
            The assignment with every call; ``error`` is set (and ``roles`` empty) when no
            valid panel came back.
        """
        trace = _Trace(case)
        if workers:
            proposals = self._ask_all([self._role_ask(case, w, stage="role_worker") for w in workers], trace)
            failed = [o.error for o in proposals if isinstance(o, _Failed)]
            if failed:
                return RoleAssignment(case_id=case.case_id, model=model, calls=tuple(trace.calls), error="; ".join(failed))
            texts = [_panel_text(o.value) for o in proposals if isinstance(o, _Parsed)]
            outcome = self._ask_all([self._role_consolidation_ask(case, consolidator or model, texts)], trace)[0]
        else:
            outcome = self._ask_all([self._role_ask(case, model)], trace)[0]
        if isinstance(outcome, _Failed):
            return RoleAssignment(case_id=case.case_id, model=model, calls=tuple(trace.calls), error=outcome.error)
        reply: RoleAssignmentReply = outcome.value
        roles = tuple(
            PanelRole(name=" ".join(r.name.split()), primary=r.primary, rationale=r.rationale.strip())
            for r in reply.roles
        )
        return RoleAssignment(
            case_id=case.case_id, model=model, roles=roles,
            panel_rationale=reply.panel_rationale.strip(), calls=tuple(trace.calls),
        )

    def _role_ask(self, case: Case, model: str, stage: Stage = "role_assignment") -> _Ask[RoleAssignmentReply]:
        return _Ask(
            stage=stage, model=model, fmt=self._formats["role_assignment"],
            messages=(
                Message(role="system", content=render("role_assignment.system")),
                Message(role="user", content=render("role_assignment.user", case=case_block(case))),
            ),
            parse=functools.partial(_parse_roles, case=case, limits=self.settings.schema_limits),
        )

    def _role_consolidation_ask(self, case: Case, model: str, proposals: Sequence[str]) -> _Ask[RoleAssignmentReply]:
        return _Ask(
            stage="role_consolidation", model=model, fmt=self._formats["role_assignment"],
            messages=(
                Message(role="system", content=render("role_consolidation.system")),
                Message(role="user", content=render(
                    "role_consolidation.user", case=case_block(case), count=len(proposals),
                    proposals=numbered_blocks("PANEL PROPOSAL", [strip_identifiers(p, case) for p in proposals]),
                )),
            ),
            parse=functools.partial(_parse_roles, case=case, limits=self.settings.schema_limits),
        )

    # -- the whole case ------------------------------------------------------------------------

    def run_case(
        self,
        case: Case,
        *,
        model: str,
        condition: Condition,
        topology: Topology = "single",
        workers: Sequence[str] = (),
        consolidator: str | None = None,
        roles: RoleAssignment | None = None,
    ) -> CaseRun:
        """Generate the consilium of one case under one condition and topology (consilium paper, role assignment-5.5).

        Stages: role assignment (skipped when ``roles`` is given; in ``n+1`` every worker
        proposes a panel and the consolidator merges them); pre-consilium opinions, one
        request per role sent together, each seeing the case input and its role name only
        (free-form: split at the final-opinion marker, see
        :func:`~evolve.consilium.split_free_form`; structured: the five fields rendered by
        :func:`render_structured_opinion`); in ``n+1`` every worker answers for every role,
        then the consolidator merges each role's worker opinions, and a failed worker fails the
        run; then, on the identifier-stripped case, synthesis, review rounds (stop on
        consensus, no substantive change, a repeated report state or after ``max_rounds``,
        keeping the last revision unvoted) and the finalizer. Any stage that fails ends the run
        with ``stop_reason="failure"`` and ``error`` naming the stage, role and round; what was
        produced before is kept (a round whose votes came back but whose moderator call failed
        is recorded with ``decision`` None).

        The role-assignment calls are part of ``calls`` of every run built on that
        assignment, also when it is passed in (so one run's tokens are the whole cost of its
        output; summing runs of several conditions counts a shared assignment once per
        condition - filter the ``role_*`` stages to count it once).

        In ``n+1`` (the paper's 3+1) the workers propose panels and write the opinions, and the
        consolidator merges both and runs the consilium and the finalizer; ``model`` only names
        the pipeline (and is the default consolidator).

        Args:
            case: The case.
            model: In ``single``, the model of every stage; in ``n+1``, the pipeline's name and
                the default consolidator.
            condition: ``free-form`` or ``structured`` (consilium paper, pre-consilium opinions).
            topology: ``single`` or ``n+1``.
            workers: Worker models of ``n+1`` (at least one); must be empty for ``single``.
            consolidator: Model merging the workers' panels and opinions and running the
                consilium in ``n+1``; default ``model``.
            roles: A panel from :meth:`assign_roles` for this case, reused without a call.

        Returns:
            The :class:`~evolve.consilium.CaseRun`.

        Raises:
            ConfigError: Unknown condition or topology, workers missing for ``n+1`` or given
                for ``single``, a consolidator without ``n+1``, or ``roles`` of another case.
        """
        workers = tuple(workers)
        if condition not in ("free-form", "structured"):
            raise ConfigError(f"unknown condition {condition!r}; use 'free-form' or 'structured'.")
        if topology not in ("single", "n+1"):
            raise ConfigError(f"unknown topology {topology!r}; use 'single' or 'n+1'.")
        if topology == "n+1" and not workers:
            raise ConfigError("topology 'n+1' needs worker models; pass workers=[...] (the paper used 3).")
        if topology == "single" and (workers or consolidator):
            raise ConfigError("workers and consolidator are only used by topology 'n+1'; drop them or pass topology='n+1'.")
        if roles is not None and roles.case_id != case.case_id:
            raise ConfigError(
                f"the role assignment passed is for case {roles.case_id!r}, not {case.case_id!r}; "
                "pass the assignment of this case."
            )
        consolidator = (consolidator or model) if topology == "n+1" else ""
        if roles is None:
            roles = self.assign_roles(case, model=model, workers=workers, consolidator=consolidator or None)
        trace = _Trace(case, calls=list(roles.calls))
        base: dict[str, Any] = dict(
            case_id=case.case_id, model=model, condition=condition, topology=topology,
            workers=workers, consolidator=consolidator, roles=roles.roles, panel_rationale=roles.panel_rationale,
        )

        def done(stop: StopReason, error: str = "", **fields: Any) -> CaseRun:
            return CaseRun(**base, **fields, stop_reason=stop, error=error, calls=tuple(trace.calls))

        if roles.error:
            return done("failure", roles.error)  # it names the stage already

        if topology == "single":
            opinions, error = self._single_opinions(case, roles.roles, model, condition, trace)
        else:
            opinions, error = self._n_plus_one_opinions(case, roles.roles, workers, consolidator, condition, trace)
        if error:
            return done("failure", error, opinions=opinions)

        # in n+1 the consolidating model runs the consilium and the finalizer (the paper's 3+1)
        return self._consilium(case, consolidator or model, condition, opinions, trace, done)

    # -- pre-consilium (consilium paper) ---------------------------------------------------------------

    def _opinion_ask(
        self, case: Case, role: str, model: str, condition: Condition, stage: Stage
    ) -> _Ask[_OpinionValue]:
        structured = condition == "structured"
        return _Ask(
            stage=stage, model=model, role=role,
            fmt=self._formats["structured_opinion"] if structured else None,
            messages=(
                Message(role="system", content=render("opinion.system", role=fence(role))),
                Message(role="user", content=render(f"opinion.{condition}.user", case=case_block(case), role=fence(role))),
            ),
            parse=_parse_structured_opinion if structured else _parse_free_form_opinion,
        )

    def _single_opinions(
        self, case: Case, panel: Sequence[PanelRole], model: str, condition: Condition, trace: _Trace
    ) -> tuple[tuple[RoleOpinion, ...], str]:
        asks = [self._opinion_ask(case, r.name, model, condition, "opinion") for r in panel]
        outcomes = self._ask_all(asks, trace)
        opinions = tuple(_role_opinion(r.name, o.value) for r, o in zip(panel, outcomes) if isinstance(o, _Parsed))
        errors = [o.error for o in outcomes if isinstance(o, _Failed)]
        return opinions, "; ".join(errors)

    def _n_plus_one_opinions(
        self,
        case: Case,
        panel: Sequence[PanelRole],
        workers: Sequence[str],
        consolidator: str,
        condition: Condition,
        trace: _Trace,
    ) -> tuple[tuple[RoleOpinion, ...], str]:
        asks = [self._opinion_ask(case, r.name, w, condition, "opinion_worker") for r in panel for w in workers]
        outcomes = self._ask_all(asks, trace)
        errors = [o.error for o in outcomes if isinstance(o, _Failed)]
        if errors:
            return (), "; ".join(errors)
        n = len(workers)
        worker_texts = {
            r.name: tuple(o.value.text for o in outcomes[k * n:(k + 1) * n])  # type: ignore[union-attr]
            for k, r in enumerate(panel)
        }
        merge_asks = [self._consolidation_ask(case, r.name, consolidator, condition, worker_texts[r.name]) for r in panel]
        merged = self._ask_all(merge_asks, trace)
        opinions = tuple(
            _role_opinion(r.name, o.value, worker_texts[r.name])
            for r, o in zip(panel, merged) if isinstance(o, _Parsed)
        )
        return opinions, "; ".join(o.error for o in merged if isinstance(o, _Failed))

    def _consolidation_ask(
        self, case: Case, role: str, consolidator: str, condition: Condition, texts: Sequence[str]
    ) -> _Ask[_OpinionValue]:
        structured = condition == "structured"
        return _Ask(
            stage="opinion_consolidation", model=consolidator, role=role,
            fmt=self._formats["structured_opinion"] if structured else None,
            messages=(
                Message(role="system", content=render("consolidation.system", role=fence(role))),
                Message(role="user", content=render(
                    f"consolidation.{condition}.user", case=case_block(case), role=fence(role), count=len(texts),
                    opinions=numbered_blocks("WORKER OPINION", [strip_identifiers(t, case) for t in texts]),
                )),
            ),
            parse=_parse_structured_opinion if structured else _parse_free_form_opinion,
        )

    # -- consilium paper, interactive consilium interactive consilium and §5.4 finalizer -------------------------------------

    def _consilium(
        self,
        case: Case,
        model: str,
        condition: Condition,
        opinions: tuple[RoleOpinion, ...],
        trace: _Trace,
        done: Callable[..., CaseRun],
    ) -> CaseRun:
        """Synthesis, review rounds and finalizer on the identifier-stripped case."""
        seen = _ConsiliumMaterial(case, opinions)
        synthesis = self._ask_all([self._synthesis_ask(seen, model)], trace)[0]
        if isinstance(synthesis, _Failed):
            return done("failure", synthesis.error, opinions=opinions)

        rounds, report, stop, error = self._review(seen, model, synthesis.value, trace)
        outcome = dict(
            opinions=opinions, rounds=tuple(rounds), final_report=report,
            rounds_completed=len(rounds), consensus=stop == "consensus",
            first_round_consensus=bool(rounds) and rounds[0].consensus,
        )
        if stop == "failure":
            return done("failure", error, **outcome)

        final = self._ask_all([self._finalizer_ask(seen, model, condition, report, rounds)], trace)[0]
        if isinstance(final, _Failed):
            return done("failure", final.error, **outcome)
        if condition == "structured":
            return done(stop, final=render_structured_final(final.value), final_structured=final.value, **outcome)
        return done(stop, final=final.value, **outcome)

    def _synthesis_ask(self, seen: _ConsiliumMaterial, model: str) -> _Ask[str]:
        return _Ask(
            stage="synthesis", model=model,
            messages=(
                Message(role="system", content=render("synthesis.system")),
                Message(role="user", content=render("synthesis.user", case=seen.case, opinions=seen.opinions)),
            ),
            parse=_parse_text,
        )

    def _review(
        self, seen: _ConsiliumMaterial, model: str, report: str, trace: _Trace
    ) -> tuple[list[RoundRecord], str, StopReason, str]:
        """The review rounds (consilium paper, interactive consilium), starting from the synthesised ``report``.

        Returns:
            ``(rounds, last report, stop reason, error)``. A round whose votes came back is
            recorded even when its moderator call then failed (``decision`` None, not
            consensus); a round whose votes failed is not recorded.
        """
        states = [_norm(report)]
        rounds: list[RoundRecord] = []
        for number in range(1, self.settings.max_rounds + 1):
            outcomes = self._ask_all(self._vote_asks(seen, model, number, report, rounds[-1] if rounds else None), trace)
            failed = [o.error for o in outcomes if isinstance(o, _Failed)]
            if failed:
                return rounds, report, "failure", "; ".join(failed)
            votes = tuple(
                Vote(role=o.role, round=number, vote=v.value.vote, critique=v.value.critique.strip(),
                     proposed_revision=v.value.proposed_revision.strip())
                for o, v in zip(seen.roles, outcomes) if isinstance(v, _Parsed)  # none failed (checked above)
            )
            if all(v.vote == "yes" for v in votes):
                rounds.append(RoundRecord(number=number, report=report, votes=votes, consensus=True, revised_report=report))
                return rounds, report, "consensus", ""
            moderator = self._ask_all([self._moderator_ask(seen, model, number, report, votes)], trace)[0]
            if isinstance(moderator, _Failed):
                rounds.append(RoundRecord(number=number, report=report, votes=votes, consensus=False))
                return rounds, report, "failure", moderator.error
            decision: ModeratorReply = moderator.value
            summary = decision.summary.strip()
            if decision.decision == "no_substantive_change":
                rounds.append(RoundRecord(
                    number=number, report=report, votes=votes, consensus=False, decision="no_substantive_change",
                    moderator_summary=summary, revised_report=report,
                ))
                return rounds, report, "no_substantive_change", ""
            revised = decision.revised_report.strip()
            rounds.append(RoundRecord(
                number=number, report=report, votes=votes, consensus=False, decision="revise",
                moderator_summary=summary, revised_report=revised,
            ))
            report = revised
            if _norm(revised) in states:
                return rounds, report, "repeated_report", ""
            states.append(_norm(revised))
        # dissent in the last round: the moderator's revision is kept without another vote
        return rounds, report, "max_rounds", ""

    def _vote_asks(
        self, seen: _ConsiliumMaterial, model: str, number: int, report: str, last: RoundRecord | None
    ) -> list[_Ask[VoteReply]]:
        """One vote request per role; from round 2 with the previous round's reviews and decision."""
        previous = ""
        if last is not None:
            previous = "\n" + render(
                "vote.previous_round", previous=last.number,
                reviews=block(f"REVIEWS OF ROUND {last.number}", seen.scrub(_reviews_text(last.votes))),
                decision=block(f"MODERATOR DECISION AFTER ROUND {last.number}", seen.scrub(_decision_text(last))),
            ) + "\n"
        return [
            _Ask(
                stage="vote", model=model, role=o.role, round=number, fmt=self._formats["vote"],
                messages=(
                    Message(role="system", content=render("vote.system", role=fence(o.role))),
                    Message(role="user", content=render(
                        "vote.user", case=seen.case, round=number, previous=previous,
                        own_opinion=block("YOUR EARLIER OPINION", seen.scrub(o.text)),
                        report=block("SHARED REPORT", seen.scrub(report)),
                    )),
                ),
                parse=_parse_vote,
            )
            for o in seen.roles
        ]

    def _moderator_ask(
        self, seen: _ConsiliumMaterial, model: str, number: int, report: str, votes: Sequence[Vote]
    ) -> _Ask[ModeratorReply]:
        return _Ask(
            stage="moderator", model=model, round=number, fmt=self._formats["moderator"],
            messages=(
                Message(role="system", content=render("moderator.system")),
                Message(role="user", content=render(
                    "moderator.user", case=seen.case, round=number,
                    report=block("SHARED REPORT", seen.scrub(report)),
                    reviews=block(f"REVIEWS OF ROUND {number}", seen.scrub(_reviews_text(votes))),
                )),
            ),
            parse=_parse_moderator,
        )

    def _finalizer_ask(
        self, seen: _ConsiliumMaterial, model: str, condition: Condition, report: str, rounds: Sequence[RoundRecord]
    ) -> _Ask:
        structured = condition == "structured"
        reviews = "\n\n".join(f"Round {r.number}:\n{_reviews_text(r.votes)}" for r in rounds)
        summaries = "\n\n".join(
            f"After round {r.number} ({r.decision}): {r.moderator_summary}" for r in rounds if r.decision
        ) or "No moderator decision: the panel accepted the first report."
        return _Ask(
            stage="finalizer", model=model, fmt=self._formats["structured_final"] if structured else None,
            messages=(
                Message(role="system", content=render("finalizer.system")),
                Message(role="user", content=render(
                    f"finalizer.{condition}.user", case=seen.case, opinions=seen.opinions,
                    report=block("LAST SHARED REPORT", seen.scrub(report)),
                    reviews=block("ALL REVIEWS", seen.scrub(reviews)),
                    summaries=block("MODERATOR DECISIONS", seen.scrub(summaries)),
                )),
            ),
            parse=_parse_structured_final if structured else _parse_text,
        )


class _ConsiliumMaterial:
    """What every consilium stage may see: the identifier-stripped case and role opinions.

    Every text shown to the consilium (opinions, reports, reviews, summaries) goes through
    :meth:`scrub`, so a DOI, date or name quoted by a pre-consilium opinion does not reach it.
    """

    def __init__(self, case: Case, opinions: Sequence[RoleOpinion]) -> None:
        self._case = case
        self.roles = tuple(opinions)
        self.case = consilium_case_block(case)
        self.opinions = named_blocks("OPINION", {o.role: self.scrub(o.text) for o in opinions})

    def scrub(self, text: str) -> str:
        return strip_identifiers(text, self._case)


def _scrubbed_answer(text: str, case: Case) -> str:
    """A model's answer as a re-ask quotes it back: without ``case``'s identifiers. A JSON answer
    is stripped string by string (its escapes read first: ``"Ib\\u00e1\\u00f1ez"`` is a name), then
    written again (quoted as sent when nothing was found); any other answer as text."""
    try:
        value = json.loads(text)
    except ValueError:
        return strip_identifiers(text, case)

    def scrub(v: Any) -> Any:
        if isinstance(v, str):
            stripped = strip_identifiers(v, case)
            return v if stripped == v.strip() else stripped
        if isinstance(v, list):
            return [scrub(x) for x in v]
        if isinstance(v, dict):
            return {k: scrub(x) for k, x in v.items()}
        return v

    scrubbed = scrub(value)
    return text if scrubbed == value else json.dumps(scrubbed, ensure_ascii=False)


# -- answer readers (raise _Invalid with the rule to send back) --------------------------------


def _parse_text(text: str) -> _Parsed[str]:
    text = text.strip()
    if not text:
        raise _Invalid("the answer is empty; write the requested text")
    return _Parsed(text)


def _panel_text(reply: RoleAssignmentReply) -> str:
    """A proposed panel as plain text for the consolidator."""
    lines = [f"- {r.name}{' (primary)' if r.primary else ''}: {r.rationale}" for r in reply.roles]
    return "\n".join([*lines, f"Why this panel: {reply.panel_rationale}"])


def _parse_roles(text: str, case: Case, *, limits: bool = True) -> _Parsed[RoleAssignmentReply]:
    """The panel, its names and rationales stripped of ``case``'s identifiers (a model may name a
    role after a physician or hospital of the case record, and role names reach every later
    prompt), then checked: a name left empty or duplicated by stripping is re-asked. The length
    limits are read as sent (``limits``: the settings' ``schema_limits``): sent, a rationale
    over its limit is re-asked, never clipped; not sent, it is read whole."""
    reply: RoleAssignmentReply = _json_reply(RoleAssignmentReply, text, limits=limits)  # type: ignore[assignment]
    roles = [
        r.model_copy(update={"name": strip_identifiers(r.name, case), "rationale": strip_identifiers(r.rationale, case)})
        for r in reply.roles
    ]
    if any(not r.name for r in roles):
        raise _Invalid("a role name is empty once identifiers are removed; name each role by its specialty")
    reply = reply.model_copy(update={"roles": roles, "panel_rationale": strip_identifiers(reply.panel_rationale, case)})
    problem = panel_problem(reply.roles)
    if problem:
        raise _Invalid(problem)
    return _Parsed(reply)


_LIMIT_OF_STAGE = {  # stage -> its output limit in the configuration (generation.limits)
    "role_assignment": "role_assignment", "role_worker": "role_assignment", "role_consolidation": "role_assignment",
    "opinion": "opinion", "opinion_worker": "opinion",
    "opinion_consolidation": "opinion", "synthesis": "consilium", "vote": "consilium", "moderator": "consilium",
    "finalizer": "finalizer",
}


def _parse_free_form_opinion(text: str) -> _Parsed[_OpinionValue]:
    text = text.strip()
    if not text:
        raise _Invalid("the answer is empty; write the opinion")
    reasoning, opinion, note = split_free_form(text)
    return _Parsed(_OpinionValue(text=text, reasoning=reasoning, opinion=opinion), note)


def _parse_structured_opinion(text: str) -> _Parsed[_OpinionValue]:
    reply: StructuredOpinionReply = _json_reply(StructuredOpinionReply, text)  # type: ignore[assignment]
    if not reply.final_opinion.strip():
        raise _Invalid('"final_opinion" is empty; state the final clinical opinion')
    if not any(getattr(reply, k).strip() for k, _ in _OPINION_HEADINGS[:4]):
        raise _Invalid("all four reasoning fields are empty; fill them in")
    full, reasoning, opinion = render_structured_opinion(reply)
    return _Parsed(_OpinionValue(text=full, reasoning=reasoning, opinion=opinion, structured=reply))


def _parse_vote(text: str) -> _Parsed[VoteReply]:
    reply: VoteReply = _json_reply(VoteReply, text)  # type: ignore[assignment]
    if reply.vote == "no" and not (reply.critique.strip() and reply.proposed_revision.strip()):
        raise _Invalid('a "no" vote needs both a "critique" and a "proposed_revision"; fill in both or vote "yes"')
    return _Parsed(reply)


def _parse_moderator(text: str) -> _Parsed[ModeratorReply]:
    reply: ModeratorReply = _json_reply(ModeratorReply, text)  # type: ignore[assignment]
    if not reply.summary.strip():
        raise _Invalid('"summary" is empty; say which objections you accepted or rejected')
    if reply.decision == "revise" and not reply.revised_report.strip():
        raise _Invalid('"decision" is "revise" but "revised_report" is empty; give the whole revised report')
    return _Parsed(reply)


def _parse_structured_final(text: str) -> _Parsed[StructuredFinalReply]:
    reply: StructuredFinalReply = _json_reply(StructuredFinalReply, text)  # type: ignore[assignment]
    missing = [k for k in ("summary", "final_second_opinion") if not getattr(reply, k).strip()]
    if missing:
        raise _Invalid(f"{', '.join(repr(m) for m in missing)} is empty; fill it in")
    return _Parsed(reply)


def _role_opinion(role: str, value: _OpinionValue, worker_texts: tuple[str, ...] = ()) -> RoleOpinion:
    return RoleOpinion(
        role=role, text=value.text, reasoning=value.reasoning, opinion=value.opinion,
        structured=value.structured, worker_texts=worker_texts,
    )


def _reviews_text(votes: Sequence[Vote]) -> str:
    parts = []
    for v in votes:
        lines = [f"{v.role}: {v.vote}"]
        if v.critique:
            lines.append(f"Critique: {v.critique}")
        if v.proposed_revision:
            lines.append(f"Proposed revision: {v.proposed_revision}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _decision_text(r: RoundRecord) -> str:
    if r.decision == "revise":
        return f"The moderator revised the report. {r.moderator_summary}"
    return f"The moderator made no substantive change. {r.moderator_summary}"
