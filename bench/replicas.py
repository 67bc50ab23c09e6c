"""Prefix reuse over several replicas: affinity routing against round robin, on loopback servers.

Usage::

    python bench/replicas.py                       # 3 replicas, 20 cases x 5 targets x 9 criteria x 2 candidates
    python bench/replicas.py --cache-prompts 128   # servers that remember more
    python bench/replicas.py --replicas 4 --cases 60

The world (all invented, no model): ``--replicas`` real OpenAI-compatible HTTP servers on
127.0.0.1 (:class:`evolve.testing.LoopbackChatServer`), each with a *simulated* prefix cache: it
keeps the last ``--cache-prompts`` prompts it served and reports as ``cached_tokens`` the longest
prefix a new prompt shares with one of them (4 characters a token), as vLLM's automatic prefix
caching and llama-server's slots do in spirit (their eviction is by memory, not by count).
The calls are shaped like a calibration's judge calls - a protocol system message, then the case,
the target, the criterion and the guidance - and leave in the order a calibration sends them
(per criterion, items grouped by case, cut into ``--concurrency`` lanes interleaved call by
call: :mod:`evolve.calibration._order`).

The same calls go through :class:`evolve.llm.Client` four ways: ``affinity: case`` (the
:class:`~evolve.llm.RoutingProvider` keyed by the case, as the judges do), ``affinity:
case+target`` (keyed by the case and the target), ``round robin`` (each call to the next replica
in turn, what a plain load balancer does) and ``one server`` (all calls to one replica).
Printed: the share of prompt tokens served from the prefix cache, the calls per replica, and
paired differences of the case key against round robin and against the case+target key, per
criterion, with a 95% t interval over the criteria. A simulation: it shows which routing keeps
prefixes together, not what a real server's cache will hold.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from evolve.calibration._order import interleave, lane_runs
from evolve.llm import ChatRequest, ChatResponse, Client, Message, OpenAICompatibleProvider, ResponseCache, RoutingProvider
from evolve.testing import LoopbackChatServer, chat_completion

CHARS_PER_TOKEN = 4
T975 = {2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
"""Two-sided 95% Student t quantiles by degrees of freedom (more: the normal 1.96, a little narrow)."""


class PrefixServer:
    """A loopback server remembering its last ``size`` prompts; ``cached_tokens`` = the longest
    prefix a prompt shares with one of them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()
        self.server = LoopbackChatServer(self._respond)

    def _respond(self, body: dict) -> tuple[int, dict]:
        prompt = "".join(m["content"] for m in body["messages"])
        with self.lock:
            shared = max((_common(prompt, p) for p in self.seen), default=0)
            self.seen[prompt] = None
            self.seen.move_to_end(prompt)
            while len(self.seen) > self.size:
                self.seen.popitem(last=False)
        return 200, chat_completion('{"score": "1"}', prompt_tokens=len(prompt) // CHARS_PER_TOKEN,
                                    cached_tokens=shared // CHARS_PER_TOKEN, completion_tokens=8)


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class RoundRobin:
    """Each call to the next replica in turn (a plain load balancer)."""

    def __init__(self, replicas: list[OpenAICompatibleProvider]) -> None:
        self.replicas = replicas
        self.endpoint_id = "round-robin"
        self._next = itertools.cycle(range(len(replicas)))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        i = next(self._next)
        response = await self.replicas[i].complete(request)
        return response.model_copy(update={"endpoint": self.replicas[i].endpoint_id})


def _text(kind: str, i: int, chars: int) -> str:
    words = f"{kind} {i} " * (chars // (len(kind) + 4) + 1)
    return words[:chars]


def workload(cases: int, targets: int, criteria: int, candidates: int, lanes: int,
             key: str = "case") -> list[list[ChatRequest]]:
    """The judge calls, one list per criterion, in the order a calibration sends them, their
    ``affinity`` the case (``key="case"``) or the case and target (``"target"``)."""
    system = Message(role="system", content=_text("protocol", 0, 2400))
    items = [(c, t) for c in range(cases) for t in range(targets)]
    out = []
    for k in range(criteria):
        calls = []
        for run in lane_runs([f"case{c}" for c, _ in items], lanes):
            calls.append([(items[i], g) for i in run for g in range(candidates)])
        requests = []
        for (c, t), g in interleave(calls):
            user = "\n".join([_text("case", c, 3200), _text(f"target{c}-", t, 900), _text("criterion", k, 500),
                              _text(f"guidance{k}-", g, 700)])
            requests.append(ChatRequest(model="m", messages=(system, Message(role="user", content=user)), seed=g,
                                        tag="judge", affinity=f"case{c}" + (f"/target{t}" if key == "target" else "")))
        out.append(requests)
    return out


def run(provider, batches: list[list[ChatRequest]], concurrency: int) -> tuple[list[float], dict[str, int], float]:
    """Per-criterion prefix-cached shares, calls per replica and the overall share."""
    shares, prompt_total, cached_total = [], 0, 0
    with Client(provider, cache=ResponseCache(Path(tempfile.mkdtemp()) / "c.sqlite"), max_concurrency=concurrency) as client:
        for requests in batches:
            results = client.map(requests)
            prompt = sum(r.prompt_tokens for r in results if isinstance(r, ChatResponse))
            cached = sum(r.cached_prompt_tokens for r in results if isinstance(r, ChatResponse))
            shares.append(cached / prompt)
            prompt_total, cached_total = prompt_total + prompt, cached_total + cached
        per = {name: u["calls"] for name, u in client.endpoint_usage_snapshot().items()}
    return shares, per, cached_total / prompt_total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--targets", type=int, default=5)
    parser.add_argument("--criteria", type=int, default=9)
    parser.add_argument("--candidates", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=12)
    parser.add_argument("--cache-prompts", type=int, default=32, help="prompts each simulated server remembers")
    args = parser.parse_args()
    batches = {key: workload(args.cases, args.targets, args.criteria, args.candidates, args.concurrency, key)
               for key in ("case", "target")}
    n_calls = sum(len(b) for b in batches["case"])
    print(f"{n_calls} judge calls ({args.cases} cases x {args.targets} targets x {args.criteria} criteria x "
          f"{args.candidates} candidates), {args.concurrency} in flight, {args.replicas} replicas remembering "
          f"{args.cache_prompts} prompts each")
    results = {}
    for name in ("affinity: case", "affinity: case+target", "round robin", "one server"):
        servers = [PrefixServer(args.cache_prompts) for _ in range(args.replicas if name != "one server" else 1)]
        try:
            replicas = [OpenAICompatibleProvider(s.server.base_url, timeout=30) for s in servers]
            provider = RoundRobin(replicas) if name == "round robin" else RoutingProvider(replicas, endpoint_id="group:m")
            results[name] = run(provider, batches["target" if name.endswith("target") else "case"], args.concurrency)
        finally:
            for s in servers:
                s.server.close()
        shares, per, overall = results[name]
        split = "/".join(str(per[k]) for k in sorted(per))
        print(f"{name:22s} prefix-cached share of prompt tokens {overall:.1%}   calls per replica {split}")
    for a, b in (("affinity: case", "round robin"), ("affinity: case", "affinity: case+target")):
        diffs = [x - y for x, y in zip(results[a][0], results[b][0])]
        mean = statistics.fmean(diffs)
        half = T975.get(len(diffs) - 1, 1.96) * statistics.stdev(diffs) / math.sqrt(len(diffs))
        print(f"{a} minus {b}, paired over {len(diffs)} criteria: {mean:+.1%} [{mean - half:+.1%}, {mean + half:+.1%}] "
              "(95% t interval)")


if __name__ == "__main__":
    main()
