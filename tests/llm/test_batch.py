"""The Batch API path of the client, against the loopback server's fake batch endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from evolve.llm import (
    BatchOptions,
    ChatRequest,
    ChatResponse,
    Client,
    MemoryBatchLedger,
    Message,
    OpenAICompatibleProvider,
    ResponseCache,
    batch_line,
    batch_tag,
    read_output_lines,
    request_lines,
    response_format,
)
from evolve.llm._batch import _chunks
from evolve.testing import BatchScript, LoopbackChatServer


class Verdict(BaseModel):
    score: int


def _requests(n: int, *, structured: bool = False, tag: str = "judge") -> list[ChatRequest]:
    fmt = response_format(Verdict, "verdict") if structured else None
    return [ChatRequest(model="m", messages=(Message(role="user", content=f"question {i}"),), seed=i, tag=tag,
                        response_format=fmt) for i in range(n)]


def _echo(body: dict) -> str:
    return "answer to " + body["messages"][0]["content"]


def _client(server: LoopbackChatServer, tmp_path: Path, ledger=None, **kw) -> Client:
    client = Client(OpenAICompatibleProvider(server.base_url, api_key="sk-test-secret-key-123456"),
                    cache=ResponseCache(tmp_path / "cache.sqlite"), backoff_initial=0.01, backoff_max=0.02)
    client.batch = BatchOptions(ledger=ledger, poll_initial_s=0.01, poll_max_s=0.02, **kw)
    return client


def test_batch_line_body_is_the_interactive_body(tmp_path: Path) -> None:
    seen: list[dict] = []
    with LoopbackChatServer(lambda body: seen.append(body) or "x") as server:
        provider = OpenAICompatibleProvider(server.base_url, schema_limits=False)
        request = _requests(1, structured=True)[0]
        Client(provider).complete(request)
        line = batch_line(provider, request)
    assert line["body"] == seen[0]
    assert line["custom_id"] == request.cache_key(provider.endpoint_id)
    assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
    # identical requests make one line
    assert len(request_lines(provider, [request, request])) == 1


def test_batch_answers_every_request_and_caches_under_the_interactive_key(tmp_path: Path) -> None:
    requests = _requests(5)
    with LoopbackChatServer(_echo) as server:
        client = _client(server, tmp_path)
        results = client.map(requests + requests[:1], batchable=True)
        assert [r.text for r in results] == [f"answer to question {i}" for i in [0, 1, 2, 3, 4, 0]]
        assert len(server.batches) == 1 and len(server.batch_lines) == 5
        assert server.bodies == []  # nothing interactive
        usage = client.usage_snapshot()
        assert usage[batch_tag("judge")]["calls"] == 5
        assert usage["judge"]["cache_hits"] == 1  # the duplicate shares the first answer
        client.close()
        # a later interactive run of the same requests pays nothing
        again = Client(OpenAICompatibleProvider(server.base_url), cache=ResponseCache(tmp_path / "cache.sqlite"))
        assert [r.cached for r in again.map(requests)] == [True] * 5
        again.close()
    assert server.bodies == []


def test_cached_requests_are_never_sent(tmp_path: Path) -> None:
    requests = _requests(4)
    with LoopbackChatServer(_echo) as server:
        first = Client(OpenAICompatibleProvider(server.base_url), cache=ResponseCache(tmp_path / "cache.sqlite"))
        first.map(requests[:2])
        first.close()
        client = _client(server, tmp_path)
        client.map(requests, batchable=True)
        client.close()
    assert len(server.bodies) == 2
    sent = {line["body"]["messages"][0]["content"] for line in server.batch_lines}
    assert sent == {"question 2", "question 3"}


def test_in_progress_then_completed_polls_with_notes(tmp_path: Path) -> None:
    notes: list[str] = []
    with LoopbackChatServer(_echo, BatchScript(polls_in_progress=3)) as server:
        client = _client(server, tmp_path, on_note=notes.append)
        results = client.map(_requests(3), batchable=True)
        client.close()
    assert all(isinstance(r, ChatResponse) for r in results)
    assert any("in_progress" in n for n in notes) and any("completed" in n for n in notes)
    assert server.bodies == []


def test_partial_failure_lines_are_retried_interactively(tmp_path: Path) -> None:
    script = BatchScript(polls_in_progress=0, fail=lambda body: body["messages"][0]["content"] in ("question 1", "question 3"))
    with LoopbackChatServer(_echo, script) as server:
        client = _client(server, tmp_path)
        results = client.map(_requests(5), batchable=True)
        usage = client.usage_snapshot()
        client.close()
    assert [r.text for r in results] == [f"answer to question {i}" for i in range(5)]
    assert sorted(b["messages"][0]["content"] for b in server.bodies) == ["question 1", "question 3"]
    assert usage[batch_tag("judge")]["calls"] == 3 and usage["judge"]["calls"] == 2


def test_expired_lines_are_retried_interactively(tmp_path: Path) -> None:
    ledger = MemoryBatchLedger()
    with LoopbackChatServer(_echo, BatchScript(outcome="expired", answered_before_expiry=2)) as server:
        client = _client(server, tmp_path, ledger=ledger)
        results = client.map(_requests(5), batchable=True)
        client.close()
    assert [r.text for r in results] == [f"answer to question {i}" for i in range(5)]
    assert len(server.batch_answered) == 2 and len(server.bodies) == 3
    assert list(ledger.done.values()) == ["expired"]


def test_failed_batch_goes_interactive(tmp_path: Path) -> None:
    with LoopbackChatServer(_echo, BatchScript(outcome="failed")) as server:
        client = _client(server, tmp_path)
        results = client.map(_requests(3), batchable=True)
        client.close()
    assert all(isinstance(r, ChatResponse) for r in results) and len(server.bodies) == 3


def test_answers_outside_the_schema_are_returned_not_cached(tmp_path: Path) -> None:
    with LoopbackChatServer(lambda body: '{"score": "high"}') as server:
        client = _client(server, tmp_path)
        results = client.map(_requests(2, structured=True), batchable=True)
        client.close()
        assert [r.text for r in results] == ['{"score": "high"}'] * 2
        assert len(ResponseCache(tmp_path / "cache.sqlite")) == 0


def test_secrets_echoed_in_batch_answers_are_scrubbed(tmp_path: Path) -> None:
    with LoopbackChatServer(lambda body: "key sk-test-secret-key-123456 seen") as server:
        client = _client(server, tmp_path)
        (result,) = client.map(_requests(1), batchable=True)
        client.close()
    assert "sk-test-secret" not in result.text and "[redacted]" in result.text


def test_resume_polls_the_journaled_batch_instead_of_submitting(tmp_path: Path) -> None:
    """A process that submitted and died (simulated: the ledger holds the batch, nothing cached):
    the next run polls that batch; no line is submitted or answered twice."""
    ledger = MemoryBatchLedger()
    requests = _requests(4)
    with LoopbackChatServer(_echo, BatchScript(hold=True)) as server:
        provider = OpenAICompatibleProvider(server.base_url)
        lines = request_lines(provider, requests)
        data = "".join(json.dumps(x) + "\n" for x in lines).encode()
        import openai

        api = openai.OpenAI(base_url=server.base_url, api_key="x")
        batch = api.batches.create(input_file_id=api.files.create(file=("b.jsonl", data), purpose="batch").id,
                                   endpoint="/v1/chat/completions", completion_window="24h")
        ledger.submitted(batch.id, [x["custom_id"] for x in lines])
        server.batch_script.hold = False
        client = _client(server, tmp_path, ledger=ledger)
        results = client.map(requests, batchable=True)
        client.close()
    assert [r.text for r in results] == [f"answer to question {i}" for i in range(4)]
    assert len(server.batches) == 1 and server.bodies == []
    assert sorted(server.batch_answered) == sorted(x["custom_id"] for x in lines)
    assert ledger.pending() == []


def _upload(server: LoopbackChatServer, requests: list[ChatRequest]) -> tuple[object, str, list[str]]:
    """Upload ``requests``' input file as a process would: the API, the file id, the custom ids."""
    import openai

    lines = request_lines(OpenAICompatibleProvider(server.base_url), requests)
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    api = openai.OpenAI(base_url=server.base_url, api_key="x")
    return api, api.files.create(file=("b.jsonl", data), purpose="batch").id, [x["custom_id"] for x in lines]


