"""What the response cache keeps: a resumed run asks again for what was broken, and never asks
again for what an endpoint cannot do."""

from __future__ import annotations

from pathlib import Path

from evolve.llm import ChatRequest, Client, Message, OpenAICompatibleProvider, ResponseCache
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
