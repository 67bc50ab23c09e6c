"""Several replicas behind one RoutingProvider: affinity, the rendezvous split, failover, shared cache."""

from __future__ import annotations

import socket
from collections import Counter
from pathlib import Path

import pytest

from evolve.errors import ConfigError, EndpointUnreachableError
from evolve.llm import (
    ChatRequest,
    ChatResponse,
    Client,
    Message,
    OpenAICompatibleProvider,
    ResponseCache,
    RoutingProvider,
    rendezvous_ranking,
    routing_key,
)
from evolve.testing import LoopbackChatServer, chat_completion


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _request(case: int, target: int, criterion: int, *, affinity: bool = True) -> ChatRequest:
    user = f"CASE {case}\n" + "x" * 40 + f"\nTARGET {target}\nCRITERION {criterion}"
    return ChatRequest(
        model="m", seed=criterion,
        messages=(Message(role="system", content="judge"), Message(role="user", content=user)),
        affinity=f"case{case}/target{target}" if affinity else "",
    )


def _case_target(body: dict) -> str:
    lines = body["messages"][1]["content"].splitlines()
    return f"{lines[0]}/{lines[2]}"


class _Replicas:
    """``n`` loopback servers answering every request, remembering which (case, target) each saw."""

    def __init__(self, n: int) -> None:
        self.servers = [LoopbackChatServer(lambda body: chat_completion_reply(body)) for _ in range(n)]

    @property
    def urls(self) -> list[str]:
        return [s.base_url for s in self.servers]

    def seen(self) -> dict[str, set[str]]:
        """``{case/target: {server URL, ...}}`` over every request received."""
        out: dict[str, set[str]] = {}
        for server in self.servers:
            for body in server.bodies:
                out.setdefault(_case_target(body), set()).add(server.base_url)
        return out

    def close(self) -> None:
        for server in self.servers:
            server.close()


def chat_completion_reply(body: dict) -> tuple[int, dict]:
    return 200, chat_completion("ok", prompt_tokens=100, completion_tokens=5, cached_tokens=60)


@pytest.fixture
def replicas3():
    group = _Replicas(3)
    yield group
    group.close()


def _group(urls: list[str], **kwargs) -> RoutingProvider:
    return RoutingProvider([OpenAICompatibleProvider(u, timeout=10) for u in urls], endpoint_id="group:m", **kwargs)


def test_affinity_is_not_part_of_the_cache_key() -> None:
    a, b = _request(1, 1, 1), _request(1, 1, 1).model_copy(update={"affinity": "elsewhere"})
    assert a.cache_key("e") == b.cache_key("e")
    assert routing_key(a) != routing_key(b)


def test_without_affinity_the_key_is_the_shared_prefix() -> None:
    one = _request(1, 1, 1, affinity=False)
    same_case_other_criterion = _request(1, 1, 2, affinity=False)
    other_case = _request(2, 1, 1, affinity=False)
    # the criterion sits past the first PREFIX_CHARS? no: this prompt is short, so it is part of the prefix
    assert routing_key(one) != routing_key(other_case)
    long = ChatRequest(model="m", messages=(Message(role="system", content="s"),
                                            Message(role="user", content="C" * 3000 + "criterion A")))
    long2 = long.model_copy(update={"messages": (long.messages[0], Message(role="user", content="C" * 3000 + "B"))})
    assert routing_key(long) == routing_key(long2)  # what follows the shared prefix does not move a call
    assert routing_key(one) == routing_key(_request(1, 1, 1, affinity=False))
    assert routing_key(same_case_other_criterion).startswith("prefix:")


def test_rendezvous_ranking_ignores_the_listed_order_and_moves_only_a_removed_replicas_keys() -> None:
    names = ["http://a/v1", "http://b/v1", "http://c/v1"]
    keys = [f"k{i}" for i in range(3000)]
    first = {k: names[rendezvous_ranking(k, names)[0]] for k in keys}
    shuffled = [names[2], names[0], names[1]]
    assert first == {k: shuffled[rendezvous_ranking(k, shuffled)[0]] for k in keys}
    counts = Counter(first.values())
    assert all(900 <= n <= 1100 for n in counts.values()), counts  # 1000 expected each; binomial sd ~26
    without_b = [names[0], names[2]]
    after = {k: without_b[rendezvous_ranking(k, without_b)[0]] for k in keys}
    moved = [k for k in keys if after[k] != first[k]]
    assert moved and all(first[k] == "http://b/v1" for k in moved)
    assert len(moved) == counts["http://b/v1"]


