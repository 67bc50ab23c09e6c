"""The spending limit (issue 25, item 1b): a call that could take the run past ``max_usd`` or
``max_tokens`` is not sent; cache hits are free and never refused."""

from __future__ import annotations

import pytest

from evolve.errors import ConfigError, RunStoppedError, SpendLimitReachedError
from evolve.llm import (
    CHARS_PER_TOKEN,
    CallFailure,
    ChatRequest,
    Client,
    FakeProvider,
    Message,
    ResponseCache,
    Spend,
    SpendLimit,
    one_call,
    request_chars,
    spend_of_usage,
)
from evolve.runs import Price


def _request(i: int, chars: int = 300, max_tokens: int = 50) -> ChatRequest:
    return ChatRequest(model="m", messages=(Message(role="user", content=f"{i:04d}" + "x" * (chars - 4)),),
                       max_tokens=max_tokens, tag="judge")


def _client(tmp_path, limit: SpendLimit | None, **fake) -> tuple[Client, FakeProvider]:
    provider = FakeProvider(lambda r: "ok", prompt_tokens=100, completion_tokens=20, **fake)
    client = Client(provider, cache=ResponseCache(tmp_path / "c.sqlite"), max_concurrency=1)
    client.spend_limit = limit
    return client, provider


def test_a_token_limit_stops_before_the_call_that_would_pass_it(tmp_path):
    # each call: 100 prompt + 20 completion = 120 tokens; 1,000 tokens allow 8 calls (960), not a 9th
    client, provider = _client(tmp_path, SpendLimit(max_tokens=1000))
    with client:
        for i in range(8):
            client.complete(_request(i))
        with pytest.raises(SpendLimitReachedError, match="--max-tokens 1,000"):
            client.complete(_request(8))
        assert provider.calls == 8
        assert client.spend_limit is not None and client.spend_limit.spent() == Spend(8, 800, 160, 0)
        with pytest.raises(SpendLimitReachedError):  # once reached, every later call is refused too
            client.complete(_request(9, chars=4))
    assert provider.calls == 8


def test_the_stop_is_a_run_stopping_error(tmp_path):
    assert issubclass(SpendLimitReachedError, RunStoppedError)


def test_a_usd_limit_prices_the_calls_and_counts_earlier_processes(tmp_path):
    price = Price(1000.0, 5000.0)  # one call: 100 in ($0.10) + 20 out ($0.10) = $0.20
    before = Spend(calls=2, prompt_tokens=200, completion_tokens=40)  # $0.40 paid by an earlier process
    client, provider = _client(tmp_path, SpendLimit(max_usd=1.0, price=price, before=before))
    with client:
        for i in range(3):
            client.complete(_request(i))
        with pytest.raises(SpendLimitReachedError, match=r"--max-usd 1\b.*\$1.00 spent over 5 paid calls"):
            client.complete(_request(3))
    assert provider.calls == 3


def test_cache_hits_are_free_and_never_refused(tmp_path):
    client, provider = _client(tmp_path, SpendLimit(max_tokens=300))
    with client:
        client.complete(_request(0))
        client.complete(_request(1))
        with pytest.raises(SpendLimitReachedError):
            client.complete(_request(2))
        for i in (0, 1, 0):  # answered before: from the cache, at no cost, even past the limit
            assert client.complete(_request(i)).cached
    assert provider.calls == 2


def test_before_the_first_answer_the_estimate_is_the_prompt_at_3_characters_per_token_and_max_tokens(tmp_path):
    limit = SpendLimit(max_tokens=149)
    # 300 characters / 3 = 100 prompt tokens, + max_tokens 50 = 150 > 149: refused, nothing sent
    client, provider = _client(tmp_path, limit)
    with client, pytest.raises(SpendLimitReachedError):
        client.complete(_request(0, chars=300, max_tokens=50))
    assert provider.calls == 0
    assert CHARS_PER_TOKEN == 3.0
    ok = SpendLimit(max_tokens=150)
    client2, provider2 = _client(tmp_path / "b", ok)
    with client2:
        client2.complete(_request(0, chars=300, max_tokens=50))
    assert provider2.calls == 1


def test_after_answers_the_estimate_uses_the_measured_ratio_and_mean_completion():
    limit = SpendLimit(max_tokens=10_000)
    ticket = limit.reserve(400, 512)
    assert ticket.prompt_tokens == pytest.approx(400 / 3) and ticket.completion_tokens == 512
    limit.settle(ticket, prompt_tokens=100, completion_tokens=30)  # 4 characters per token, 30 out
    ticket = limit.reserve(800, 512)
    assert ticket.prompt_tokens == pytest.approx(200) and ticket.completion_tokens == pytest.approx(30)


