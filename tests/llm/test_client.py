"""The client layer: cache, retries, failures, bounded concurrency, the OpenAI-compatible provider."""

from __future__ import annotations

import json
import threading
import time

import pytest

from evolve.errors import ConfigError, EndpointError, TransientEndpointError
from evolve.llm import (
    CallFailure,
    ChatRequest,
    ChatResponse,
    Client,
    Message,
    OpenAICompatibleProvider,
    ResponseCache,
    get_provider,
    strip_length_limits,
)
from evolve.testing import FakeProvider, LoopbackChatServer, chat_completion


def _req(i: int, **kw) -> ChatRequest:
    return ChatRequest(model="m", messages=(Message(role="user", content=f"q{i}"),), seed=i, tag="judge", **kw)


def test_cache_makes_a_repeated_run_free(tmp_path):
    provider = FakeProvider(lambda r: f"answer {r.seed}")
    cache_path = tmp_path / "c.sqlite"
    with Client(provider, cache=ResponseCache(cache_path)) as client:
        first = client.map([_req(i) for i in range(5)])
    with Client(provider, cache=ResponseCache(cache_path)) as client:
        second = client.map([_req(i) for i in range(5)])
        assert client.usage["judge"].cache_hits == 5 and client.usage["judge"].calls == 0
    assert provider.calls == 5
    assert [r.text for r in first] == [r.text for r in second] == [f"answer {i}" for i in range(5)]
    assert all(r.cached for r in second) and not any(r.cached for r in first)


def test_cache_key_covers_the_whole_request():
    base = _req(1)
    assert base.cache_key("e") != _req(2).cache_key("e")  # seed
    assert base.cache_key("e") != base.model_copy(update={"temperature": 0.3}).cache_key("e")
    assert base.cache_key("e") != base.cache_key("other endpoint")


def test_transient_errors_are_retried_then_succeed():
    provider = FakeProvider([TransientEndpointError("429"), TransientEndpointError("503"), "ok"])
    with Client(provider, backoff_initial=0.001, backoff_max=0.01) as client:
        result = client.complete(_req(1))
        assert result.text == "ok"
        assert client.usage["judge"].retries == 2


def test_failures_come_back_as_values_and_are_not_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    provider = FakeProvider([TransientEndpointError("429")] * 3 + [EndpointError("400 bad model")])
    with Client(provider, cache=cache, max_retries=2, backoff_initial=0.001, backoff_max=0.01) as client:
        transient = client.complete(_req(1))
        fatal = client.complete(_req(2))
    assert isinstance(transient, CallFailure) and transient.kind == "transient" and transient.attempts == 3
    assert isinstance(fatal, CallFailure) and fatal.kind == "fatal" and fatal.attempts == 1
    assert len(cache) == 0


def test_truncated_output_is_not_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    provider = FakeProvider([ChatResponse(text='{"a": ', finish_reason="length")])
    with Client(provider, cache=cache) as client:
        assert client.complete(_req(1)).finish_reason == "length"
    assert len(cache) == 0


def test_concurrency_is_bounded():
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    class Slow(FakeProvider):
        async def complete(self, request):
            import anyio

            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
            await anyio.sleep(0.02)
            with lock:
                state["now"] -= 1
            return ChatResponse(text="x")

    with Client(Slow(lambda r: "x"), max_concurrency=3) as client:
        client.map([_req(i) for i in range(12)])
    assert state["peak"] == 3


