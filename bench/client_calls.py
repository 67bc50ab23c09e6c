"""CPU per model call spent by ``evolve``'s client and an OpenAI-compatible endpoint on 127.0.0.1.

Sends the same structured judge requests through :class:`evolve.llm.Client` to (a) the fake
provider (no HTTP: the client's own bookkeeping), (b) the loopback endpoint keeping connections
alive (HTTP/1.1, what the tests and real servers do) and (c) the loopback endpoint closing the
connection after every answer (HTTP/1.0), and prints the process's CPU per call (user + system,
client and server together, the server being a thread of this process) and the ratios, measured
in this one run. The endpoint answers at once, so this is the overhead a test or a cache-heavy
run pays per call, not a model's latency.

    python bench/client_calls.py [--calls 400] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from evolve.llm import ChatRequest, Client, FakeProvider, Message, get_provider, response_format
from evolve.testing import LoopbackChatServer

REPLY = json.dumps({"rationale": "the answer states the fact", "score": "2"})


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _requests(n: int, tag: str) -> list[ChatRequest]:
    fmt = response_format_of_a_verdict()
    return [ChatRequest(model="m", tag="judge", response_format=fmt, seed=i,
                        messages=(Message(role="system", content="Judge the answer against the rubric. " * 40),
                                  Message(role="user", content=f"{tag} case {i}: question, answer and statement."))
                        ) for i in range(n)]


def response_format_of_a_verdict() -> dict:
    """The judge's own verdict format for the shipped K-QA criterion (rationale up to 600 characters)."""
    from evolve.judge import verdict_model
    from evolve.rubric import load_rubric

    return response_format(verdict_model(load_rubric("kqa-entailment").criteria[0], 600), "judge_verdict")


def _per_call(client: Client, n: int, tag: str) -> tuple[float, float]:
    """(CPU ms per call, wall s) of ``n`` calls after a warm-up of 20."""
    with client:
        client.map(_requests(20, f"warm-{tag}"))
        start_cpu, start_wall = _cpu(), time.perf_counter()
        results = client.map(_requests(n, tag))
        cpu, wall = _cpu() - start_cpu, time.perf_counter() - start_wall
    assert all(getattr(r, "text", None) == REPLY for r in results), "a call failed"
    return cpu / n * 1000, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    rows = {"fake provider (no HTTP)": _per_call(
        Client(FakeProvider(lambda request: REPLY), max_concurrency=args.concurrency), args.calls, "fake")}
    for name, keep_alive in (("loopback, kept-alive connections", True), ("loopback, a connection per call", False)):
        with LoopbackChatServer(lambda body: REPLY, keep_alive=keep_alive) as server:
            provider = get_provider("openai_compatible", base_url=server.base_url, api_key="bench")
            rows[name] = _per_call(Client(provider, max_concurrency=args.concurrency), args.calls, name)
    base = rows["loopback, kept-alive connections"][0]
    print(f"{args.calls} structured calls at concurrency {args.concurrency}, no response cache")
    print(f"{'':36} {'CPU ms/call':>11} {'wall s':>7} {'CPU vs kept-alive':>17}")
    for name, (ms, wall) in rows.items():
        print(f"{name:36} {ms:11.2f} {wall:7.2f} {ms / base:16.2f}x")


if __name__ == "__main__":
    main()
