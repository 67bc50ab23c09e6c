"""Records of a consilium run: what each stage produced, every vote, every call (consilium paper, benchmark runner).

Every record crossing a boundary (LLM structured outputs, per-case artifacts, the run
manifest) is a frozen pydantic model; the JSON schemas of the ``*Reply`` models drive the
structured outputs of the generating model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from pydantic import Field, model_validator

from evolve.data import (
    MAX_PANEL_ROLES,
    ConsiliumRecord,
    PanelRole,
    RoleOutput,
    role_slug,
)
from evolve.records import Record

ARTIFACT_VERSION: Final = 1
"""Version of ``cases/<case>.<condition>.json`` artifacts and of ``manifest.json``."""

MAX_ROUNDS = 5
"""consilium paper, interactive consilium: at most five review rounds; a revision after final-round dissent is kept unvoted."""

Condition = Literal["free-form", "structured"]
Topology = Literal["single", "n+1"]
StopReason = Literal["consensus", "no_substantive_change", "repeated_report", "max_rounds", "failure"]
Stage = Literal[
    "role_assignment", "role_worker", "role_consolidation", "opinion", "opinion_worker", "opinion_consolidation",
    "synthesis", "vote", "moderator", "finalizer", "judge",
]


# -- structured outputs of the generating model ----------------------------------------------


class RoleReply(Record):
    """One role proposed by the role-assignment step."""

    name: str = Field(min_length=1, max_length=80)
    primary: bool
    rationale: str = Field(min_length=1, max_length=600)


class RoleAssignmentReply(Record):
    """The role-assignment step's answer (consilium paper, role assignment): 1-5 roles, exactly one primary."""

    roles: list[RoleReply] = Field(min_length=1, max_length=5)
    panel_rationale: str = Field(min_length=1, max_length=1000)


class StructuredOpinionReply(Record):
    """A role's opinion in the ``structured`` condition (consilium paper, pre-consilium opinions: five fields)."""

    subjective_objective: str = Field(description="Subjective and objective information from the case.")
    syndromes_mechanisms: str = Field(description="Clinical syndromes and their mechanisms.")
    differential_diagnosis: str = Field(description="Differential diagnosis with the reasoning for and against each entry.")
    tactics: str = Field(description="Diagnostic and treatment tactics.")
    final_opinion: str = Field(description="The role's final clinical opinion.")


class VoteReply(Record):
    """A role's review of the shared report in one round (consilium paper, interactive consilium)."""

    vote: Literal["yes", "no"]
    critique: str = ""
    proposed_revision: str = ""


class ModeratorReply(Record):
    """The moderator's decision on the objections of one round (consilium paper, interactive consilium)."""

    decision: Literal["revise", "no_substantive_change"]
    summary: str = Field(min_length=1)
    revised_report: str = ""


class StructuredFinalReply(Record):
    """The finalizer's answer in the ``structured`` condition (consilium paper, finalizer)."""

    summary: str
    resolved_disagreements: str
    unresolved_disagreements: str
    final_differential: str
    diagnostic_plan: str
    management_plan: str
    safety_warnings: str
    final_second_opinion: str
    confidence: Literal["low", "moderate", "high"]


# -- what a run records -------------------------------------------------------------------------


class CallRecord(Record):
    """One model call of the pipeline (tokens of every call are recorded, consilium paper, per-case record).

    Attributes:
        stage: Pipeline stage.
        role: The role speaking, if any.
        round: Review round (1-based), for ``vote`` and ``moderator``.
        model: Model id sent.
        prompt_tokens: Input tokens.
        completion_tokens: Output tokens.
        cached: Answered from the response cache (a resumed run pays nothing for it).
        cached_prompt_tokens: Of ``prompt_tokens``, those the endpoint served from its prefix
            cache (0 where it does not report them, and in runs recorded before this field).
        finish_reason: The endpoint's finish reason (``stop``, ``length`` ...).
        prompt_hash: First 16 hex digits of the SHA-256 of the messages.
        attempt: 1 for the first ask, 2+ for re-asks after an invalid answer.
        error: Why the call failed or its answer was rejected; empty when it succeeded.
    """

    stage: Stage
    role: str = ""
    round: int | None = None
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    cached_prompt_tokens: int = 0
    finish_reason: str = ""
    prompt_hash: str = ""
    attempt: int = 1
    error: str = ""


