"""The OpenAI-compatible provider on the wire: connections kept alive between calls, owned by
the client's event loop and closed with the client; the body sent is the one built; the answer
is read as the SDK reads it."""

from __future__ import annotations

import gc
import logging
import ssl
import time

import pytest

from evolve.llm import ChatRequest, Client, Message, get_provider
from evolve.llm._providers import _tls_context
from evolve.testing import LoopbackChatServer


def _requests(n: int, tag: str = "t") -> list[ChatRequest]:
    return [ChatRequest(model="m", messages=(Message(role="user", content=f"{tag} {i}"),), tag=tag) for i in range(n)]


def _wait_for(condition, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_calls_reuse_connections_and_closing_the_client_closes_them(caplog: pytest.LogCaptureFixture) -> None:
    with LoopbackChatServer(lambda body: "ok") as server:
        provider = get_provider("openai_compatible", base_url=server.base_url, api_key="k")
        with Client(provider, max_concurrency=2) as client:
            assert all(r.text == "ok" for r in client.map(_requests(20)))
            # 20 calls, at most 2 at a time: the connections stay open and are reused
            assert 1 <= server.open_connections <= 2
        assert _wait_for(lambda: server.open_connections == 0)
        # the same provider serves a second client (another event loop) on new connections
        with caplog.at_level(logging.ERROR, logger="asyncio"), Client(provider) as again:
            assert again.complete(_requests(1, "second")[0]).text == "ok"
            gc.collect()  # the first loop's client, were it left open, would complain here
        assert _wait_for(lambda: server.open_connections == 0)
        assert len(server.bodies) == 21
    assert not [r for r in caplog.records if "Event loop is closed" in r.getMessage()]


def test_every_client_of_every_provider_verifies_with_one_tls_context_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the certificate bundle costs about 24 ms of CPU; a provider makes a client per
    event loop, and a process may hold several providers (endpoints)."""
    made: list[ssl.SSLContext] = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    _tls_context.cache_clear()
    try:
        with LoopbackChatServer(lambda body: "ok") as server:
            for key in ("k1", "k2"):
                provider = get_provider("openai_compatible", base_url=server.base_url, api_key=key)
                for _ in range(2):
                    with Client(provider) as client:
                        assert client.complete(_requests(1, key)[0]).text == "ok"
        assert len(made) == 1
        assert made[0].verify_mode == ssl.CERT_REQUIRED and made[0].check_hostname
    finally:
        _tls_context.cache_clear()


def test_a_server_that_dies_drops_its_kept_alive_connections() -> None:
    server = LoopbackChatServer(lambda body: "ok")
    provider = get_provider("openai_compatible", base_url=server.base_url, api_key="k")
    with Client(provider, max_retries=0) as client:
        assert client.complete(_requests(1)[0]).text == "ok"
        assert server.open_connections == 1
        server.close()
        assert server.open_connections == 0
        after = client.complete(_requests(1, "after")[0])
    assert not hasattr(after, "text") and len(server.bodies) == 1  # a failure, not an answer from the dead server


def test_the_body_sent_is_the_one_built_and_the_answer_is_read_as_the_sdk_reads_it() -> None:
    """The provider posts :meth:`chat_body` as it is (the batch lines and the cache key rest on
    it) and reads the completion, usage and finish reason through the SDK's parser."""
    from evolve.llm import OpenAICompatibleProvider
    from evolve.testing import chat_completion

    request = ChatRequest(model="m", messages=(Message(role="system", content="s"), Message(role="user", content="u")),
                          tag="t", seed=7, max_tokens=30, response_format={"type": "json_schema", "json_schema": {
                              "name": "x", "strict": True, "schema": {"type": "object", "properties": {}}}})
    answer = chat_completion("hi", prompt_tokens=11, completion_tokens=3, cached_tokens=5, finish_reason="length")
    answer["choices"][0]["message"]["reasoning_content"] = "thought"
    answer["unknown_field"] = {"kept": "out of the way"}  # servers add their own fields
    with LoopbackChatServer(lambda body: (200, answer)) as server:
        provider = OpenAICompatibleProvider(server.base_url, api_key="k")
        with Client(provider, max_retries=0) as client:
            got = client.complete(request)
        assert server.bodies == [provider.chat_body(request)]
    assert (got.text, got.reasoning, got.finish_reason) == ("hi", "thought", "length")
    assert (got.prompt_tokens, got.completion_tokens, got.cached_prompt_tokens) == (11, 3, 5)


def test_closing_while_a_call_is_out_waits_for_its_answer_before_closing_the_connections() -> None:
    import threading

    answered = threading.Event()

    def slow(body: dict) -> str:
        time.sleep(0.5)
        answered.set()
        return "late but whole"

    with LoopbackChatServer(slow) as server:
        client = Client(get_provider("openai_compatible", base_url=server.base_url, api_key="k"), max_retries=0)
        results: list = []
        caller = threading.Thread(target=lambda: results.append(client.complete(_requests(1)[0])))
        caller.start()
        assert _wait_for(lambda: len(server.bodies) == 1)  # the call is out
        client.close()
        caller.join(timeout=10)
        assert answered.is_set() and [getattr(r, "text", r) for r in results] == ["late but whole"]
        assert len(server.bodies) == 1  # answered once, not cut off and asked again
        assert _wait_for(lambda: server.open_connections == 0)


def test_a_server_that_closes_each_connection_answers_every_call_on_a_new_one() -> None:
    with LoopbackChatServer(lambda body: "ok", keep_alive=False) as server:
        with Client(get_provider("openai_compatible", base_url=server.base_url, api_key="k"), max_retries=0) as client:
            assert [r.text for r in client.map(_requests(6))] == ["ok"] * 6
            assert _wait_for(lambda: server.open_connections == 0)  # none kept between calls
        assert len(server.bodies) == 6


def test_a_refused_connection_is_named_unsent_and_a_dropped_one_is_not() -> None:
    """A refused connection (nobody listens) means the request never left: the run's ledger does
    not count it as possibly paid. A connection the server drops after reading the request may
    have been processed."""
    import anyio

    from evolve.errors import EndpointConnectionError
    from evolve.llm import OpenAICompatibleProvider
    from evolve.testing import DROP

    request = ChatRequest(model="m", messages=(Message(role="user", content="hi"),))

    async def error_of(url: str) -> EndpointConnectionError:
        provider = OpenAICompatibleProvider(url)
        with pytest.raises(EndpointConnectionError) as err:
            await provider.complete(request)
        await provider.aclose()
        return err.value

    assert anyio.run(error_of, "http://127.0.0.1:9/v1").unsent  # port 9 (discard): nobody answers here
    with LoopbackChatServer(lambda body: DROP) as server:  # reads the request, then closes the connection
        assert not anyio.run(error_of, server.base_url).unsent
