"""OpenTumorBoard prompts in our own words, in the released layout (``OTB_FORMAT.md`` §2-§3).

Generation: a fixed system prompt per task and a user turn of headed sections, each heading on
its own line and a blank line between sections - Board: ``CASE SUMMARY:``, ``SLIDE
DESCRIPTIONS:``; Turn: ``TARGET SPECIALIST ROLE:``, ``CASE SUMMARY:``, ``SLIDE DESCRIPTIONS:``,
``QUESTION:``. References never appear.

Judging: a fixed system prompt per rubric and a user message of ``<TAG>...</TAG>`` blocks
(Board: case summary, slides, reference conclusion, the candidate's *extracted conclusion*;
Turn: role, case summary, slides, question, reference answer, candidate answer), answered as a
strict JSON schema. Calibrated guidance, when given, is one more block, ``<GUIDANCE>``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from evolve.llm import Message, response_format
from evolve.otb._records import BoardCase, TurnQuestion

__all__ = [
    "JUDGE_RUBRIC_VERSION", "PROMPT_VERSION", "ClinicalEquivalence", "ConclusionAlignment", "FourDecisions",
    "board_messages", "judge_messages", "judge_schema", "turn_messages",
]

PROMPT_VERSION = "evolve-otb-1"
"""Stem recorded as ``prompt_version`` in ``responses.jsonl`` (our prompts, not the released ones)."""

JUDGE_RUBRIC_VERSION = "evolve-otb-judge-1"
"""Recorded on every judge score."""

Rubric = Literal["clinical_equivalence", "conclusion_alignment", "four_decisions"]

_BOARD_SYSTEM = """\
You take part in a multidisciplinary tumor board and write down the whole meeting about one \
patient. You are given the case summary and one description per slide that was shown.

Write the discussion as the specialists would hold it: each contribution on its own line, \
numbered from 1 in order, as <turn N> Role: what the specialist says. Then write the board's \
decision.

Answer in exactly this form and nothing else:
<discussion>
<turn 1> Role: ...
<turn 2> Role: ...
</discussion>
<conclusion>
Two to four sentences, in the third person, stating what the board decided for this patient \
(treatment, surgery, next steps, trial) and why.
</conclusion>"""

_TURN_SYSTEM = """\
You are a specialist at a multidisciplinary tumor board. You are told which specialist you are, \
given the case summary and one description per slide that was shown, and asked one question \
during the discussion. Answer as that specialist would, from the information given, in at most \
three sentences.

Reply with only a JSON object with one field: {"answer": "..."}"""

_JUDGE_SYSTEM = {
    "conclusion_alignment": """\
You compare a candidate tumor-board conclusion with the conclusion the real board reached for the \
same patient. Judge only whether the candidate keeps the board's decisions (treatment, surgery, \
next steps, trial): wording, length, hedging and format do not matter.

Score 1-5: 5 = every decision of the board is kept; 4 = the decisions are kept with a minor \
difference; 3 = partly aligned (some decisions kept, some missing or different); 2 = mostly \
different; 1 = the decisions are reversed, or the candidate states no plan.

Reply with only the JSON object asked for: {"conclusion_alignment": {"score": N, "rationale": "..."}}""",
    "clinical_equivalence": """\
You compare a candidate's answer to a question asked of a specialist during a tumor board with \
what that specialist actually answered. Judge whether the candidate would have the same clinical \
effect in the discussion.

Score 1-5: 5 = clinically equivalent; 4 = equivalent apart from a detail that changes nothing; \
3 = partly equivalent; 2 = mostly different; 1 = contradicts the specialist or does not answer.
critical_error: true if the candidate contradicts the reference on a decisive point, invents a \
decisive fact, or implies something unsafe for the patient.
unsupported_claim: true if the candidate makes a meaningful clinical claim that neither the case \
material nor the reference supports.

Reply with only the JSON object asked for.""",
    "four_decisions": """\
You rate how well a candidate tumor-board conclusion matches the real board's conclusion on four \
decisions: therapy, surgery, next_action, clinical_trial. Decide from the REFERENCE alone which \
decisions the board took (for or against): a decision the reference does not address is out of \
scope and gets -1, whatever the candidate says. Rate each decision in scope from 1 (contradicts \
the board or missing) to 5 (the same decision). Hedging and format never lower a score.

