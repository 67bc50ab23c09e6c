"""OpenTumorBoard's aggregation of judged items, as released (``OTB_FORMAT.md`` §3-§4), with
every count beside it.

Per task and model:

* ``items`` = every item; ``format_failures`` = malformed answers (no conclusion or answer):
  never sent to the judge, counted at the scale's floor (1) in the mean;
* ``judge_failures`` = items the judge could not score (an endpoint failure, a cut reply, a
  reply outside its schema): excluded from every figure, counted;
* ``items = scored + format_failures + judge_failures``, checked when the summary is made;
* ``mean`` = (sum of scores + 1 x format_failures) / (scored + format_failures);
* flag rates (critical error, unsupported claim) over **scored** items only, with the counts
  behind them (``critical_errors``, ``unsupported_claims``);
* by question type (Specialist Turn): the same counts per type, and the mean and rates over
  its scored items, no floor; ``count`` (the released name) is the number of scored items the
  mean is over, and a type with no scored item has no mean (None);
* four decisions (Board Simulation): from the four-decision call alone, per decision, the mean
  over in-scope values and ``cases``, how many had it in scope (released); beside them
  ``out_of_scope`` (the reference never took the decision: ``-1``), ``judge_failures`` (the
  four-decision call failed) and ``format_failures``, with
  ``items = cases + out_of_scope + judge_failures + format_failures``.

ROUGE-L F1 uses the released tokenisation - lowercase, tokens are runs of ``[a-z0-9]``, no
stemming - through Google's ``rouge-score`` package, whose tokenizer does exactly that. A board
answer without a conclusion counts 0; a turn that failed is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evolve.errors import RunError, require_extra

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
        judge_failed: The judge returned nothing usable for the main score (alignment or
            equivalence).
        score: 1-5 (conclusion alignment for board, clinical equivalence for turn); None
            unless scored.
        critical_error, unsupported_claim: The equivalence flags (turn); None unless scored.
        decisions: Board: the four decisions, ``-1`` out of scope, else 1-5; empty unless the
            four-decision call scored.
        decisions_failed: Board: the four-decision call was made and failed.
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
    decisions: dict[str, Literal[-1, 1, 2, 3, 4, 5]] = {}
    decisions_failed: bool = False


def _count_error(what: str, counts: dict) -> RunError:
    return RunError(f"internal error: the OpenTumorBoard counts of {what} do not add up ({counts}); no summary was "
                    "written. This is a bug in evolve - please report it with the run folder.")


def _rate(flags: Sequence[bool | None]) -> float | None:
    values = [bool(f) for f in flags if f is not None]
    return sum(values) / len(values) if values else None


def _flagged(flags: Sequence[bool | None]) -> int | None:
    values = [bool(f) for f in flags if f is not None]
    return sum(values) if values else None


def _counts(items: Sequence[JudgedItem], what: str) -> tuple[list[JudgedItem], dict]:
    """The scored items and ``{items, scored, format_failures, judge_failures}``, checked.

    Raises:
        RunError: The counts do not add up (a bug).
    """
    scored = [i for i in items if not i.malformed and not i.judge_failed and i.score is not None]
    counts = {"items": len(items), "scored": len(scored), "format_failures": sum(i.malformed for i in items),
              "judge_failures": sum(not i.malformed and (i.judge_failed or i.score is None) for i in items)}
    if counts["items"] != counts["scored"] + counts["format_failures"] + counts["judge_failures"]:
        raise _count_error(what, counts)
    return scored, counts


def summarize(items: Sequence[JudgedItem], *, four_decisions: bool | None = None) -> dict:
    """The ``summary.json`` figures of one task and model (see the module docstring).

    Args:
        items: Every answered item of one task and model.
        four_decisions: Whether the four decisions were judged (a ``four_decisions`` block);
            None: when any item has a four-decision outcome.

    Raises:
        RunError: A count does not add up (a bug in evolve; the summary must not be written).
    """
    scored, counts = _counts(items, "all items")
    denominator = len(scored) + counts["format_failures"]
    out: dict = {
        **counts,
        "mean": (sum(i.score for i in scored if i.score is not None) + counts["format_failures"]) / denominator
        if denominator else None,
        "critical_error_rate": _rate([i.critical_error for i in scored]),
        "unsupported_claim_rate": _rate([i.unsupported_claim for i in scored]),
        "critical_errors": _flagged([i.critical_error for i in scored]),
        "unsupported_claims": _flagged([i.unsupported_claim for i in scored]),
    }
    types = sorted({i.qa_type for i in items if i.qa_type})
    if types:
        out["by_question_type"] = {t: _by_type(t, [i for i in items if i.qa_type == t]) for t in types}
    if four_decisions is None:
        four_decisions = any(i.decisions or i.decisions_failed for i in items)
    if four_decisions:
        out["four_decisions"] = {d: _decision(d, items) for d in DECISIONS}
    return out


def _by_type(qa_type: str, items: Sequence[JudgedItem]) -> dict:
    scored, counts = _counts(items, f"question type {qa_type!r}")
    return {"count": len(scored), **counts,
            "mean": sum(i.score for i in scored if i.score is not None) / len(scored) if scored else None,
            "critical_error_rate": _rate([i.critical_error for i in scored]),
            "unsupported_claim_rate": _rate([i.unsupported_claim for i in scored])}


def _decision(decision: str, items: Sequence[JudgedItem]) -> dict:
    """One decision over every item: in-scope mean and ``cases`` (released), and the counts.

    Raises:
        RunError: The counts do not add up (an item judged without its four-decision outcome).
    """
    judged = [i.decisions[decision] for i in items if not i.malformed and i.decisions and decision in i.decisions]
    in_scope = [v for v in judged if v >= 1]
    counts = {"cases": len(in_scope), "items": len(items), "scored": len(judged), "out_of_scope": len(judged) - len(in_scope),
              "judge_failures": sum(not i.malformed and i.decisions_failed for i in items),
              "format_failures": sum(i.malformed for i in items)}
    if counts["items"] != counts["cases"] + counts["out_of_scope"] + counts["judge_failures"] + counts["format_failures"]:
        raise _count_error(f"decision {decision!r}", counts)
    return {"cases": counts["cases"], "mean": sum(in_scope) / len(in_scope) if in_scope else None, **counts}


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 with the released tokenisation; 0 when either text has no token.

    Raises:
        MissingExtraError: ``rouge-score`` is not installed (the ``otb`` extra).
    """
    try:
        from rouge_score import rouge_scorer
    except ImportError:  # checked only on failure: rouge_l runs once per judged item
        require_extra("otb", "OpenTumorBoard's ROUGE-L")
        raise

    score = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False).score(reference, candidate)["rougeL"].fmeasure
    return 0.0 if math.isnan(score) else float(score)
