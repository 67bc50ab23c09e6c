"""A provider's own secrets (its key, header values, credentials in its URL) never come back
in a text it returns: errors, replies and reasoning are scrubbed before anyone records them."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from evolve.errors import EndpointUnreachableError
from evolve.llm import ChatRequest, ChatResponse, Client, Message, OpenAICompatibleProvider, ResponseCache
from evolve.llm._secrets import MIN_SECRET_CHARS, REDACTED, Scrubber
from evolve.testing import LoopbackChatServer, chat_completion

KEY = "sk-unit-echo-7f3a9c1e5b2d4f6a8c0e"


def test_a_secret_is_replaced_in_every_spelling_an_echo_may_use() -> None:
    secret = "abc/def+ghi=jkl\"mn"  # characters that URLs, JSON and Python literals escape
    scrub = Scrubber([secret])
    for spelling in (secret, quote(secret, safe=""), json.dumps(secret)[1:-1], repr(secret)[1:-1]):
        assert scrub(f"before {spelling} after") == f"before {REDACTED} after"
    assert scrub("nothing to hide here") == "nothing to hide here"
    assert scrub("") == ""


def test_short_values_are_not_secrets_so_placeholders_stay_in_model_text() -> None:
    placeholders = ["x", "EMPTY", "ollama", "lm-studio", "not-needed", "a" * (MIN_SECRET_CHARS - 1), "   "]
    scrub = Scrubber([*placeholders, None, ""])
    assert not scrub and scrub.count == 0
    text = "x marks EMPTY ollama lm-studio not-needed"
    assert scrub(text) == text
    assert Scrubber(["a" * MIN_SECRET_CHARS])("key aaaaaaaaaaaa") == f"key {REDACTED}"


def test_a_longer_secret_is_blanked_whole_when_it_contains_a_shorter_one() -> None:
    scrub = Scrubber(["token-0123456789", "token-0123456789-extended"])
    assert scrub("got token-0123456789-extended") == f"got {REDACTED}"


def test_the_endpoint_secrets_are_the_key_the_header_values_and_url_credentials() -> None:
    scrub = Scrubber.for_endpoint(
        api_key=KEY,
        headers={"api-key": "azure-0123456789abcdef", "X-Proxy-Auth": "Bearer proxy-token-0123456789", "X-Title": "ab"},
        base_url="https://user:url-password-0123@host.example/v1?api-version=2024-02-15-preview&api-key=query-key-0123456789",
    )
    text = ("Authorization: Bearer sk-unit-echo-7f3a9c1e5b2d4f6a8c0e; api-key: azure-0123456789abcdef; "
            "proxy-token-0123456789; url-password-0123; query-key-0123456789; api-version=2024-02-15-preview")
    out = scrub(text)
    for secret in (KEY, "azure-0123456789abcdef", "proxy-token-0123456789", "url-password-0123", "query-key-0123456789"):
        assert secret not in out
    assert out.count(REDACTED) == 5 and "2024-02-15-preview" in out  # a version parameter is no credential


def test_the_endpoint_id_of_a_url_with_a_key_in_it_holds_no_key() -> None:
    provider = OpenAICompatibleProvider("http://127.0.0.1:9/v1?api-key=query-key-0123456789")
    assert provider.endpoint_id == f"http://127.0.0.1:9/v1?api-key={REDACTED}"
    plain = OpenAICompatibleProvider("http://127.0.0.1:9/v1/", api_key=KEY)
    assert plain.endpoint_id == "http://127.0.0.1:9/v1"  # unchanged, so existing caches still match


def _echoing_server(status: int, *, reasoning: bool = False) -> LoopbackChatServer:
    """An endpoint that quotes the Authorization header it received: in an error body of
    ``status``, or (status 200) in the reply and its reasoning."""
    server: LoopbackChatServer

    def respond(body: dict):
        auth = server.authorizations[-1]
        if status != 200:
            return status, {"error": {"message": f"bad request; headers were Authorization: {auth}"}}
        payload = chat_completion(f"you sent {auth}")
        if reasoning:
            payload["choices"][0]["message"]["reasoning_content"] = f"the header said {auth}"
        return 200, payload

    server = LoopbackChatServer(respond)
    return server


def _ask(client: Client, text: str = "hello"):
    return client.complete(ChatRequest(model="m", messages=(Message(role="user", content=text),)))


@pytest.mark.parametrize("status", [400, 401, 404, 422, 500, 503])
def test_an_error_that_echoes_the_header_comes_back_without_the_key(status: int) -> None:
    with _echoing_server(status) as server, Client(
        OpenAICompatibleProvider(server.base_url, api_key=KEY), max_retries=1, backoff_initial=0.01
    ) as client:
        failure = _ask(client)
    assert server.authorizations[0] == f"Bearer {KEY}"  # the key was sent ...
    assert KEY not in failure.error and f"Bearer {REDACTED}" in failure.error  # ... and never came back
    assert f"HTTP {status}" in failure.error


def test_an_embedding_error_that_echoes_the_header_comes_back_without_the_key() -> None:
    with _echoing_server(404) as server, Client(OpenAICompatibleProvider(server.base_url, api_key=KEY)) as client:
        failure = client.embed(["a"], "m")
    assert failure.kind == "unsupported" and KEY not in failure.error and REDACTED in failure.error


def test_a_reply_and_its_reasoning_that_echo_the_header_are_cached_without_the_key(tmp_path) -> None:
    cache_path = tmp_path / "cache.sqlite"
    with _echoing_server(200, reasoning=True) as server, Client(
        OpenAICompatibleProvider(server.base_url, api_key=KEY), cache=ResponseCache(cache_path)
    ) as client:
        reply = _ask(client)
    assert reply.text == f"you sent Bearer {REDACTED}" and reply.reasoning == f"the header said Bearer {REDACTED}"
    for path in tmp_path.iterdir():  # the SQLite file and its journal files, byte by byte
        assert KEY.encode() not in path.read_bytes(), path.name


def test_the_error_that_stops_a_run_holds_no_key_of_its_url() -> None:
    url = "http://127.0.0.1:9/v1?token=query-key-0123456789"  # port 9 (discard): nobody answers
    with Client(OpenAICompatibleProvider(url, timeout=2), max_retries=0, max_unreachable=1) as client:
        with pytest.raises(EndpointUnreachableError) as info:
            _ask(client)
    assert "query-key-0123456789" not in str(info.value) and REDACTED in str(info.value)


def test_an_error_is_not_chained_to_the_sdk_error_that_quotes_the_answer_unscrubbed() -> None:
    import anyio

    from evolve.errors import EndpointError

    with _echoing_server(400) as server:
        provider = OpenAICompatibleProvider(server.base_url, api_key=KEY)
        request = ChatRequest(model="m", messages=(Message(role="user", content="q"),))
        with pytest.raises(EndpointError) as info:
            anyio.run(provider.complete, request)
    assert info.value.__cause__ is None and info.value.__suppress_context__  # a traceback prints no key
    assert KEY not in str(info.value)


def test_a_key_stored_in_an_older_cache_is_replaced_when_the_answer_is_replayed(tmp_path) -> None:
    request = ChatRequest(model="m", messages=(Message(role="user", content="q"),))
    provider = OpenAICompatibleProvider("http://127.0.0.1:9/v1", api_key=KEY)  # never reached: the answer is cached
    cache = ResponseCache(tmp_path / "cache.sqlite")
    cache.put(request.cache_key(provider.endpoint_id), ChatResponse(text=f"echo {KEY}", reasoning=f"saw {KEY}"))
    with Client(provider, cache=cache) as client:
        reply = _ask(client, "q")
    assert reply.cached and reply.text == f"echo {REDACTED}" and reply.reasoning == f"saw {REDACTED}"