def test_lanes_send_each_lane_in_order_one_call_at_a_time():
    """A lane's next call leaves only when its last came back, so a server handing out the slot it
    finds free keeps the lane on one slot; the other lanes run alongside (evolve.calibration._order)."""
    lock = threading.Lock()
    in_flight: dict[int, int] = {}
    sent: list[tuple[int, int]] = []  # (lane, request number), in the order the endpoint got them
    peak = {"lane": 0, "all": 0}

    class Slow(FakeProvider):
        async def complete(self, request):
            import anyio

            lane = request.seed % 3
            with lock:
                in_flight[lane] = in_flight.get(lane, 0) + 1
                peak["lane"] = max(peak["lane"], in_flight[lane])
                peak["all"] = max(peak["all"], sum(in_flight.values()))
                sent.append((lane, request.seed))
            await anyio.sleep(0.01 * (1 + request.seed % 2))  # uneven durations: a shared queue would mix lanes
            with lock:
                in_flight[lane] -= 1
            return ChatResponse(text=f"a{request.seed}")

    requests = [_req(i) for i in range(30)]
    with Client(Slow(lambda r: "x"), max_concurrency=3) as client:
        results = client.map(requests, lanes=[i % 3 for i in range(30)])
    assert [r.text for r in results] == [f"a{i}" for i in range(30)]  # results in request order
    assert peak == {"lane": 1, "all": 3}
    for lane in range(3):
        assert [n for ln, n in sent if ln == lane] == list(range(lane, 30, 3))


def test_lanes_must_name_one_lane_per_request():
    with Client(FakeProvider(lambda r: "x")) as client, pytest.raises(ValueError, match="one per request"):
        client.map([_req(1), _req(2)], lanes=[0])


def _slow(reply) -> LoopbackChatServer:
    """A loopback endpoint that takes 50 ms per answer, so identical requests overlap in flight."""

    def answer(body: dict):
        time.sleep(0.05)
        return reply(body)

    return LoopbackChatServer(answer)


@pytest.mark.parametrize("cached", [True, False])
def test_identical_requests_in_flight_reach_the_endpoint_once(tmp_path, cached):
    requests = [_req(i % 3) for i in range(12)]  # 3 distinct requests, each 4 times in one batch
    with _slow(lambda b: (200, chat_completion(f"answer to {b['messages'][-1]['content']} seed {b.get('seed')}"))) as server:
        provider = OpenAICompatibleProvider(server.base_url, api_key="k")
        cache = ResponseCache(tmp_path / "c.sqlite") if cached else None
        with Client(provider, cache=cache, max_concurrency=4) as client:
            results = client.map(requests)
            usage = client.usage["judge"]
        assert len(server.bodies) == 3  # one endpoint request per distinct request
    assert [r.text for r in results] == [f"answer to q{i % 3} seed {i % 3}" for i in range(12)]
    assert (usage.calls, usage.cache_hits) == (3, 9)  # the 9 duplicates are served, not paid
    assert sum(not r.cached for r in results) == 3


def test_a_failed_request_in_flight_is_the_failure_of_its_duplicates_not_counted_twice():
    with _slow(lambda b: (400, {"error": {"message": "bad"}})) as server:
        provider = OpenAICompatibleProvider(server.base_url, api_key="k")
        with Client(provider, max_concurrency=4) as client:
            results = client.map([_req(1)] * 4)
            usage = client.usage["judge"]
        assert len(server.bodies) == 1
    assert all(isinstance(r, CallFailure) and r.kind == "fatal" for r in results)
    assert (usage.calls, usage.failures, usage.cache_hits) == (0, 1, 0)


def test_fake_provider_raises_when_script_runs_out():
    with Client(FakeProvider(["one"]), max_retries=0) as client:
        assert client.complete(_req(1)).text == "one"
        failure = client.complete(_req(2))
    assert isinstance(failure, CallFailure) and "ran out" in failure.error


def test_unknown_provider_is_a_config_error():
    with pytest.raises(ConfigError, match="choose one of"):
        get_provider("nope")


def _scripted(replies):
    """A loopback endpoint answering from a list. (openai >= 3 sends through httpx2, which respx
    cannot intercept, so the tests use a real HTTP server on 127.0.0.1.)"""
    script = list(replies)
    return LoopbackChatServer(lambda body: script.pop(0))