@pytest.mark.parametrize("created", [True, False])
def test_a_process_killed_while_its_batch_was_created_pays_nothing_twice(tmp_path: Path, created: bool) -> None:
    """The ledger holds an uploaded file and no batch (the process died inside the create call):
    the next run finds the batch the endpoint made from that file (created) or, if the endpoint
    never made it, creates it from the file; either way one batch, every line answered once."""
    ledger = MemoryBatchLedger()
    requests = _requests(3)
    notes: list[str] = []
    with LoopbackChatServer(_echo) as server:
        other = _client(server, tmp_path / "other", ledger=MemoryBatchLedger())  # someone else's batch, listed too
        other.map(_requests(2, tag="other"), batchable=True)
        other.close()
        api, file_id, custom_ids = _upload(server, requests)
        ledger.uploaded(file_id, custom_ids)
        if created:
            api.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
        before = len(server.batches)
        client = _client(server, tmp_path, ledger=ledger, on_note=notes.append)
        results = client.map(requests, batchable=True)
        client.close()
    assert [r.text for r in results] == [f"answer to question {i}" for i in range(3)]
    assert len(server.batches) == before + (0 if created else 1) and server.bodies == []
    ours = [b for b in server.batches.values() if b["input_file_id"] == file_id]
    assert len(ours) == 1 and [server.batch_answered.count(c) for c in custom_ids] == [1, 1, 1]
    assert ledger.unclaimed() == [] and ledger.pending() == []
    assert any("recorded after an interruption" in n for n in notes)