def test_calls_sharing_a_case_and_target_land_on_their_rendezvous_replica(replicas3, tmp_path: Path) -> None:
    requests = [_request(c, t, k) for c in range(20) for t in range(3) for k in range(4)]
    with Client(_group(replicas3.urls), cache=ResponseCache(tmp_path / "c.sqlite"), max_concurrency=4) as client:
        results = client.map(requests)
        by_endpoint = client.endpoint_usage_snapshot()
        total = client.total_usage()
    assert all(isinstance(r, ChatResponse) for r in results)
    seen = replicas3.seen()
    assert len(seen) == 60 and all(len(urls) == 1 for urls in seen.values())
    per_server = [len(s.bodies) for s in replicas3.servers]
    # each (case, target) key went to its rendezvous first choice among these URLs (their ports are
    # random, so the split differs run to run; evenness over many keys is checked above)
    first_choice = Counter(rendezvous_ranking(f"case{c}/target{t}", replicas3.urls)[0] for c in range(20) for t in range(3))
    assert per_server == [4 * first_choice[i] for i in range(3)] and min(per_server) > 0, per_server
    # usage per endpoint adds up to the total
    assert set(by_endpoint) == set(replicas3.urls)
    assert sum(u["calls"] for u in by_endpoint.values()) == total.calls == 240
    assert sum(u["prompt_tokens"] for u in by_endpoint.values()) == total.prompt_tokens == 24_000
    assert {u: by_endpoint[u]["calls"] for u in replicas3.urls} == dict(zip(replicas3.urls, per_server))
    assert {r.endpoint for r in results} == set(replicas3.urls)


def test_the_cache_is_shared_a_rerun_with_the_replicas_reordered_pays_nothing(replicas3, tmp_path: Path) -> None:
    requests = [_request(c, t, 0) for c in range(10) for t in range(2)]
    cache = tmp_path / "c.sqlite"
    with Client(_group(replicas3.urls), cache=ResponseCache(cache)) as client:
        client.map(requests)
    paid = sum(len(s.bodies) for s in replicas3.servers)
    with Client(_group(list(reversed(replicas3.urls))), cache=ResponseCache(cache)) as client:
        results = client.map(requests)
        assert client.total_usage().calls == 0 and client.total_usage().cache_hits == 20
    assert all(r.cached for r in results)
    assert sum(len(s.bodies) for s in replicas3.servers) == paid == 20


def test_killing_a_replica_moves_only_its_keys_and_the_run_completes(replicas3, tmp_path: Path) -> None:
    first = [_request(c, t, 0) for c in range(30) for t in range(2)]
    warnings: list[tuple[str, str]] = []
    provider = _group(replicas3.urls, on_out=lambda r, why: warnings.append((r, why)))
    with Client(provider, max_retries=2, backoff_initial=0.01, max_concurrency=2) as client:
        client.map(first)
        before = {k: next(iter(v)) for k, v in replicas3.seen().items()}
        dead = replicas3.servers[1]
        dead.close()
        second = [_request(c, t, 1) for c in range(30) for t in range(2)]
        results = client.map(second)
        failures = client.total_usage().failures
    assert all(isinstance(r, ChatResponse) for r in results) and failures == 0
    assert [w[0] for w in warnings] == [dead.base_url]
    after = {r.endpoint for r in results}
    assert dead.base_url not in after
    moved = 0
    for req, res in zip(second, results):
        case, target = (part.removeprefix("case").removeprefix("target") for part in req.affinity.split("/"))
        held = before[f"CASE {case}/TARGET {target}"]
        if held == dead.base_url:
            moved += 1  # the dead replica's keys went to their second choice
        else:
            assert res.endpoint == held  # a live replica's keys stay where they were
    assert moved > 0


