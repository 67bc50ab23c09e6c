"""Client.embed (used by the audit): OpenAI-compatible /v1/embeddings, fake provider, per-text cache."""

from __future__ import annotations

from evolve.llm import (
    CallFailure,
    ChatRequest,
    Client,
    Message,
    OpenAICompatibleProvider,
    ResponseCache,
)
from evolve.testing import FakeProvider, LoopbackChatServer


def _vectors_reply(body):
    # answers out of order: the provider must sort by index
    data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), float(i)]} for i, t in enumerate(body["input"])]
    return 200, {"object": "list", "data": data[::-1], "model": body["model"], "usage": {"prompt_tokens": 3, "total_tokens": 3}}


def test_openai_compatible_embeddings_in_order_and_cached_per_text(tmp_path):
    with LoopbackChatServer(_vectors_reply) as server:
        provider = OpenAICompatibleProvider(server.base_url)
        with Client(provider, cache=ResponseCache(tmp_path / "c.sqlite")) as client:
            first = client.embed(["a", "bbb"], "emb")
            second = client.embed(["bbb", "cc"], "emb")  # 'bbb' from the cache, only 'cc' is sent
            assert client.usage["embedding"].calls == 2 and client.usage["embedding"].cache_hits == 1
    assert first == [[1.0, 0.0], [3.0, 1.0]] and second == [[3.0, 1.0], [2.0, 0.0]]
    assert [b["input"] for b in server.bodies] == [["a", "bbb"], ["cc"]]
    assert server.bodies[0]["encoding_format"] == "float" and server.bodies[0]["model"] == "emb"


def test_endpoint_without_embeddings_fails_at_once(tmp_path):
    with LoopbackChatServer(lambda body: (501, {"error": {"message": "start it with --embeddings"}})) as server:
        with Client(OpenAICompatibleProvider(server.base_url), backoff_initial=0.001) as client:
            result = client.embed(["a"], "emb")
    assert isinstance(result, CallFailure) and result.kind == "unsupported" and "does not serve /v1/embeddings" in result.error
    assert len(server.bodies) == 1


def test_transient_embedding_errors_are_retried():
    replies = [(503, {"error": {"message": "busy"}}), (200, {"object": "list", "model": "m", "data": [
        {"object": "embedding", "index": 0, "embedding": [0.5]}]})]
    with LoopbackChatServer(lambda body: replies.pop(0)) as server:
        with Client(OpenAICompatibleProvider(server.base_url), backoff_initial=0.001, backoff_max=0.01) as client:
            assert client.embed(["a"], "m") == [[0.5]]
            assert client.usage["embedding"].retries == 1


def test_providers_without_embed_and_the_fake_default():
    class ChatOnly:
        endpoint_id = "chat-only"

        async def complete(self, request):  # pragma: no cover - never called
            raise AssertionError

    with Client(ChatOnly()) as client:
        result = client.embed(["a"], "m")
        assert isinstance(result, CallFailure) and "does not serve embeddings" in result.error
        assert client.embed([], "m") == []
    fake = FakeProvider(["x"])
    with Client(fake) as client:
        result = client.embed(["a"], "m")
    assert isinstance(result, CallFailure) and "serves no embeddings" in result.error
    assert fake.embedding_requests == [("a",)] and fake.calls == 0  # chat accounting unchanged


def test_embedding_cache_entries_never_answer_chat_requests(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    fake = FakeProvider(lambda r: "chat answer", embeddings=lambda t: [1.0])
    with Client(fake, cache=cache) as client:
        client.embed(["q"], "m")
        chat = client.complete(ChatRequest(model="m", messages=(Message(role="user", content="q"),)))
    assert chat.text == "chat answer" and not chat.cached and len(cache) == 2