def test_a_batch_the_endpoint_does_not_know_is_asked_again(tmp_path: Path) -> None:
    ledger = MemoryBatchLedger()
    requests = _requests(2)
    with LoopbackChatServer(_echo) as server:
        provider = OpenAICompatibleProvider(server.base_url)
        ledger.submitted("batch-gone", [r.cache_key(provider.endpoint_id) for r in requests])
        client = _client(server, tmp_path, ledger=ledger)
        results = client.map(requests, batchable=True)
        client.close()
    assert all(isinstance(r, ChatResponse) for r in results)
    assert ledger.done["batch-gone"] == "lost" and len(server.bodies) == 2


def test_an_endpoint_without_a_batch_api_gets_the_calls_interactively(tmp_path: Path) -> None:
    notes: list[str] = []
    with LoopbackChatServer(_echo, BatchScript(served=False)) as server:
        client = _client(server, tmp_path, on_note=notes.append)
        results = client.map(_requests(2), batchable=True)
        client.close()
    assert [r.text for r in results] == ["answer to question 0", "answer to question 1"]
    assert len(server.bodies) == 2 and any("no Batch API" in n for n in notes)


def test_not_batchable_stays_interactive(tmp_path: Path) -> None:
    with LoopbackChatServer(_echo) as server:
        client = _client(server, tmp_path)
        client.map(_requests(2))
        client.close()
    assert len(server.bodies) == 2 and not server.batches


def test_chunks_respect_lines_and_bytes() -> None:
    lines = [(str(i), "x" * 9) for i in range(7)]
    assert [len(c) for c in _chunks(lines, 3, 10**6)] == [3, 3, 1]
    assert [len(c) for c in _chunks(lines, 100, 25)] == [2, 2, 2, 1]


def test_read_output_lines_forms() -> None:
    text = "\n".join([
        json.dumps({"custom_id": "a", "response": {"status_code": 200, "body": {"x": 1}}, "error": None}),
        json.dumps({"custom_id": "b", "response": None, "error": {"code": "batch_expired", "message": "late"}}),
        json.dumps({"custom_id": "c", "response": {"status_code": 500, "body": {"error": {"message": "boom"}}}}),
        "not json", json.dumps({"no": "id"}),
    ])
    lines = list(read_output_lines(text))
    assert [(x.custom_id, x.body is not None, x.number) for x in lines] == [
        ("a", True, 1), ("b", False, 2), ("c", False, 3), ("", False, 4), ("", False, 5)]
    assert "batch_expired" in lines[1].error and "HTTP 500" in lines[2].error and "boom" in lines[2].error
    assert lines[3].error.startswith("not JSON") and lines[4].error == "not a JSON object with a custom_id"


@pytest.mark.parametrize("size", [0])
def test_empty_list(tmp_path: Path, size: int) -> None:
    with LoopbackChatServer(_echo) as server:
        client = _client(server, tmp_path)
        assert client.map([], batchable=True) == []
        client.close()
    assert not server.batches


def test_a_batch_that_could_pass_the_spending_limit_is_not_sent(tmp_path: Path) -> None:
    from evolve.errors import SpendLimitReachedError
    from evolve.llm import SpendLimit

    with LoopbackChatServer(_echo) as server:
        client = _client(server, tmp_path)
        client.spend_limit = SpendLimit(max_tokens=100)  # 5 lines of ~1024 output tokens each: far past it
        with pytest.raises(SpendLimitReachedError):
            client.map(_requests(5), batchable=True)
        client.close()
    assert not server.batches and not server.bodies  # refused before the batch was created


def test_batch_answers_are_charged_at_batch_prices_under_the_limit(tmp_path: Path) -> None:
    from evolve.llm import SpendLimit

    requests = [r.model_copy(update={"max_tokens": 20}) for r in _requests(3)]
    with LoopbackChatServer(_echo, BatchScript(polls_in_progress=0)) as server:
        client = _client(server, tmp_path)
        client.spend_limit = limit = SpendLimit(max_tokens=10_000)
        client.map(requests, batchable=True)
        client.close()
    spent = limit.spent()
    # the loopback answers 50 prompt and 10 completion tokens per line
    assert (spent.calls, spent.batch_prompt_tokens, spent.batch_completion_tokens) == (3, 150, 30)
    assert limit.reached is None and not limit._in_flight
