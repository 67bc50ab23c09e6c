"""Reading a model's answer the way OpenTumorBoard's own code does (``OTB_FORMAT.md`` §2).

A Board Simulation answer is a ``<discussion>`` of numbered turns (``<turn 1> Surgeon: ...``)
and one ``<conclusion>`` of two to four sentences; only the conclusion is judged. A Specialist
Turn answer is the JSON object ``{"answer": "..."}`` of at most three sentences.

Models do not always comply, so extraction is forgiving in the released ways, and says how it
got there (``parse_status``):

* ``parsed`` - as asked;
* ``parsed_after_cleanup`` - after dropping a leading ``<think>...</think>`` block, code fences,
  or the reasoning before a ``</think>``/"Final Answer" heading;
* ``parsed_with_warnings`` - usable, but something is off (turn numbering, sentence count, an
  unclosed ``<conclusion>`` read to the end as a truncated answer, a truncated ``{"answer": "``
  wrapper, extra JSON keys);
* ``raw_fallback`` - no tags or JSON: a "Conclusion:" line (board) or the text as it is (turn).

An empty conclusion or answer - or JSON without ``answer`` - is **malformed**: kept and counted,
never judged, and scored at the floor (1) in the task's mean (§3).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Extraction", "ParseStatus", "extract_board", "extract_turn", "final_text", "sentence_count"]

ParseStatus = Literal["parsed", "parsed_after_cleanup", "parsed_with_warnings", "raw_fallback"]

_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.S | re.I)
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.S)
_FINAL_HEADING = re.compile(r"^[#*\s]*final answer[*:\s]*$", re.I | re.M)
_CONCLUSION = re.compile(r"<conclusion>(.*?)(</conclusion>|\Z)", re.S | re.I)
_CONCLUSION_LINE = re.compile(r"^[#*\s]*conclusion[*\s]*:\s*(.+?)(?:\n\s*\n|\Z)", re.S | re.I | re.M)
_DISCUSSION = re.compile(r"<discussion>(.*?)(?:</discussion>|<conclusion>|\Z)", re.S | re.I)
_TURN = re.compile(r"^\s*<turn\s+(\d+)>\s*([^:\n]+?)\s*:\s*(.*)$", re.I | re.M)
_ANSWER_WRAPPER = re.compile(r'^\s*\{\s*"answer"\s*:\s*"(.*)\Z', re.S)


@dataclass(frozen=True)
class Extraction:
    """What was read from one answer.

    Attributes:
        text: The conclusion (board) or the answer (turn); ``""`` when malformed.
        parse_status: How it was read (see the module docstring).
        warnings: What was off, one phrase each.
        error: Why it is malformed (``""`` otherwise).
        discussion: Board: ``(role, text)`` per turn, in order.
    """

    text: str
    parse_status: ParseStatus
    warnings: tuple[str, ...] = ()
    error: str = ""
    discussion: tuple[tuple[str, str], ...] = ()

    @property
    def malformed(self) -> bool:
        """Nothing usable: never judged, at the floor in the mean."""
        return not self.text


def sentence_count(text: str) -> int:
    """Sentences, counted as runs ending in ``.``, ``!`` or ``?`` (a trailing fragment counts)."""
    parts = [p for p in re.split(r"(?<=[.!?])\s+", text.strip()) if p.strip()]
    return len(parts)


def final_text(raw: str, reasoning: str = "") -> tuple[str, bool]:
    """The final text of an answer and whether anything was cleaned away.

    A provider that returned the reasoning separately (``reasoning``) leaves ``raw`` final;
    otherwise what follows the last ``</think>`` or "Final Answer" heading, then without a
    leading ``<think>`` block or surrounding code fences.
    """
    text, cleaned = raw, False
    if not reasoning:
        if "</think>" in text.lower():
            text, cleaned = text[text.lower().rindex("</think>") + len("</think>"):], True
        else:
            heads = list(_FINAL_HEADING.finditer(text))
            if heads:
                text, cleaned = text[heads[-1].end():], True
    stripped = _THINK.sub("", text, count=1)
    cleaned |= stripped != text
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped, cleaned = fenced.group(1), True
    return stripped.strip(), cleaned


def _status(cleaned: bool, warnings: list[str]) -> ParseStatus:
    return "parsed_with_warnings" if warnings else ("parsed_after_cleanup" if cleaned else "parsed")


def extract_board(raw: str, reasoning: str = "") -> Extraction:
    """Read a Board Simulation answer: its numbered discussion and its conclusion."""
    text, cleaned = final_text(raw, reasoning)
    warnings: list[str] = []
    block = _DISCUSSION.search(text)
    turns = [(int(n), role.strip(), said.strip()) for n, role, said in _TURN.findall(block.group(1) if block else text)]
    if not turns:
        warnings.append("no '<turn N> Role:' lines in the discussion")
    elif [n for n, _, _ in turns] != list(range(1, len(turns) + 1)):
        warnings.append("turns are not numbered 1, 2, 3, ...")
    discussion = tuple((role, said) for _, role, said in turns)
    found = _CONCLUSION.search(text)
    if found:
        conclusion = found.group(1).strip()
        if not found.group(2):
            warnings.append("<conclusion> not closed: read to the end (a truncated answer?)")
        status: ParseStatus = _status(cleaned, warnings)
    else:
        line = _CONCLUSION_LINE.search(text)
        conclusion, status = (line.group(1).strip() if line else ""), "raw_fallback"
    if not conclusion:
        return Extraction("", status, tuple(warnings), "no conclusion found", discussion)
    n = sentence_count(conclusion)
    if not 2 <= n <= 4 and status != "raw_fallback":
        warnings.append(f"the conclusion has {n} sentences (asked: 2-4)")
        status = "parsed_with_warnings"
    return Extraction(conclusion, status, tuple(warnings), "", discussion)


def extract_turn(raw: str, reasoning: str = "") -> Extraction:
    """Read a Specialist Turn answer: ``{"answer": ...}``, with the released fallbacks."""
    text, cleaned = final_text(raw, reasoning)
    warnings: list[str] = []
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        answer = data.get("answer")
        if not isinstance(answer, str):
            return Extraction("", "raw_fallback", (), "JSON answer without a string 'answer'")
        if set(data) != {"answer"}:
            warnings.append(f"extra keys {sorted(set(data) - {'answer'})}")
        status = _status(cleaned, warnings)
    else:
        wrapper = _ANSWER_WRAPPER.match(text)
        if wrapper:  # a truncated {"answer": "... : keep what was written
            answer = _decode(wrapper.group(1))
            warnings.append('truncated {"answer": "...} wrapper')
            status = "parsed_with_warnings"
        else:
            answer, status = text, "raw_fallback"
    answer = answer.strip()
    if not answer:
        return Extraction("", status, tuple(warnings), "empty answer")
    if sentence_count(answer) > 3 and status != "raw_fallback":
        warnings.append(f"the answer has {sentence_count(answer)} sentences (asked: at most 3)")
        status = "parsed_with_warnings"
    return Extraction(answer, status, tuple(warnings))


def _decode(tail: str) -> str:
    """The string inside a truncated JSON string literal: closing quote/brace dropped, escapes decoded."""
    body = re.sub(r'"\s*\}?\s*\Z', "", tail)
    body = re.sub(r"\\u[0-9a-fA-F]{0,3}\Z|\\\Z", "", body)  # an escape cut in half
    try:
        return json.loads(f'"{body}"')
    except ValueError:
        return body
