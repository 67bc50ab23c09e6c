"""OpenTumorBoard judge replies are validated as sent, never coerced: a string for a flag, a
string or a float for a score, 0 for a four-decision score, an extra key - each is a judge failure."""

from __future__ import annotations

import json

import pytest

from evolve.llm import ChatResponse
from evolve.otb._judging import _read_reply
from evolve.otb._prompts import judge_schema

TURN = {"clinical_equivalence_score": 4, "critical_error": False, "unsupported_claim": True, "rationale": "compared"}
BOARD = {"therapy": 5, "surgery": -1, "next_action": 1, "clinical_trial": -1, "rationale": "r"}


def _read(rubric, data):
    return _read_reply(rubric, ChatResponse(text=json.dumps(data)))


def test_valid_replies_are_read_as_they_are():
    assert _read("clinical_equivalence", TURN) == (TURN, "")
    assert _read("four_decisions", BOARD) == (BOARD, "")


@pytest.mark.parametrize(("rubric", "change"), [
    ("clinical_equivalence", {"critical_error": "false"}),
    ("clinical_equivalence", {"unsupported_claim": 0}),
    ("clinical_equivalence", {"clinical_equivalence_score": "4"}),
    ("clinical_equivalence", {"clinical_equivalence_score": 4.0}),
    ("clinical_equivalence", {"clinical_equivalence_score": True}),
    ("clinical_equivalence", {"extra": 1}),
    ("four_decisions", {"therapy": 0}),
    ("four_decisions", {"surgery": True}),
    ("four_decisions", {"next_action": 3.0}),
    ("four_decisions", {"clinical_trial": "-1"}),
    ("four_decisions", {"therapy": 6}),
])
def test_a_reply_outside_the_schema_is_a_judge_failure_not_coerced(rubric, change):
    base = TURN if rubric == "clinical_equivalence" else BOARD
    reply, error = _read(rubric, {**base, **change})
    assert reply is None and f"does not fit the {rubric} schema" in error


def test_the_four_decision_schema_sent_names_the_exact_values():
    _, fmt = judge_schema("four_decisions")
    props = fmt["json_schema"]["schema"]["properties"]
    assert all(props[d]["enum"] == [-1, 1, 2, 3, 4, 5] and props[d]["type"] == "integer"
               for d in ("therapy", "surgery", "next_action", "clinical_trial"))
