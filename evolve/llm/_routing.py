"""Several replicas of one model behind one provider: prefix-affinity routing and failover.

A group of OpenAI-compatible servers that serve the same model (several ``vllm serve``
processes, llama-servers on several machines) answers any request alike, so a call may go to
any of them. Where it goes still matters for speed and cost: a server keeps the key/value
cache of the prompts it has just processed, and a call whose prompt starts like an earlier
one (the same system message and case, only the target, criterion or guidance differing) reuses
that prefix instead of computing it again. :class:`RoutingProvider` therefore sends every call
with the same routing key (:func:`routing_key`: the request's ``affinity``, else a hash of its
shared prefix) to the same replica, chosen by rendezvous (highest-random-weight) hashing:
each replica gets a pseudo-random weight per key, ``sha256(replica, key)``, and the key goes
to the live replica of highest weight. Removing a replica moves only the keys it held (they
go to their second choice); every other key stays where it was. Hashes come from
:mod:`hashlib`, so the assignment is the same in every process and every run.

A replica that fails ``failures_to_out`` attempts in a row with a dropped or refused
connection or an HTTP 5xx is taken out for ``cooldown_s`` seconds, and the failing call goes
at once to the next replica in its key's ranking. Only when every replica is out does a
connection error reach the client, whose count of unreachable attempts then stops the run
(:class:`~evolve.errors.EndpointUnreachableError`), resumable as with a single endpoint.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeVar

from evolve.errors import ConfigError, EndpointConnectionError, EndpointError, EndpointServerError, TransientEndpointError
from evolve.llm._providers import Provider
from evolve.llm._types import ChatRequest, ChatResponse

__all__ = ["PREFIX_CHARS", "RoutingProvider", "rendezvous_ranking", "routing_key"]

T = TypeVar("T")

PREFIX_CHARS: Final = 2048
"""Characters of the first user message that make the routing key of a request without an
``affinity``: about 500 tokens, enough to hold a case's opening lines, short enough that what
follows (the criterion, its guidance) does not split calls about one case."""


def routing_key(request: ChatRequest) -> str:
    """The key a request is routed by: its ``affinity`` when set, else the SHA-256 of its model,
    its first system message and the first :data:`PREFIX_CHARS` characters of its first user
    message (the prefix that calls about one case share)."""
    if request.affinity:
        return request.affinity
    system = next((m.content for m in request.messages if m.role == "system"), "")
    user = next((m.content for m in request.messages if m.role == "user"), "")
    prefix = "\0".join((request.model, system, user[:PREFIX_CHARS]))
    return "prefix:" + hashlib.sha256(prefix.encode("utf-8")).hexdigest()


def rendezvous_ranking(key: str, names: Sequence[str]) -> list[int]:
    """Indexes of ``names`` from the first to the last choice for ``key`` (highest weight first).

    The weight of a replica for a key is the first 8 bytes of ``sha256(name NUL key)``, so a
    key's ranking depends only on the key and the names present, not on their order: adding
    or removing a replica changes no other replica's place relative to the rest.
    """
    def weight(i: int) -> tuple[int, str]:
        digest = hashlib.sha256(f"{names[i]}\0{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big"), names[i]

    return sorted(range(len(names)), key=weight, reverse=True)


class RoutingProvider:
    """A :class:`~evolve.llm.Provider` spreading calls over replicas that serve one model.

    Args:
        replicas: The replicas' providers (at least one; distinct ``endpoint_id`` values, used
            as their names: in ranking, in :attr:`ChatResponse.endpoint`, in messages).
        endpoint_id: The group's identity in cache keys: one for the whole group, so that a
            cached answer is found whichever replica gave it, in whatever order the replicas
            are listed and after one is added or removed.
        failures_to_out: Attempts in a row that fail with a connection error or an HTTP 5xx
            before a replica is taken out (2: the failing call's own retry failed too).
        cooldown_s: Seconds a replica stays out; then it is asked again (a failure takes it
            out again after ``failures_to_out`` more).
        on_out: Called as ``on_out(replica, reason)`` when a replica is taken out (a run
            journals a warning).
        clock: Monotonic seconds (tests pass their own).

    Attributes:
        names: The replicas' names, in the order given.
        out_until: ``{index: clock time}`` of replicas taken out, until when.
        failed_attempts: ``{name: n}`` attempts that failed with a connection error or a 5xx.
        taken_out: ``{name: n}`` times each replica was taken out.

    Raises:
        ConfigError: No replica, or two with the same name.
    """

    def __init__(
        self,
        replicas: Sequence[Provider],
        *,
        endpoint_id: str,
        failures_to_out: int = 2,
        cooldown_s: float = 60.0,
        on_out: Callable[[str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.replicas = list(replicas)
        self.names = [r.endpoint_id for r in self.replicas]
        if not self.replicas:
            raise ConfigError("a replica group needs at least one base URL.")
        if len(set(self.names)) != len(self.names):
            raise ConfigError(f"the replica base URLs {self.names} name one server twice; list each once.")
        self.endpoint_id = endpoint_id
        self.failures_to_out = max(1, failures_to_out)
        self.cooldown_s = cooldown_s
        self.on_out = on_out
        self._clock = clock
        self.out_until: dict[int, float] = {}
        self._failures = [0] * len(self.replicas)
        self.failed_attempts: Counter[str] = Counter()
        self.taken_out: Counter[str] = Counter()
        # one flag for the group: a replica sending length limits and one stripping them would cache alike
        self.schema_limits = all(getattr(r, "schema_limits", True) is not False for r in self.replicas)

    def scrub(self, text: str) -> str:
        """``text`` with every replica's secrets replaced (see :class:`OpenAICompatibleProvider`)."""
        for replica in self.replicas:
            scrub = getattr(replica, "scrub", None)
            if scrub is not None:
                text = scrub(text)
        return text

    def live(self) -> list[int]:
        """Indexes of the replicas not out now (a replica whose time out has passed is back)."""
        now = self._clock()
        for i in [i for i, until in self.out_until.items() if until <= now]:
            del self.out_until[i]
            self._failures[i] = 0
        return [i for i in range(len(self.replicas)) if i not in self.out_until]

    async def aclose(self) -> None:
        """Close every replica's open connections on the running loop (see
        :meth:`OpenAICompatibleProvider.aclose <evolve.llm.OpenAICompatibleProvider.aclose>`)."""
        for replica in self.replicas:
            aclose = getattr(replica, "aclose", None)
            if aclose is not None:
                await aclose()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send ``request`` to the first live replica in its key's ranking, falling over to the
        next one when a replica is taken out.

        Raises:
            TransientEndpointError: A replica failed and is not out yet (the client retries it),
                or a 429/timeout (the replica is kept).
            EndpointConnectionError: Every replica is out and the one asked again could not
                be reached either (counted by the client towards stopping the run).
            EndpointError: As the replica raised it (a 4xx other than the transient ones).
        """
        async def ask(i: int) -> ChatResponse:
            response = await self.replicas[i].complete(request)
            return response.model_copy(update={"endpoint": self.names[i]})

        return await self._route(routing_key(request), ask)

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        """Embed ``texts`` on the first live replica in the ranking of ``model``'s embeddings
        (the replicas serve one model, so any gives the same vectors), falling over as
        :meth:`complete` does.

        Raises:
            As :meth:`complete`; EndpointError: The replicas do not embed (no ``embed``).
        """
        async def ask(i: int) -> list[list[float]]:
            embed = getattr(self.replicas[i], "embed", None)
            if embed is None:
                raise EndpointError(f"{self.names[i]}: this provider does not serve embeddings")
            vectors: list[list[float]] = await embed(texts, model)
            return vectors

        return await self._route(f"embeddings\0{model}", ask)

    async def _route(self, key: str, ask: Callable[[int], Awaitable[T]]) -> T:
        """``ask(i)`` of the first live replica ``i`` in ``key``'s ranking, falling over to the
        next when one is taken out, and probing the one due back first when all are out."""
        ranking = rendezvous_ranking(key, self.names)
        live = set(self.live())
        for i in (i for i in ranking if i in live):
            try:
                answer = await ask(i)
            except (EndpointConnectionError, EndpointServerError) as exc:
                if not self._failed(i, exc):
                    # not out yet: the client's retry asks this replica again after its backoff;
                    # a plain transient error, so one replica's blip never counts towards stopping the run
                    raise TransientEndpointError(self.scrub(str(exc))) from None
                continue
            self._failures[i] = 0
            return answer
        return await self._probe(ask)

    async def _probe(self, ask: Callable[[int], Awaitable[T]]) -> T:
        """Every replica is out: ask the one due back first (its success puts it back)."""
        i = min(self.out_until, key=lambda j: (self.out_until[j], j))
        try:
            answer = await ask(i)
        except EndpointConnectionError as exc:
            raise EndpointConnectionError(self.scrub(
                f"{self.endpoint_id}: every replica ({len(self.names)}) is out; the one asked again failed too: {exc}"
            ), unsent=exc.unsent) from None
        self._failures[i] = 0
        del self.out_until[i]
        return answer

    def _failed(self, i: int, exc: Exception) -> bool:
        """Count a failed attempt of replica ``i``; True when it is (now) out."""
        self.failed_attempts[self.names[i]] += 1
        if i in self.out_until:
            return True
        self._failures[i] += 1
        if self._failures[i] < self.failures_to_out:
            return False
        self.out_until[i] = self._clock() + self.cooldown_s
        self.taken_out[self.names[i]] += 1
        if self.on_out is not None:
            reason = self.scrub(f"{self._failures[i]} attempts in a row failed (last: {exc})")
            self.on_out(self.names[i], reason)
        return True
