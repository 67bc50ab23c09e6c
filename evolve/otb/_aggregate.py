"""OpenTumorBoard's aggregation of judged items, as released (``OTB_FORMAT.md`` §3-§4).

Per task and model:

* ``items`` = every item; ``format_failures`` = malformed answers (no conclusion or answer):
  never sent to the judge, counted at the scale's floor (1) in the mean;
* ``judge_failures`` = items the judge could not score: excluded from every figure, counted;
* ``mean`` = (sum of scores + 1 x format_failures) / (scored + format_failures);
* flag rates (critical error, unsupported claim) over **scored** items only;
* by question type (Specialist Turn): count, mean and rates over scored items, no floor;
* four decisions (Board Simulation): per decision, the mean over in-scope values and how
  many cases had it in scope (a decision the reference never took is out of scope, ``-1``).

ROUGE-L F1 uses the released tokenisation - lowercase, tokens are runs of ``[a-z0-9]``, no
stemming - through Google's ``rouge-score`` package, whose tokenizer does exactly that. A board
answer without a conclusion counts 0; a turn that failed is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DECISIONS", "JudgedItem", "rouge_l", "summarize"]

DECISIONS = ("therapy", "surgery", "next_action", "clinical_trial")
"""The four decisions of the board rubric."""


class JudgedItem(BaseModel):
    """One generated answer and what the judge said about it.

    Attributes:
        task: ``board`` or ``turn``.
        item_id, case_id, model: What was answered, and by whom.
        qa_type: Question type (turn).
        malformed: No conclusion/answer could be read (never judged).
        judge_failed: The judge returned nothing usable.
        score: 1-5 (conclusion alignment for board, clinical equivalence for turn); None
            unless scored.
        critical_error, unsupported_claim: The equivalence flags (turn); None unless scored.
        decisions: Board: the four decisions, ``-1`` out of scope, else 1-5.
    """

    model_config = ConfigDict(frozen=True)

    task: Literal["board", "turn"]
    item_id: str
    case_id: str
    model: str
    qa_type: str = ""
    malformed: bool = False
    judge_failed: bool = False
    score: int | None = Field(default=None, ge=1, le=5)
    critical_error: bool | None = None
    unsupported_claim: bool | None = None
    decisions: dict[str, int] = {}


def _rate(flags: Sequence[bool | None]) -> float | None:
    values = [bool(f) for f in flags if f is not None]
    return sum(values) / len(values) if values else None


def summarize(items: Sequence[JudgedItem]) -> dict:
    """The released ``summary.json`` figures of one task and model (see the module docstring)."""
    scored = [i for i in items if not i.malformed and not i.judge_failed and i.score is not None]
    malformed = sum(i.malformed for i in items)
    judge_failures = sum(not i.malformed and (i.judge_failed or i.score is None) for i in items)
    denominator = len(scored) + malformed
    out: dict = {
        "items": len(items), "scored": len(scored), "format_failures": malformed, "judge_failures": judge_failures,
        "mean": (sum(i.score for i in scored if i.score is not None) + malformed) / denominator if denominator else None,
        "critical_error_rate": _rate([i.critical_error for i in scored]),
        "unsupported_claim_rate": _rate([i.unsupported_claim for i in scored]),
    }
    types = sorted({i.qa_type for i in items if i.qa_type})
    if types:
        out["by_question_type"] = {t: _by_type([i for i in items if i.qa_type == t], [i for i in scored if i.qa_type == t])
                                   for t in types}
    if any(i.decisions for i in scored):
        out["four_decisions"] = {d: _decision([i.decisions.get(d, -1) for i in scored]) for d in DECISIONS}
    return out


def _by_type(every: Sequence[JudgedItem], scored: Sequence[JudgedItem]) -> dict:
    return {"count": len(every), "scored": len(scored),
            "mean": sum(i.score for i in scored if i.score is not None) / len(scored) if scored else None,
            "critical_error_rate": _rate([i.critical_error for i in scored]),
            "unsupported_claim_rate": _rate([i.unsupported_claim for i in scored])}


def _decision(values: Sequence[int]) -> dict:
    in_scope = [v for v in values if v >= 0]
    return {"cases": len(in_scope), "mean": sum(in_scope) / len(in_scope) if in_scope else None}


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 with the released tokenisation; 0 when either text has no token.

    Raises:
        ImportError: ``rouge-score`` is not installed (it is a dependency of ``evolve``).
    """
    from rouge_score import rouge_scorer

    score = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False).score(reference, candidate)["rougeL"].fmeasure
    return 0.0 if math.isnan(score) else float(score)
