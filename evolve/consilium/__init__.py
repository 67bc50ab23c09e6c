"""The consilium: a multi-agent pipeline that writes a clinical second opinion (SPEC §5).

For one case a model (1) assigns a panel of 1-5 clinical roles, one primary; (2) each role
writes its own opinion, independently, from the same case input with the reference answer
withheld - free-form or structured, from one model or from N worker models merged by a
consolidator (``n+1``); the opinions are frozen; (3) a shared report is synthesised from the
identifier-stripped case and the opinions, and review rounds follow: every role votes yes, or
no with a critique and a proposed revision; the moderator checks the objections against the
case and revises or records no substantive change; the consilium stops on consensus, no
substantive change, a report identical to an earlier state, or the round limit (5); (4) a
finalizer writes the final opinion, keeping unresolved disagreement and uncertainty.

Every stage, vote, stop reason and call (with its tokens) is recorded in a :class:`CaseRun`;
:meth:`CaseRun.to_record` gives the :class:`~evolve.data.ConsiliumRecord` physicians rate.
"""

from evolve.consilium._models import (
    ARTIFACT_VERSION,
    MAX_ROUNDS,
    CallRecord,
    CaseRun,
    Condition,
    ModeratorReply,
    RoleAssignmentReply,
    RoleOpinion,
    RoleReply,
    RoundRecord,
    Stage,
    StopReason,
    StructuredFinalReply,
    StructuredOpinionReply,
    Topology,
    Vote,
    VoteReply,
)

__all__ = [
    "ARTIFACT_VERSION",
    "MAX_ROUNDS",
    "CallRecord",
    "CaseRun",
    "Condition",
    "ModeratorReply",
    "RoleAssignmentReply",
    "RoleOpinion",
    "RoleReply",
    "RoundRecord",
    "Stage",
    "StopReason",
    "StructuredFinalReply",
    "StructuredOpinionReply",
    "Topology",
    "Vote",
    "VoteReply",
]