def test_every_replica_out_stops_the_run_as_one_endpoint_does() -> None:
    urls = [f"http://127.0.0.1:{_closed_port()}/v1" for _ in range(2)]
    requests = [_request(c, 0, 0) for c in range(20)]
    with Client(_group(urls), max_retries=3, backoff_initial=0.01, max_concurrency=1) as client:
        with pytest.raises(EndpointUnreachableError, match="every replica"):
            client.map(requests)


def test_a_replica_back_after_its_cooldown_is_asked_again() -> None:
    now = [0.0]
    answers = {"ok": True}
    server = LoopbackChatServer(lambda body: "fine" if answers["ok"] else (503, {"error": {"message": "busy"}}))
    other = LoopbackChatServer(lambda body: "other")
    try:
        provider = _group([server.base_url, other.base_url], cooldown_s=10, clock=lambda: now[0])
        key_for_server = next(c for c in range(100)
                              if rendezvous_ranking(f"case{c}/target0", provider.names)[0] == 0)
        req = _request(key_for_server, 0, 0)
        with Client(provider, max_retries=2, backoff_initial=0.01) as client:
            answers["ok"] = False
            assert client.complete(req).text == "other"  # two 503s in a row: out, rerouted
            assert provider.out_until == {0: 10.0}
            answers["ok"] = True
            assert client.complete(req.model_copy(update={"seed": 7})).text == "other"  # still out
            now[0] = 11.0
            assert client.complete(req.model_copy(update={"seed": 8})).text == "fine"  # back
    finally:
        server.close()
        other.close()


def test_a_group_refuses_no_replica_and_a_replica_listed_twice() -> None:
    with pytest.raises(ConfigError):
        RoutingProvider([], endpoint_id="g")
    with pytest.raises(ConfigError, match="twice"):
        _group(["http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1"])


def test_otb_generation_and_judge_requests_carry_their_routing_keys(tmp_path: Path) -> None:
    """OpenTumorBoard: generation keyed by the recorded case, the judge by the item."""
    from evolve.llm import FakeProvider
    from evolve.otb import generate_otb, judge_otb
    from tests.otb.test_records_extract import BOARD, TURN
    from tests.otb.test_run_judge import Endpoint, _config
    from tests.otb.test_run_judge import files as files_fixture

    files = files_fixture.__wrapped__(tmp_path)  # the fixture's function
    provider = FakeProvider(Endpoint())
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        config = _config(tmp_path, files)
        generate_otb(config, client=client)
        judge_otb(config.run_dir, client=client)
    generation = [r for r in provider.requests if r.tag in ("otb_board", "otb_turn")]
    assert {r.affinity for r in generation} == {BOARD["case_id"], TURN["case_id"], "case-B"}  # the recorded cases
    judged = [r for r in provider.requests if r.tag == "otb_judge"]
    board = [r for r in judged if r.response_format["json_schema"]["name"] in ("conclusion_alignment", "four_decisions")]
    assert {r.affinity for r in board} == {"sim-001"}  # both rubrics of the one board answer judged: one replica
    assert {r.affinity for r in judged} - {"sim-001"} == {"qa-001", "qa-002", "qa-003"}  # each turn item its own key


def test_a_group_embeds_on_one_replica_and_falls_over_when_it_is_gone(tmp_path: Path) -> None:
    """The drift audit's embeddings go through the group as its chat calls do: to the replica
    ranked first for the model, to the next one when that one is gone."""
    def respond(body: dict):
        if "input" in body:  # POST /v1/embeddings
            data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(body["input"])]
            return 200, {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        return 200, chat_completion("ok")

    servers = [LoopbackChatServer(respond) for _ in range(2)]
    try:
        group = _group([s.base_url for s in servers], failures_to_out=1)
        client = Client(group, cache=ResponseCache(tmp_path / "cache.sqlite"), backoff_initial=0.01)
        assert client.embed(["ab", "abc"], model="m") == [[2.0, 1.0], [3.0, 1.0]]
        (first,) = [s for s in servers if s.bodies]
        first.close()
        assert client.embed(["abcd"], model="m") == [[4.0, 1.0]]  # the other replica, after the first failed
        (second,) = [s for s in servers if s is not first]
        assert [b["input"] for b in second.bodies] == [["abcd"]]
        assert client.usage["embedding"].calls == 2 and client.usage["embedding"].failures == 0
        client.close()
    finally:
        for server in servers:
            server.close()
