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

The final text comes first (released order, ``OTB_FORMAT.md`` §2 "Reasoning runs"): with
reasoning the provider returned apart (``reasoning_content``), the content is final; else what
follows the last "Final Answer"/"Final Response" heading; else what follows the last ``</think>``
(or ``[/think]``); else - no answer boundary - the whole text. A run that declares a model a
*reasoning* model (``OtbConfig.reasoning_models``) takes no answer without a boundary: its output
is unfinished reasoning, a format failure, unless the whole output is already the asked format (a
turn's exact ``{"answer": ...}`` object, a board answer opening with ``<discussion>``), as the
released code accepts a final answer emitted with no trace.

A Specialist Turn answer is read, in order, as: the whole text as JSON (an object with a string
``answer``; any other JSON value - an array, a string, a number - is a format failure); a JSON
object inside prose (the object's ``answer`` is the answer, the prose around it is dropped; an
object there without ``answer``, or several objects giving different answers, is a format
failure); a truncated ``{"answer": "`` wrapper (after prose too: the prose is dropped); text opening with ``{`` or ``[`` that is none of
these is broken JSON, a format failure; anything else is the answer verbatim.

An empty conclusion or answer - or any format failure above - is **malformed**: kept and
counted, never judged, and scored at the floor (1) in the task's mean (§3).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Extraction", "ParseStatus", "extract_board", "extract_turn", "final_text", "sentence_count"]

ParseStatus = Literal["parsed", "parsed_after_cleanup", "parsed_with_warnings", "raw_fallback"]

_THINK = re.compile(r"^\s*<think\b[^>]*>.*?</think\s*>\s*", re.S | re.I)
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.S)
_FINAL_HEADING = re.compile(  # a Markdown heading, text may follow on its line; or a line of the label alone
    r"^[ \t]*(?:#{1,6}[ \t]*(?:\*\*)?final[ \t]+(?:answer|response)(?:\*\*)?[ \t]*:?(?:\*\*)?(?P<inline>.*)"
    r"|(?:\*\*)?final[ \t]+(?:answer|response)[ \t]*:?[ \t]*(?:\*\*)?[ \t]*:?[ \t]*)$", re.I | re.M)
_CLOSED_THINK = re.compile(r"</think\s*>|\[/think\]", re.I)
_CONCLUSION = re.compile(r"<\s*conclusion\s*>(.*?)(<\s*/\s*conclusion\s*>|\Z)", re.S | re.I)
_CONCLUSION_LINE = re.compile(r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?conclusion(?:\*\*)?[ \t]*:[ \t]*(?:\*\*)?", re.I | re.M)
_DISCUSSION = re.compile(r"<\s*discussion\s*>(.*?)(?:<\s*/\s*discussion\s*>|<\s*conclusion\s*>|\Z)", re.S | re.I)
_TURN = re.compile(r"^\s*<\s*turn\s+(\d+)\s*>\s*([^:\n]+?)\s*:\s*(.*)$", re.I | re.M)
_ANSWER_WRAPPER = re.compile(r'\{\s*"answer"\s*:\s*"(.*)\Z', re.S)

NO_BOUNDARY = ("no answer boundary in a reasoning model's output (no separated reasoning, 'Final Answer' heading "
               "or </think>): unfinished reasoning is not judged")


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


def _after_boundary(raw: str, reasoning: str) -> str | None:
    """The text after the answer boundary (released order), or None when there is none.

    Provider-separated reasoning makes the whole content final; else the last "Final Answer" /
    "Final Response" heading (with any text on its line); else the last ``</think>`` or ``[/think]``.
    """
    if reasoning:
        return raw
    heads = list(_FINAL_HEADING.finditer(raw))
    if heads:
        inline = (heads[-1].group("inline") or "").strip()
        return "\n".join(p for p in (inline, raw[heads[-1].end():].strip()) if p)
    closing = list(_CLOSED_THINK.finditer(raw))
    return raw[closing[-1].end():] if closing else None


def _clean(text: str) -> tuple[str, bool]:
    """Without a leading ``<think>`` block and surrounding code fences; whether anything went."""
    stripped = _THINK.sub("", text, count=1)
    cleaned = stripped != text
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped, cleaned = fenced.group(1), True
    return stripped.strip(), cleaned


def final_text(raw: str, reasoning: str = "") -> tuple[str, bool]:
    """The final text of an answer and whether anything was cleaned away.

    Args:
        raw: The message content.
        reasoning: Reasoning the provider returned apart (then ``raw`` is final as it is).

    Returns:
        ``(text, cleaned)``: what follows the answer boundary (the whole text when there is
        none), without a leading ``<think>`` block or surrounding code fences; ``cleaned`` is
        true when a boundary, block or fence was dropped.
    """
    after = _after_boundary(raw, reasoning)
    text, cleaned = _clean(raw if after is None else after)
    return text, cleaned or (after is not None and not reasoning)


def _final(raw: str, reasoning: str, reasoning_mode: bool) -> tuple[str, bool, bool]:
    """``(text, cleaned, boundary_missing)``; a missing boundary matters in reasoning mode only."""
    text, cleaned = final_text(raw, reasoning)
    return text, cleaned, reasoning_mode and _after_boundary(raw, reasoning) is None


def _status(cleaned: bool, warnings: list[str]) -> ParseStatus:
    return "parsed_with_warnings" if warnings else ("parsed_after_cleanup" if cleaned else "parsed")


def extract_board(raw: str, reasoning: str = "", *, reasoning_mode: bool = False) -> Extraction:
    """Read a Board Simulation answer: its numbered discussion and its conclusion.

    Args:
        raw: The message content.
        reasoning: Reasoning the provider returned apart from the content (``""``: none).
        reasoning_mode: The model is declared a reasoning model: without an answer boundary the
            output is a format failure unless it opens with ``<discussion>`` (a direct answer).
    """
    text, cleaned, unbounded = _final(raw, reasoning, reasoning_mode)
    if unbounded and not re.match(r"<\s*discussion\s*>", text, re.I):
        return Extraction("", "raw_fallback", (), NO_BOUNDARY)
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
    else:  # the released fallback: the first "Conclusion:" line, read to the end
        line = _CONCLUSION_LINE.search(text)
        conclusion, status = (text[line.end():].strip() if line else ""), "raw_fallback"
    if not conclusion:
        return Extraction("", status, tuple(warnings), "no conclusion found", discussion)
    n = sentence_count(conclusion)
    if not 2 <= n <= 4 and status != "raw_fallback":
        warnings.append(f"the conclusion has {n} sentences (asked: 2-4)")
        status = "parsed_with_warnings"
    return Extraction(conclusion, status, tuple(warnings), "", discussion)


def _json_objects(text: str) -> list[dict]:
    """The JSON objects written inside ``text`` (outermost only, in order)."""
    decoder, found, at = json.JSONDecoder(), [], text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        at = text.find("{", end)
    return found


def _from_object(data: dict, cleaned: bool, warnings: list[str]) -> tuple[str, ParseStatus, str]:
    """``(answer, status, error)`` of a JSON object answer."""
    answer = data.get("answer")
    if not isinstance(answer, str):
        return "", "raw_fallback", "JSON answer without a string 'answer'"
    if set(data) != {"answer"}:
        warnings.append(f"extra keys {sorted(set(data) - {'answer'})}")
    return answer, _status(cleaned, warnings), ""


_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean",
               type(None): "null"}


def _read_turn(text: str, cleaned: bool, warnings: list[str]) -> tuple[str, ParseStatus, str]:
    """``(answer, status, error)`` by the order of the module docstring."""
    try:
        data = json.loads(text)
    except ValueError:
        pass
    else:
        if isinstance(data, dict):
            return _from_object(data, cleaned, warnings)
        return "", "raw_fallback", f"the answer is {_JSON_KINDS.get(type(data), 'a JSON value')} in JSON, not an object"
    wrapper = _ANSWER_WRAPPER.search(text)
    truncated = wrapper is not None and not _decodes_at(text, wrapper.start())  # cut before its object closed
    objects = [] if truncated else _json_objects(text)
    if objects:  # JSON inside prose: the object is the answer, the prose around it is not
        answers = [o for o in objects if isinstance(o.get("answer"), str)]
        if not answers:
            return "", "raw_fallback", "a JSON object in the text without a string 'answer'"
        if len({o["answer"].strip() for o in answers}) > 1:
            return "", "raw_fallback", f"{len(answers)} JSON objects in the text give different answers"
        return _from_object(answers[-1], True, warnings)
    if wrapper:  # a truncated {"answer": "... (prose before it dropped): keep what was written
        warnings.append('truncated {"answer": "...} wrapper')
        return _decode(wrapper.group(1)), "parsed_with_warnings", ""
    if text.startswith(("{", "[")):
        return "", "raw_fallback", "broken JSON without a readable 'answer'"
    return text, "raw_fallback", ""


def _decodes_at(text: str, at: int) -> bool:
    """Whether a complete JSON value starts at ``text[at]`` (prose may follow it)."""
    try:
        json.JSONDecoder().raw_decode(text, at)
    except ValueError:
        return False
    return True


def extract_turn(raw: str, reasoning: str = "", *, reasoning_mode: bool = False) -> Extraction:
    """Read a Specialist Turn answer: ``{"answer": ...}``, with the released fallbacks.

    Args:
        raw: The message content.
        reasoning: Reasoning the provider returned apart from the content (``""``: none).
        reasoning_mode: The model is declared a reasoning model: without an answer boundary the
            output is a format failure unless it is exactly ``{"answer": "<text>"}``.
    """
    text, cleaned, unbounded = _final(raw, reasoning, reasoning_mode)
    if unbounded and not _exact_answer_object(text):
        return Extraction("", "raw_fallback", (), NO_BOUNDARY)
    warnings: list[str] = []
    answer, status, error = _read_turn(text, cleaned, warnings)
    answer = answer.strip()
    if error or not answer:
        return Extraction("", status, tuple(warnings), error or "empty answer")
    if sentence_count(answer) > 3 and status != "raw_fallback":
        warnings.append(f"the answer has {sentence_count(answer)} sentences (asked: at most 3)")
        status = "parsed_with_warnings"
    return Extraction(answer, status, tuple(warnings))


def _exact_answer_object(text: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and set(data) == {"answer"} and isinstance(data["answer"], str)


def _decode(tail: str) -> str:
    """The string inside a truncated JSON string literal: closing quote/brace dropped, escapes decoded."""
    body = re.sub(r'"\s*\}?\s*\Z', "", tail)
    body = re.sub(r"\\u[0-9a-fA-F]{0,3}\Z|\\\Z", "", body)  # an escape cut in half
    try:
        return json.loads(f'"{body}"')
    except ValueError:
        return body