def test_calls_in_flight_are_reserved_until_they_end():
    limit = SpendLimit(max_tokens=300)
    first = limit.reserve(300, 50)  # ~150 reserved
    second = limit.reserve(300, 50)  # ~300 reserved: at the limit, not past it
    with pytest.raises(SpendLimitReachedError, match="in flight"):
        limit.reserve(3, 1)
    limit.settle(first, answered=False)
    limit.settle(second, answered=False)
    assert limit.spent() == Spend()  # failed calls reported nothing: counted free


def test_a_failed_call_releases_its_reservation(tmp_path):
    from evolve.errors import EndpointError

    provider = FakeProvider([EndpointError("bad request"), "ok"], prompt_tokens=100, completion_tokens=20)
    client = Client(provider, max_concurrency=1, max_retries=0)
    client.spend_limit = SpendLimit(max_tokens=160)
    with client:
        assert isinstance(client.complete(_request(0)), CallFailure)
        client.complete(_request(1))  # the failure's ~150 reserved tokens were given back
    assert provider.calls == 2
    assert client.spend_limit.spent() == Spend(1, 100, 20, 0)


def test_map_lets_the_calls_already_sent_finish_and_caches_them(tmp_path):
    provider = FakeProvider(lambda r: "ok", prompt_tokens=100, completion_tokens=20)
    cache = ResponseCache(tmp_path / "c.sqlite")
    client = Client(provider, cache=cache, max_concurrency=4)
    client.spend_limit = SpendLimit(max_tokens=1000)
    requests = [_request(i) for i in range(20)]
    with client, pytest.raises(SpendLimitReachedError):
        client.map(requests)
    paid = provider.calls
    assert 1 <= paid <= 8
    resumed = Client(provider, cache=cache, max_concurrency=4)
    with resumed:
        results = resumed.map(requests)
    assert sum(r.cached for r in results) == paid  # every call paid before the stop is a cache hit now
    assert provider.calls == 20  # nothing paid twice


def test_cached_input_and_batch_prices_shape_the_spend_in_usd():
    price = Price(2.0, 8.0, cached_input_usd_per_m=0.5, batch_input_usd_per_m=1.0, batch_output_usd_per_m=4.0)
    spend = one_call(1_000_000, 0, 1_000_000) + one_call(1_000_000, 1_000_000, batch=True)
    assert spend.usd(price) == pytest.approx(0.5 + 1.0 + 4.0)
    assert spend.usd(None) is None


def test_a_usd_limit_without_prices_is_refused_before_any_call():
    with pytest.raises(ConfigError, match="--max-usd 5 needs prices"):
        SpendLimit(max_usd=5)


def test_spend_of_usage_reads_billed_counts_and_estimates_old_journals():
    usage = {
        "judge": {"calls": 3, "cache_hits": 5, "prompt_tokens": 800, "completion_tokens": 80,
                  "billed_prompt_tokens": 300, "billed_completion_tokens": 30, "cached_prompt_tokens": 120},
        "mutation (batch)": {"calls": 1, "billed_prompt_tokens": 50, "billed_completion_tokens": 10},
        "old": {"calls": 1, "cache_hits": 3, "prompt_tokens": 400, "completion_tokens": 40},  # before billed counts
    }
    spend = spend_of_usage(usage)
    assert spend == Spend(calls=5, prompt_tokens=450, completion_tokens=50, cached_prompt_tokens=120,
                          batch_prompt_tokens=50, batch_completion_tokens=10)


def test_request_chars_counts_messages_and_schema():
    request = ChatRequest(model="m", messages=(Message(role="system", content="ab"), Message(role="user", content="cde")),
                          response_format={"type": "json_object"})
    assert request_chars(request) == 5 + len(str({"type": "json_object"}))


def test_a_killed_process_leaves_its_spend_in_the_journal_for_the_next_limit(tmp_path):
    from evolve.runs import Journal, run_usage
    from evolve.runs._client import UsageLedger

    journal = Journal(tmp_path / "journal.jsonl")
    client, _ = _client(tmp_path, None)
    client.on_call_event = UsageLedger(journal, client)  # what a run's own client journals as it goes
    with client:
        for i in range(3):
            client.complete(_request(i))
        client.complete(_request(0))  # a cache hit: free
    # no final usage snapshot (as after kill -9): the per-call events alone carry the spend
    assert not any(e["event"] == "usage" for e in journal.events())
    before = spend_of_usage(run_usage(journal))
    assert before == Spend(3, 300, 60, 0)
    limit = SpendLimit(max_tokens=3 * 120 + 100, before=before)
    with pytest.raises(SpendLimitReachedError, match="360 tokens spent over 3 paid calls"):
        limit.reserve(300, 50)