def test_openai_compatible_provider_maps_429_to_retry_and_reads_usage():
    ok = chat_completion('{"a": 1}', prompt_tokens=11, completion_tokens=3, cached_tokens=8)
    server = _scripted([(429, {"error": {"message": "slow down"}}), (200, ok)])
    try:
        provider = OpenAICompatibleProvider(server.base_url, api_key="k")
        with Client(provider, backoff_initial=0.001, backoff_max=0.01) as client:
            result = client.complete(_req(1, response_format={"type": "json_object"}))
    finally:
        server.close()
    assert result.text == '{"a": 1}' and result.prompt_tokens == 11 and result.cached_prompt_tokens == 8
    assert len(server.bodies) == 2
    sent = server.bodies[-1]
    assert sent["seed"] == 1 and sent["temperature"] == 0.0 and sent["top_p"] == 1.0
    assert sent["response_format"] == {"type": "json_object"}


def test_openai_compatible_provider_reports_400_without_retry():
    server = _scripted([(400, {"error": {"message": "unknown model"}})])
    try:
        with Client(OpenAICompatibleProvider(server.base_url), backoff_initial=0.001) as client:
            result = client.complete(_req(1))
    finally:
        server.close()
    assert isinstance(result, CallFailure) and result.kind == "fatal" and "HTTP 400" in result.error
    assert len(server.bodies) == 1


def test_schema_length_limits_can_be_left_out_for_strict_hosted_modes():
    fmt = {"type": "json_schema", "json_schema": {"name": "v", "strict": True, "schema": {
        "type": "object", "properties": {"r": {"type": "string", "maxLength": 9, "minLength": 1},
                                         "s": {"type": "array", "items": [{"type": "string", "maxLength": 2}]}}}}}
    stripped = strip_length_limits(fmt)
    assert "maxLength" not in json.dumps(stripped) and "minLength" not in json.dumps(stripped)
    assert fmt["json_schema"]["schema"]["properties"]["r"]["maxLength"] == 9  # the original is untouched

    server = _scripted([(200, chat_completion("{}"))])
    try:
        with Client(OpenAICompatibleProvider(server.base_url, schema_limits=False)) as client:
            client.complete(_req(1, response_format=fmt))
    finally:
        server.close()
    assert server.bodies[0]["response_format"] == stripped


def test_response_format_is_strict_and_a_callers_change_never_reaches_the_next_call():
    from pydantic import BaseModel, Field

    from evolve.llm import response_format

    class Verdict(BaseModel):
        """For developers, not for the endpoint."""

        score: int = Field(ge=1, le=5)
        rationale: str = Field(default="", max_length=40)

    fmt = response_format(Verdict, "verdict")
    schema = fmt["json_schema"]["schema"]
    assert fmt["json_schema"]["name"] == "verdict" and fmt["json_schema"]["strict"] is True
    assert schema["required"] == ["score", "rationale"] and "default" not in json.dumps(schema)
    assert "title" not in schema and "description" not in schema
    schema["properties"]["score"]["maximum"] = 99  # the caller's copy, made once per call
    again = response_format(Verdict, "verdict")
    assert again["json_schema"]["schema"]["properties"]["score"]["maximum"] == 5
    assert response_format(Verdict, "other")["json_schema"]["name"] == "other"


def test_a_client_never_closed_lets_the_interpreter_exit_after_an_error():
    """A script that passes its own Client to a run and dies of an error must still exit: the
    traceback keeps the client alive until finalization, when its loop thread is frozen."""
    import subprocess
    import sys

    script = (
        "from evolve.llm import ChatRequest, Client, Message, ResponseCache\n"
        "from evolve.testing import FakeProvider\n"
        "def broken(request):\n"
        "    raise TypeError('a bug in the stand-in model')\n"
        "client = Client(FakeProvider(broken), cache=ResponseCache(':memory:'))\n"
        "client.map([ChatRequest(model='m', messages=(Message(role='user', content='hi'),))])\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "TypeError: a bug in the stand-in model" in proc.stderr