def panel_problem(roles: Sequence[RoleReply | PanelRole]) -> str:
    """What is wrong with a proposed panel, or ``""`` when it is valid (consilium paper, role assignment).

    Rules: 1-5 roles; names non-empty and unique ignoring case and surrounding/repeated
    whitespace (``Cardiology`` and `` cardiology `` are the same role); no two names that give
    the same target-id segment (:func:`evolve.data.role_slug`, so the run's
    :class:`~evolve.data.ConsiliumRecord` is valid); exactly one primary role.

    Args:
        roles: The roles, in panel order.

    Returns:
        One sentence naming the first violated rule and how to fix it (it is sent back to the
        model when the pipeline re-asks), or ``""``.
    """
    if not 1 <= len(roles) <= MAX_PANEL_ROLES:
        return f"the panel has {len(roles)} roles; propose between 1 and {MAX_PANEL_ROLES} roles"
    seen: dict[str, str] = {}
    slugs: dict[str, str] = {}
    for k, role in enumerate(roles, start=1):
        name = " ".join(role.name.split())
        if not name:
            return f"role {k} has an empty name; name every role by its specialty"
        key = name.casefold()
        if key in seen:
            return (
                f"two roles have the same name when upper and lower case are ignored ({seen[key]!r} and "
                f"{role.name.strip()!r}); give every role a different specialty name"
            )
        seen[key] = role.name.strip()
        slug = role_slug(name, k)
        if slug in slugs:
            return (
                f"the role names {slugs[slug]!r} and {role.name.strip()!r} differ only in punctuation or accents; "
                "give every role a clearly different specialty name"
            )
        slugs[slug] = role.name.strip()
    primaries = [r.name.strip() for r in roles if r.primary]
    if len(primaries) != 1:
        found = f" ({', '.join(primaries)})" if primaries else ""
        return (
            f"exactly one role must have primary set to true, but {len(primaries)} do{found}; "
            "mark only the specialty that leads on the main clinical question as primary"
        )
    return ""


class RoleAssignment(Record):
    """The panel of one case, as the role-assignment step produced it (consilium paper, role assignment).

    Made by :meth:`ConsiliumPipeline.assign_roles`; the runner reuses one assignment for every
    condition of the same case and model (pass it as ``roles=`` to ``run_case``).

    Attributes:
        case_id: The case.
        model: The model that assigned the roles.
        roles: The panel in the model's order (names trimmed); empty when ``error`` is set.
        panel_rationale: Why this panel.
        calls: Every role-assignment call, re-asks included, in order.
        error: Why no valid panel was obtained; ``""`` when the assignment succeeded.

    Raises:
        ValueError: On construction, when ``error`` is empty but ``roles`` break a rule of
            :func:`panel_problem`.
    """

    case_id: str
    model: str = ""
    roles: tuple[PanelRole, ...] = ()
    panel_rationale: str = ""
    calls: tuple[CallRecord, ...] = ()
    error: str = ""

    @model_validator(mode="after")
    def _valid_panel(self) -> RoleAssignment:
        if not self.error:
            problem = panel_problem(self.roles)
            if problem:
                raise ValueError(f"role assignment of {self.case_id!r}: {problem}")
        return self

    @property
    def ok(self) -> bool:
        """A valid panel was obtained."""
        return not self.error


class RoleOpinion(Record):
    """One role's pre-consilium opinion, frozen before the consilium (consilium paper, pre-consilium opinions).

    Attributes:
        role: Role name.
        text: The whole opinion as the role wrote it (free-form narrative, or the structured
            fields rendered as text).
        reasoning: Everything except the closing opinion (component ``reasoning``).
        opinion: The closing opinion (component ``opinion``).
        structured: The five fields, in the structured condition.
        worker_texts: In the N+1 topology, each worker model's opinion before consolidation.
    """

    role: str
    text: str
    reasoning: str
    opinion: str
    structured: StructuredOpinionReply | None = None
    worker_texts: tuple[str, ...] = ()


