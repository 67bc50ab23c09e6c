"""An OpenTumorBoard judge rationale longer than its limit: a judge failure when the endpoint was
told the limit (``schema_limits`` on), read whole when it was not (the schema sent had no limit)."""

from __future__ import annotations

import json

import pytest

from evolve.llm import ChatResponse
from evolve.otb._judging import _read_reply

TURN = {"clinical_equivalence_score": 4, "critical_error": False, "unsupported_claim": True, "rationale": "compared"}
BOARD = {"therapy": 5, "surgery": -1, "next_action": 1, "clinical_trial": -1, "rationale": "r"}


@pytest.mark.parametrize(("rubric", "reply", "path"), [
    ("clinical_equivalence", {**TURN, "rationale": "x" * 1500}, ("rationale",)),
    ("four_decisions", {**BOARD, "rationale": "x" * 1500}, ("rationale",)),
    ("conclusion_alignment", {"conclusion_alignment": {"score": 3, "rationale": "x" * 1500}},
     ("conclusion_alignment", "rationale")),
])
def test_a_long_rationale_fails_only_when_the_endpoint_was_told_the_limit(rubric, reply, path):
    """With ``schema_limits`` off the schema sent has no maxLength: a longer rationale breaks
    nothing asked for (and the cache keeps it), so it is read whole, not a judge failure; with
    the limit sent it is outside the schema: a judge failure, never cached, never clipped."""
    response = ChatResponse(text=json.dumps(reply))
    told, _ = _read_reply(rubric, response)
    untold, error = _read_reply(rubric, response, limits_sent=False)
    assert told is None
    value = untold
    for key in path:
        value = value[key]  # type: ignore[index]
    assert error == "" and value == "x" * 1500
    bad, why = _read_reply(rubric, ChatResponse(text=json.dumps({**reply, "extra": 1})), limits_sent=False)
    assert bad is None and "does not fit" in why  # every other field still validated as sent
