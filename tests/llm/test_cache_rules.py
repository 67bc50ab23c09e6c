"""What the response cache keeps: a resumed run asks again for what was broken, and never asks
again for what an endpoint cannot do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evolve.data import Case, Target
from evolve.judge import Judge, JudgeSettings
from evolve.llm import ChatRequest, ChatResponse, Client, Message, OpenAICompatibleProvider, ResponseCache
from evolve.llm._schema import schema_violation
from evolve.otb._judging import _read_reply
from evolve.otb._prompts import judge_schema
from evolve.rubric import load_protocol, load_rubric
from evolve.testing import FakeProvider, LoopbackChatServer

SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}, "strict": True}}


def _request(fmt: dict | None = SCHEMA) -> ChatRequest:
    return ChatRequest(model="m", messages=(Message(role="user", content="q"),), seed=1, response_format=fmt)


def test_an_answer_that_is_not_the_json_asked_for_is_not_cached(tmp_path: Path) -> None:
    replies = iter(["no json here", '{"a": 1', '{"a": 1}'])  # garbage, a cut object, then the answer
    provider = FakeProvider(lambda request: next(replies))
    with Client(provider, cache=ResponseCache(tmp_path / "c.sqlite")) as client:
        for expected in ("no json here", '{"a": 1', '{"a": 1}'):
            result = client.complete(_request())
            assert result.text == expected and not result.cached  # type: ignore[union-attr]
        assert client.complete(_request()).cached  # type: ignore[union-attr]
    assert len(provider.requests) == 3


def test_free_text_is_cached_as_it_is(tmp_path: Path) -> None:
    provider = FakeProvider(lambda request: "plain words")
    with Client(provider, cache=ResponseCache(tmp_path / "c.sqlite")) as client:
        client.complete(_request(None))
        assert client.complete(_request(None)).cached  # type: ignore[union-attr]
    assert len(provider.requests) == 1


def test_an_endpoint_without_embeddings_is_asked_once(tmp_path: Path) -> None:
    server = LoopbackChatServer(lambda body: (404, {"error": {"message": "not found"}}))
    try:
        cache = tmp_path / "c.sqlite"
        for _ in range(2):  # two runs over the same cache
            with Client(OpenAICompatibleProvider(server.base_url), cache=ResponseCache(cache)) as client:
                failure = client.embed(["a text"], "m")
                assert failure.kind == "unsupported" and "does not serve" in failure.error  # type: ignore[union-attr]
        assert len(server.bodies) == 1  # the second run remembered the answer
    finally:
        server.close()


def test_every_cached_answer_records_when_it_was_stored(tmp_path: Path) -> None:
    import sqlite3
    import time

    from evolve.llm import ChatResponse, ResponseCache

    before = time.time()
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", ChatResponse(text="x"))
    cache.close()
    with sqlite3.connect(tmp_path / "c.sqlite") as conn:
        (created,) = conn.execute("SELECT created FROM responses WHERE key = 'k'").fetchone()
    assert created is not None and before - 1 <= created <= time.time() + 1  # on every SQLite version


# -- replies outside the schema sent (issue 24 item 1) ------------------------------------------

JUDGE_TEXT = json.dumps({"rationale": "fits", "score": "1"})


def _calibration_judge() -> tuple[Judge, ChatRequest, Any]:
    """A request of the calibration judge (rubric kqa-entailment, scores "0"/"1") and its criterion."""
    judge = Judge(load_rubric("kqa-entailment"), load_protocol("kqa-entailment"),
                  JudgeSettings(model="m", rationale_max_chars=200, max_tokens=300))
    crit = judge.rubric.criteria[0]
    case = Case(case_id="c1", title="T", text="Patient asks about drug X.", reference_answer="Dx Y")
    target = Target(target_id="t1", case_id="c1", component="answer", text="Drug X is an SSRI.", statement="X is an SSRI")
    return judge, judge.request(case, target, crit, None, seed=1), crit


def _otb_request(rubric: str) -> ChatRequest:
    _, fmt = judge_schema(rubric)  # type: ignore[arg-type]
    return ChatRequest(model="j", messages=(Message(role="user", content=f"judge this ({rubric})"),), seed=0,
                       response_format=fmt, tag="otb_judge")


OTB_VALID = {
    "clinical_equivalence": {"clinical_equivalence_score": 4, "critical_error": False, "unsupported_claim": False,
                             "rationale": "same effect"},
    "conclusion_alignment": {"conclusion_alignment": {"score": 3, "rationale": "partly"}},
    "four_decisions": {"therapy": 5, "surgery": -1, "next_action": 2, "clinical_trial": -1, "rationale": "r"},
}
OTB_INVALID = [  # (rubric, the reply's change): each valid JSON, each outside the schema sent
    ("clinical_equivalence", {"clinical_equivalence_score": 6}),
    ("clinical_equivalence", {"critical_error": "false"}),
    ("clinical_equivalence", {"clinical_equivalence_score": 3.0}),
    ("clinical_equivalence", {"extra": "key"}),
    ("conclusion_alignment", {"conclusion_alignment": {"score": 0, "rationale": "x"}}),
    ("conclusion_alignment", {"conclusion_alignment": {"score": "3", "rationale": "x"}}),
    ("four_decisions", {"therapy": 0}),
    ("four_decisions", {"surgery": True}),
]


def _two_runs(tmp_path: Path, request: ChatRequest, bad: str, good: str) -> tuple[list, list, LoopbackChatServer]:
    """A run against an endpoint answering ``bad``, then a resumed run (same cache) against a
    healthy one answering ``good``, then a third run; the results of each run and the healthy server."""
    cache = tmp_path / "c.sqlite"
    results = []
    sick = LoopbackChatServer(lambda body: bad)
    healthy = LoopbackChatServer(lambda body: good)
    try:
        for server in (sick, healthy, healthy):
            with Client(OpenAICompatibleProvider(server.base_url, endpoint_id="judge-endpoint"),
                        cache=ResponseCache(cache), max_retries=0) as client:
                results.append(client.complete(request))
    finally:
        sick.close()
        healthy.close()
    return results, healthy.bodies, healthy


@pytest.mark.parametrize("bad", [
    json.dumps({"rationale": "r", "score": "7"}),  # outside the scale
    json.dumps({"rationale": "r", "score": 1}),  # a number where the schema says a string
    json.dumps({"rationale": "r", "score": "1", "confidence": "high"}),  # an extra key
])
def test_a_calibration_judge_reply_outside_its_schema_is_asked_again_on_resume(tmp_path: Path, bad: str) -> None:
    judge, request, crit = _calibration_judge()
    (first, second, third), healthy_bodies, _ = _two_runs(tmp_path, request, bad, JUDGE_TEXT)
    assert judge.parse(request, first, crit).outcome == "model_failure"  # the caller still gets it, and records it
    assert not second.cached and judge.parse(request, second, crit).outcome == "score"  # asked again, scored
    assert third.cached and len(healthy_bodies) == 1  # the valid answer is kept


@pytest.mark.parametrize(("rubric", "change"), OTB_INVALID)
def test_an_otb_judge_reply_outside_its_schema_is_asked_again_on_resume(tmp_path: Path, rubric: str, change: dict) -> None:
    request = _otb_request(rubric)
    bad = json.dumps({**OTB_VALID[rubric], **change})
    (first, second, third), healthy_bodies, _ = _two_runs(tmp_path, request, bad, json.dumps(OTB_VALID[rubric]))
    assert _read_reply(rubric, first)[0] is None  # type: ignore[arg-type]  # a judge failure for the run
    assert not second.cached and _read_reply(rubric, second) == (OTB_VALID[rubric], "")  # type: ignore[arg-type]
    assert third.cached and len(healthy_bodies) == 1


def test_a_reply_stored_by_an_older_version_outside_the_schema_is_not_replayed(tmp_path: Path) -> None:
    request = _otb_request("clinical_equivalence")
    good = json.dumps(OTB_VALID["clinical_equivalence"])
    provider = FakeProvider(lambda req: good)
    cache = ResponseCache(tmp_path / "c.sqlite")
    stale = json.dumps({**OTB_VALID["clinical_equivalence"], "critical_error": "false"})
    cache.put(request.cache_key(provider.endpoint_id), ChatResponse(text=stale))  # cached before replies were checked
    with Client(provider, cache=cache) as client:
        fresh = client.complete(request)
        assert not fresh.cached and fresh.text == good  # type: ignore[union-attr]
        assert client.complete(request).cached  # type: ignore[union-attr]  # and the fitting answer replaced it
    assert len(provider.requests) == 1


@pytest.mark.parametrize(("schema_limits", "asked"), [(True, 2), (False, 1)])
def test_a_long_rationale_is_checked_against_the_schema_as_sent(tmp_path: Path, schema_limits: bool, asked: int) -> None:
    """With the length limits sent, an over-long rationale breaks the schema (not cached); without
    them (``schema_limits`` off) the endpoint was never told the limit, so the reply fits what was
    sent and is cached. The judge reads the limits sent: a model_failure with them, the whole
    rationale scored without them (never clipped)."""
    judge, request, crit = _calibration_judge()
    judge = Judge(judge.rubric, judge.protocol, judge.settings, schema_limits=schema_limits)
    long = json.dumps({"rationale": "x" * 500, "score": "1"})  # rationale_max_chars is 200
    server = LoopbackChatServer(lambda body: long)
    try:
        for _ in range(2):
            provider = OpenAICompatibleProvider(server.base_url, endpoint_id="judge-endpoint", schema_limits=schema_limits)
            with Client(provider, cache=ResponseCache(tmp_path / "c.sqlite")) as client:
                outcome = judge.parse(request, client.complete(request), crit)
                if schema_limits:
                    assert outcome.outcome == "model_failure" and outcome.score is None
                else:
                    assert outcome.outcome == "score" and outcome.rationale == "x" * 500
        sent = server.bodies[0]["response_format"]["json_schema"]["schema"]["properties"]["rationale"]
        assert ("maxLength" in sent) is schema_limits
        assert len(server.bodies) == asked
    finally:
        server.close()


def test_schema_violation_reads_json_types_strictly() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"},
                                               "b": {"type": "boolean"}}, "additionalProperties": False}
    assert schema_violation({"n": 3, "x": 0.5, "b": False}, schema) is None
    for bad in ({"n": 3.0}, {"n": True}, {"x": float("nan")}, {"x": True}, {"b": 0}, {"b": "false"}, {"y": 1}):
        assert schema_violation(bad, schema) is not None, bad
    assert schema_violation({}, {"type": "nonsense"}).startswith("the schema itself is invalid")  # type: ignore[union-attr]