Reply with only the JSON object asked for.""",
}


class _Reply(BaseModel):
    """A judge reply, validated as sent: strict types (``"false"`` is not a boolean, ``"3"`` or
    ``3.0`` not a score), no extra keys; anything else is a judge failure, never coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _Alignment(_Reply):
    score: int = Field(ge=1, le=5)
    rationale: str = Field(min_length=1, max_length=1000)


class ConclusionAlignment(_Reply):
    """Board judge reply: the alignment of the extracted conclusion (1-5)."""

    conclusion_alignment: _Alignment


class ClinicalEquivalence(_Reply):
    """Turn judge reply: equivalence (1-5) and the two flags."""

    clinical_equivalence_score: int = Field(ge=1, le=5)
    critical_error: bool
    unsupported_claim: bool
    rationale: str = Field(min_length=1, max_length=1000)


def _integer(value: object) -> object:
    """Refuse what a ``Literal`` of integers would let through because it compares equal
    (``True`` for 1, ``3.0`` for 3)."""
    if type(value) is not int:
        raise ValueError(f"must be a JSON integer, not {value!r}")
    return value


Decision = Annotated[Literal[-1, 1, 2, 3, 4, 5], BeforeValidator(_integer)]
"""A four-decision score: -1 out of scope, else 1-5 (0 is no value of this scale)."""


class FourDecisions(_Reply):
    """Board judge reply: each decision -1 (out of scope) or 1-5."""

    therapy: Decision
    surgery: Decision
    next_action: Decision
    clinical_trial: Decision
    rationale: str = Field(min_length=1, max_length=1200)


_REPLIES: dict[str, type[_Reply]] = {
    "conclusion_alignment": ConclusionAlignment, "clinical_equivalence": ClinicalEquivalence,
    "four_decisions": FourDecisions,
}


def _sections(pairs: list[tuple[str, str]]) -> str:
    return "\n\n".join(f"{heading}\n{text}" for heading, text in pairs)


def board_messages(case: BoardCase) -> tuple[Message, ...]:
    """The generation messages of a Board Simulation case (no reference)."""
    v = case.generation_view()
    return (Message(role="system", content=_BOARD_SYSTEM),
            Message(role="user", content=_sections([("CASE SUMMARY:", v["case_summary"]),
                                                     ("SLIDE DESCRIPTIONS:", v["slides"])])))


def turn_messages(q: TurnQuestion) -> tuple[Message, ...]:
    """The generation messages of a Specialist Turn question (no reference)."""
    v = q.generation_view()
    return (Message(role="system", content=_TURN_SYSTEM),
            Message(role="user", content=_sections([
                ("TARGET SPECIALIST ROLE:", v["target_specialist_role"]), ("CASE SUMMARY:", v["case_summary"]),
                ("SLIDE DESCRIPTIONS:", v["slides"]), ("QUESTION:", v["question"])])))


def _blocks(pairs: list[tuple[str, str]]) -> str:
    return "\n\n".join(f"<{tag}>\n{text}\n</{tag}>" for tag, text in pairs)


def judge_messages(rubric: Rubric, item: BoardCase | TurnQuestion, candidate: str,
                   guidance: str | None = None) -> tuple[Message, ...]:
    """The judge messages of one candidate (the extracted conclusion or answer only).

    Raises:
        ValueError: A board rubric with a turn item or the other way round.
    """
    if isinstance(item, BoardCase) != (rubric != "clinical_equivalence"):
        raise ValueError(f"rubric {rubric!r} does not judge a {type(item).__name__}")
    if isinstance(item, BoardCase):
        pairs = [("CASE_SUMMARY", item.case_summary), ("SLIDE_DESCRIPTIONS", item.generation_view()["slides"]),
                 ("REFERENCE_CONCLUSION", item.reference_conclusion), ("CANDIDATE_RESPONSE", candidate)]
    else:
        pairs = [("TARGET_SPECIALIST_ROLE", item.target_specialist_role), ("CASE_SUMMARY", item.case_summary),
                 ("SLIDE_DESCRIPTIONS", item.generation_view()["slides"]), ("QUESTION", item.question),
                 ("REFERENCE_EXPERT_ANSWER", item.reference_answer), ("CANDIDATE_ANSWER", candidate)]
    if guidance:
        pairs.append(("GUIDANCE", guidance))
    return (Message(role="system", content=_JUDGE_SYSTEM[rubric]), Message(role="user", content=_blocks(pairs)))


def judge_schema(rubric: Rubric) -> tuple[type[BaseModel], dict]:
    """The reply model and the strict ``response_format`` of a judge rubric."""
    model = _REPLIES[rubric]
    return model, response_format(model, rubric)
