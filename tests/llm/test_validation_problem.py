"""`evolve.llm.validation_problem`: why a structured reply was refused, on one line, naming each
field, the value it had and the rule it broke - the text every judge failure records."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evolve.judge import Judge
from evolve.llm import ChatRequest, ChatResponse, Message, parse_json_object, validation_problem
from evolve.rubric import load_rubric


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    score: int = Field(ge=1, le=5)
    rationale: str = Field(min_length=1, max_length=10)


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    inner: _Inner
    flag: bool
    choice: Literal[-1, 1, 2]


def _problem(data, **kw) -> str:
    with pytest.raises(ValidationError) as info:
        _Reply.model_validate(data)
    return validation_problem(info.value, **kw)


GOOD = {"inner": {"score": 3, "rationale": "ok"}, "flag": True, "choice": 1}


@pytest.mark.parametrize(("change", "expected"), [
    ({"choice": 0}, "choice: 0 is not one of -1, 1 or 2"),
    ({"flag": "false"}, 'flag: "false" is not a boolean (true or false)'),
    ({"inner": {"score": 0, "rationale": "ok"}}, "inner.score: 0 is below the minimum 1"),
    ({"inner": {"score": 6, "rationale": "ok"}}, "inner.score: 6 is above the maximum 5"),
    ({"inner": {"score": 3.0, "rationale": "ok"}}, "inner.score: 3.0 is not an integer"),
    ({"inner": {"score": 3, "rationale": "x" * 500}}, "inner.rationale: 500 characters, over the limit of 10"),
    ({"inner": {"score": 3, "rationale": ""}}, "inner.rationale: 0 characters, under the minimum of 1"),
    ({"inner": 3}, "inner: 3 is not an object"),
    ({"extra": [1, 2]}, "extra: [1, 2] is not a field of the schema"),
])
def test_each_problem_names_the_field_the_value_and_the_rule(change, expected):
    assert _problem({**GOOD, **change}) == expected


def test_several_problems_on_one_line_the_rest_counted():
    data = {"inner": {"score": "3\n4", "rationale": "line\nbreak" * 20}, "flag": 1, "choice": "x", "more": 1}
    text = _problem(data)
    assert "\n" not in text and text.count("; ") == 4 and text.endswith("; +1 more")
    assert text.startswith('inner.score: "3\\n4" is not an integer; inner.rationale: 200 characters')


def test_a_reply_that_is_no_object_and_a_long_value_are_shortened():
    assert _problem([1, 2]) == "(answer): [1, 2] is not an object"
    assert _problem({**GOOD, "choice": "y" * 100}) == 'choice: "' + "y" * 38 + "…" + " is not one of -1, 1 or 2"


def test_without_values_the_text_is_the_consiliums_re_ask_text_unchanged():
    # these words are part of cached re-ask requests: changing them would make a resume pay again
    data = {**GOOD, "flag": "Dr. Example", "inner": {"score": 9, "rationale": "ok"}}
    assert _problem(data, values=False) == ("inner.score: Input should be less than or equal to 5; "
                                            "flag: Input should be a valid boolean")


def test_a_reply_that_is_not_json_is_one_line_too():
    with pytest.raises(ValueError) as info:
        parse_json_object('{"a":\n')
    assert validation_problem(info.value) == "Expecting value: line 1 column 6 (char 5)"
    assert validation_problem(ValueError("first\n  second")) == "first second"


def test_the_calibration_judge_records_a_one_line_reason_naming_the_field():
    rubric = load_rubric("consilium")
    criterion = next(c for c in rubric.criteria if c.judged)
    judge = Judge(rubric, "protocol")
    request = ChatRequest(model="m", messages=(Message(role="user", content="x"),))
    out = judge.parse(request, ChatResponse(text='{"rationale": "r",\n "score": "9"}'), criterion)
    assert out.outcome == "model_failure" and "\n" not in out.rationale
    assert out.rationale.startswith('invalid output: score: "9" is not one of')