class Vote(Record):
    """A role's vote in one round."""

    role: str
    round: int = Field(ge=1)
    vote: Literal["yes", "no"]
    critique: str = ""
    proposed_revision: str = ""


class RoundRecord(Record):
    """One review round: the report reviewed, the votes, and the moderator's decision.

    Attributes:
        number: 1-based round.
        report: The shared report the roles reviewed in this round.
        votes: One vote per role, in panel order.
        consensus: Every role voted yes.
        decision: ``revise`` / ``no_substantive_change``; None after consensus.
        moderator_summary: The moderator's account of the objections.
        revised_report: The report after the moderator's revision (equal to ``report`` when
            nothing changed).
    """

    number: int = Field(ge=1)
    report: str
    votes: tuple[Vote, ...]
    consensus: bool
    decision: Literal["revise", "no_substantive_change"] | None = None
    moderator_summary: str = ""
    revised_report: str = ""


class CaseRun(Record):
    """Everything one (case, model, condition, topology) pipeline produced (one artifact file).

    Attributes:
        version: Artifact format version.
        case_id: The case.
        model: The generating model (the worker models too, in ``n+1``).
        condition: ``free-form`` or ``structured``.
        topology: ``single`` or ``n+1``.
        workers: The worker models of ``n+1`` (empty for ``single``).
        consolidator: The model that merged the workers' opinions in ``n+1`` (empty for
            ``single``).
        roles: The panel (reused by every condition of the same case and model).
        panel_rationale: Why this panel.
        opinions: One frozen opinion per role, in panel order.
        rounds: The review rounds, in order.
        final_report: The last shared report state (what the finalizer received).
        final: The final opinion as text (structured fields rendered in a fixed order).
        final_structured: The finalizer's fields, in the structured condition.
        stop_reason: Why the consilium stopped (``failure``: a stage failed; see ``error``).
        rounds_completed: Rounds whose votes were collected.
        consensus: The consilium ended on unanimous yes.
        first_round_consensus: Every role voted yes in round 1.
        calls: Every model call of the pipeline, in order.
        error: The failure, when ``stop_reason == "failure"``.
    """

    version: Literal[1] = ARTIFACT_VERSION
    case_id: str
    model: str
    condition: Condition
    topology: Topology = "single"
    workers: tuple[str, ...] = ()
    consolidator: str = ""
    roles: tuple[PanelRole, ...] = ()
    panel_rationale: str = ""
    opinions: tuple[RoleOpinion, ...] = ()
    rounds: tuple[RoundRecord, ...] = ()
    final_report: str = ""
    final: str = ""
    final_structured: StructuredFinalReply | None = None
    stop_reason: StopReason
    rounds_completed: int = 0
    consensus: bool = False
    first_round_consensus: bool = False
    calls: tuple[CallRecord, ...] = ()
    error: str = ""

    @property
    def tokens(self) -> int:
        """Prompt + completion tokens of every call."""
        return sum(c.prompt_tokens + c.completion_tokens for c in self.calls)

    def to_record(self) -> ConsiliumRecord:
        """The rated material of this run as a :class:`~evolve.data.ConsiliumRecord`.

        Raises:
            ValueError: The run failed before it produced a panel, opinions and a final.
        """
        if self.stop_reason == "failure" or not self.final:
            raise ValueError(f"case {self.case_id!r} ({self.condition}) failed: {self.error or 'no final opinion'}")
        return ConsiliumRecord(
            case_id=self.case_id, model=self.model, condition=self.condition, topology=self.topology,
            roles=self.roles, panel_rationale=self.panel_rationale,
            outputs=tuple(RoleOutput(role=o.role, reasoning=o.reasoning, opinion=o.opinion) for o in self.opinions),
            final=self.final, rounds=self.rounds_completed, consensus=self.consensus, stop_reason=self.stop_reason,
        )
