"""The client: bounded concurrency, retries with backoff, response cache, usage accounting."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
from anyio.from_thread import start_blocking_portal
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from evolve.errors import (
    EndpointConnectionError,
    EndpointError,
    EndpointUnreachableError,
    SpendLimitReachedError,
    TransientEndpointError,
    UnsupportedFeatureError,
)
from evolve.llm._batch import BatchOptions, BatchRunner, batch_tag
from evolve.llm._budget import SpendLimit, request_chars
from evolve.llm._cache import ResponseCache
from evolve.llm._providers import Provider
from evolve.llm._schema import schema_violation, sent_schema
from evolve.llm._structured import parse_json_object
from evolve.llm._types import CallFailure, ChatRequest, ChatResponse, Usage

Result = ChatResponse | CallFailure
T = TypeVar("T")


class _Flight:
    """A request on its way to the endpoint: identical requests wait on ``done`` for ``result``
    (None when the call ended without one)."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Result | None = None


def _lane_queues(lanes: Sequence[int]) -> list[list[int]]:
    """Request indices per lane, in request order, the lanes in order of first appearance."""
    queues: dict[int, list[int]] = {}
    for i, lane in enumerate(lanes):
        queues.setdefault(lane, []).append(i)
    return list(queues.values())


class Client:
    """Async model client with a synchronous facade.

    Calls run on one background event loop (an anyio blocking portal), so synchronous code -
    pyribs emitters, several criteria in threads - can share one client, one concurrency bound
    and one cache.

    Args:
        provider: Where requests go (see :func:`get_provider`).
        cache: Persistent response cache; None disables caching.
        max_concurrency: Most requests in flight at once (>= 1).
        max_retries: Retries after the first attempt for transient failures (429, 5xx, timeouts).
        backoff_initial: First backoff, seconds; doubles per retry with jitter.
        backoff_max: Longest backoff, seconds.
        max_unreachable: Connection attempts in a row (retries included, over all calls in
            flight) that may fail before the client raises
            :class:`~evolve.errors.EndpointUnreachableError` instead of returning another
            failure: an endpoint that went away stops the run within seconds rather than
            failing every remaining call.

    Attributes:
        usage: Running totals per request tag (:class:`Usage`).
        endpoint_usage: Paid calls per replica that answered them (:class:`Usage` by replica URL),
            filled when the provider routes over several replicas (``ChatResponse.endpoint``).
        session: A random id of this client, written beside its usage in a run's journal so
            that the usage of several processes (a run and its resumptions) can be summed.
        on_usage: Called with :meth:`usage_snapshot` at most every ``usage_interval_s`` seconds
            while calls finish (a run journals it, so a killed process leaves its usage behind).
        on_call_event: Called as ``on_call_event(kind, tag)``: ``"sent"`` when a request has its
            concurrency slot and is about to go to the endpoint (once per call, retries not
            counted again), ``"done"`` once a sent call is counted in :attr:`usage` (answered or
            failed), ``"hit"`` once a cache hit (or a shared answer) is counted, ``"unsent"`` when
            a sent call ends the run unanswered (the endpoint unreachable, an interrupt) and no
            attempt of it left (every connection refused or unresolved: it cannot have been
            paid). A run journals them, so that a killed process leaves every paid call behind.
        spend_limit: A :class:`~evolve.llm.SpendLimit` checked before each request leaves (a
            call that could pass it is not sent: :class:`~evolve.errors.SpendLimitReachedError`
            stops the run); None: no limit. Cache hits never pass through it.
        batch: How :meth:`map` sends requests marked ``batchable`` through the endpoint's Batch
            API (:class:`~evolve.llm.BatchOptions`); None (the default): interactively.
    """

    usage_interval_s: float = 30.0

    def __init__(
        self,
        provider: Provider,
        *,
        cache: ResponseCache | None = None,
        max_concurrency: int = 2,
        max_retries: int = 4,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        max_unreachable: int = 4,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.provider = provider
        self.cache = cache
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.max_unreachable = max_unreachable
        # the provider's own secrets, kept out of every failure text (see evolve.llm._secrets)
        self._scrub: Callable[[str], str] = getattr(provider, "scrub", None) or _unchanged
        self._unreachable = 0  # connection attempts in a row that failed
        self.usage: dict[str, Usage] = defaultdict(Usage)
        self.endpoint_usage: dict[str, Usage] = defaultdict(Usage)  # per replica that answered (RoutingProvider)
        self._usage_lock = threading.Lock()
        self.session = secrets.token_hex(6)
        self.on_usage: Callable[[dict[str, dict[str, int]]], None] | None = None
        self.on_call_event: Callable[[str, str], None] | None = None
        self.spend_limit: SpendLimit | None = None
        self.batch: BatchOptions | None = None
        self._usage_reported = time.monotonic()
        self._portal_cm: Any = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        # a client nobody closes stops its loop when collected, or at exit while the loop still runs
        self._release = weakref.finalize(self, _release_portal, self._portal_cm, self._portal)
        self._limiter = self._portal.call(self._make_limiter)
        self._in_flight: dict[str, _Flight] = {}  # cache key -> the call answering it (touched on the loop only)

    async def _make_limiter(self) -> anyio.CapacityLimiter:
        return anyio.CapacityLimiter(self.max_concurrency)

    @property
    def endpoint_id(self) -> str:
        """Identity of the endpoint (part of every cache key)."""
        return self.provider.endpoint_id

    async def acomplete(self, request: ChatRequest) -> Result:
        """Complete one request: cache lookup, then the endpoint with retries.

        Identical requests (same cache key) in flight at once reach the endpoint once: the later
        ones wait for the first and share its answer, counted as cache hits (a failure of the
        first is theirs too, not counted again as a call).

        Returns:
            The response (``cached=True`` if from the cache or a shared answer) or a
            :class:`CallFailure` after all retries. Failures, cut answers (``finish_reason``
            other than ``stop``) and answers to a structured request that are not a JSON
            object fitting the schema sent (:func:`~evolve.llm._schema.schema_violation`) are
            never cached - nor replayed when an older cache holds one - so a resumed run asks
            again.
        """
        key = request.cache_key(self.endpoint_id)
        hit = self.cached_answer(request, key)
        if hit is not None:
            return hit
        first = self._in_flight.get(key)
        if first is not None:
            return await self._share(request, first)
        flight = _Flight()
        self._in_flight[key] = flight
        try:
            flight.result = await self._call(request, key)
        finally:
            del self._in_flight[key]
            flight.done.set()
        return flight.result

    def cached_answer(self, request: ChatRequest, key: str) -> ChatResponse | None:
        """The cached answer to ``request`` (its cache ``key``), counted as a cache hit; None
        when the cache has none fitting the request (a reply stored before the schema was
        checked is asked again; a cache written before secrets were scrubbed leaks none)."""
        if self.cache is None:
            return None
        hit = self.cache.get(key)
        if hit is None or not self._fits(request, hit):
            return None
        hit = self._scrubbed(hit)
        self._count(request.tag, hit)
        return hit

    def accept_batch_answer(self, request: ChatRequest, key: str, response: ChatResponse) -> ChatResponse:
        """Take an answer read from a Batch API output file: cached under ``key`` when it is
        one the interactive path would cache (``finish_reason`` ``stop``, fitting the schema
        sent), counted under :func:`~evolve.llm.batch_tag` of the request's tag (as
        ``"done"`` for :attr:`on_call_event`: the ledger journals it as a paid call)."""
        response = self._scrubbed(response)
        if self.cache is not None and response.finish_reason == "stop" and self._fits(request, response):
            self.cache.put(key, response)
        self._count(batch_tag(request.tag), response)
        return response

    def count_answer(self, tag: str, response: ChatResponse) -> None:
        """Count one answer under ``tag`` (a cache hit when ``response.cached``)."""
        self._count(tag, response)

    def scrub_text(self, text: str) -> str:
        """``text`` with the provider's secrets replaced."""
        return self._scrub(text)

    async def _share(self, request: ChatRequest, flight: _Flight) -> Result:
        """Wait for the identical request in flight and take its answer (asking anew only when
        it ended without one: cancelled or stopped by an error)."""
        await flight.done.wait()
        if flight.result is None:
            return await self.acomplete(request)
        if isinstance(flight.result, CallFailure):
            return flight.result
        shared = flight.result.model_copy(update={"cached": True, "latency_s": 0.0})
        self._count(request.tag, shared)
        return shared

    def _scrubbed(self, response: ChatResponse) -> ChatResponse:
        """``response`` with the provider's secrets replaced in its text and reasoning."""
        text, reasoning = self._scrub(response.text), self._scrub(response.reasoning)
        if (text, reasoning) == (response.text, response.reasoning):
            return response
        return response.model_copy(update={"text": text, "reasoning": reasoning})

    def _fits(self, request: ChatRequest, response: ChatResponse) -> bool:
        """:func:`_well_formed` for this client's provider (whether it sends length limits)."""
        return _well_formed(request, response, schema_limits=getattr(self.provider, "schema_limits", True) is not False)

    async def _call(self, request: ChatRequest, key: str) -> Result:
        """The endpoint call behind :meth:`acomplete` (retries, usage, caching)."""
        response, attempts = await self._with_retries(lambda: self.provider.complete(request), tag=request.tag,
                                                      cost=(request_chars(request), request.max_tokens))
        if isinstance(response, CallFailure):
            return self._fail(request.tag, response, attempts)
        self._unreachable = 0
        with self._usage_lock:
            self.usage[request.tag].retries += attempts - 1
        if self.cache is not None and response.finish_reason == "stop" and self._fits(request, response):
            self.cache.put(key, response)
        self._count(request.tag, response)
        return response

    async def _with_retries(self, call: Callable[[], Awaitable[T]], *, tag: str,
                            cost: tuple[int, int | None] = (0, None)) -> tuple[T | CallFailure, int]:
        """Await ``call()`` under the concurrency bound, retrying transient endpoint errors
        (``tag``: the request's, for :attr:`on_call_event`), once :attr:`spend_limit` lets it
        out (checked once per call, not per retry).

        Args:
            call: The endpoint call.
            tag: The request's tag.
            cost: ``(prompt characters, max_tokens or None)`` of the call, for :attr:`spend_limit`.

        Returns:
            ``(result, attempts)``; the result is a :class:`CallFailure` (``transient`` after
            the last retry, ``fatal`` at once) when the endpoint failed.

        Raises:
            SpendLimitReachedError: :attr:`spend_limit` refused the call (nothing was sent).
        """
        attempts = 0
        limit, ticket, outcome = self.spend_limit, None, None
        sent = reached = False  # journaled as sent; an attempt may have reached the endpoint
        try:
            async with self._limiter:
                if limit is not None:
                    ticket = limit.reserve(*cost)  # raises SpendLimitReachedError: the call is not sent
                self._event("sent", tag)
                sent = True
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception_type(TransientEndpointError),
                    stop=stop_after_attempt(self.max_retries + 1),
                    wait=wait_exponential_jitter(multiplier=self.backoff_initial, max=self.backoff_max),
                    reraise=True,
                ):
                    with attempt:
                        attempts += 1
                        try:
                            result = await call()
                        except EndpointConnectionError as exc:
                            reached = reached or not exc.unsent  # refused or unresolved: the attempt never left
                            self._count_unreachable(exc)  # raises once too many attempts in a row failed
                            raise
                        except BaseException:  # an answer, an error status, or cancelled while out
                            reached = True
                            raise
                        reached = True
                outcome = result
        except EndpointConnectionError as exc:
            return CallFailure(error=self._scrub(str(exc)), kind="transient", attempts=attempts), attempts
        except TransientEndpointError as exc:
            return CallFailure(error=self._scrub(str(exc)), kind="transient", attempts=attempts), attempts
        except UnsupportedFeatureError as exc:
            return CallFailure(error=self._scrub(str(exc)), kind="unsupported", attempts=attempts), attempts
        except EndpointError as exc:
            return CallFailure(error=self._scrub(str(exc)), kind="fatal", attempts=attempts), attempts
        except BaseException:  # the run stops (unreachable endpoint, interrupt) with this call unanswered
            if sent and not reached:
                self._event("unsent", tag)  # no attempt of it left: it cannot have been paid
            raise
        finally:
            if limit is not None and ticket is not None:  # the estimate gives way to what the call cost
                limit.settle(ticket, prompt_tokens=getattr(outcome, "prompt_tokens", 0),
                             completion_tokens=getattr(outcome, "completion_tokens", 0),
                             cached_prompt_tokens=getattr(outcome, "cached_prompt_tokens", 0),
                             answered=outcome is not None)
        return result, attempts

    def _count_unreachable(self, exc: EndpointConnectionError) -> None:
        """Count an attempt that never reached the endpoint; raise once too many came in a row
        (over all calls in flight, so a dead endpoint stops the run within a retry or two)."""
        with self._usage_lock:
            self._unreachable += 1
            n = self._unreachable
        if n >= self.max_unreachable:
            raise EndpointUnreachableError(self._scrub(
                f"{n} connection attempts in a row could not reach the endpoint {self.endpoint_id} (last error: {exc}). "
                "Check that the server is running and that the base URL, port and network are right; the "
                "run stops here and can be resumed."
            )) from exc

    def _count(self, tag: str, response: ChatResponse) -> None:
        with self._usage_lock:
            self.usage[tag].add(response)
            if response.endpoint and not response.cached:
                self.endpoint_usage[response.endpoint].add(response)
        self._event("hit" if response.cached else "done", tag)
        self._report_usage()

    def _fail(self, tag: str, failure: CallFailure, attempts: int) -> CallFailure:
        with self._usage_lock:
            self.usage[tag].failures += 1
            self.usage[tag].retries += max(attempts - 1, 0)
        self._event("done", tag)
        self._report_usage()
        return failure

    def _event(self, kind: str, tag: str) -> None:
        if self.on_call_event is not None:
            self.on_call_event(kind, tag)

    def usage_snapshot(self) -> dict[str, dict[str, int]]:
        """A copy of :attr:`usage`: ``{tag: {"calls", "cache_hits", ...}}``."""
        with self._usage_lock:
            return {tag: u.model_dump() for tag, u in self.usage.items()}

    def endpoint_usage_snapshot(self) -> dict[str, dict[str, int]]:
        """Paid calls and their tokens per replica that answered (``{url: {"calls", ...}}``;
        empty unless the provider is a :class:`~evolve.llm.RoutingProvider`), with the
        provider's ``failed_attempts`` and ``taken_out`` counts per replica. Cache hits count
        under no replica."""
        with self._usage_lock:
            out = {name: u.model_dump() for name, u in self.endpoint_usage.items()}
        for field in ("failed_attempts", "taken_out"):
            for name, n in dict(getattr(self.provider, field, None) or {}).items():
                out.setdefault(name, Usage().model_dump())[field] = int(n)
        return out

    def _report_usage(self) -> None:
        if self.on_usage is None or time.monotonic() - self._usage_reported < self.usage_interval_s:
            return
        self._usage_reported = time.monotonic()
        self.on_usage(self.usage_snapshot())

    def complete(self, request: ChatRequest) -> Result:
        """Synchronous :meth:`acomplete`."""
        return self._portal.call(self.acomplete, request)

    async def aembed(self, texts: Sequence[str], model: str, *, tag: str = "embedding") -> list[list[float]] | CallFailure:
        """Embed ``texts`` (one vector per text, in order) through the provider's ``embed``.

        Each text's vector is cached on its own, keyed on (endpoint, model, text), in the same
        :class:`ResponseCache` (stored as a response whose text is the JSON vector, under a key
        that no chat request can produce); only the texts not cached are sent, in one request.
        Usage is counted under ``tag``: ``calls`` per request sent, ``cache_hits`` per cached text.

        Returns:
            The vectors, or a :class:`CallFailure` when the provider has no ``embed`` (the fake
            provider without ``embeddings=``, for instance) or the endpoint fails or does not
            serve embeddings. Failures are not cached.
        """
        texts = list(texts)
        vectors: list[list[float] | None] = [None] * len(texts)
        keys = [self._embedding_key(model, t) for t in texts]
        if self.cache is not None:
            for i, key in enumerate(keys):
                hit = self.cache.get(key)
                if hit is not None:
                    vectors[i] = json.loads(hit.text)
                    with self._usage_lock:
                        self.usage[tag].cache_hits += 1
                    self._event("hit", tag)
        todo = [i for i, v in enumerate(vectors) if v is None]
        if not todo:
            return vectors  # type: ignore[return-value]
        absent = self._embedding_key(model, "\0no embeddings served")  # no text can make this key
        if self.cache is not None and (known := self.cache.get(absent)) is not None:
            with self._usage_lock:
                self.usage[tag].cache_hits += 1
            self._event("hit", tag)
            return CallFailure(error=self._scrub(known.text), kind="unsupported")  # remembered: not asked again
        embed = getattr(self.provider, "embed", None)
        if embed is None:
            return self._fail(tag, CallFailure(error=f"{self.endpoint_id}: this provider does not serve embeddings"), 0)
        fresh, attempts = await self._with_retries(lambda: embed([texts[i] for i in todo], model), tag=tag,
                                                   cost=(sum(len(texts[i]) for i in todo), 0))
        if isinstance(fresh, CallFailure):
            if fresh.kind == "unsupported" and self.cache is not None:
                self.cache.put(absent, ChatResponse(text=fresh.error))
            return self._fail(tag, fresh, attempts)
        if len(fresh) != len(todo):
            return self._fail(
                tag, CallFailure(error=f"{self.endpoint_id}: asked for {len(todo)} embeddings, got {len(fresh)}"), attempts
            )
        with self._usage_lock:
            self.usage[tag].calls += 1
            self.usage[tag].retries += attempts - 1
        self._event("done", tag)
        for i, vector in zip(todo, fresh):
            vectors[i] = [float(x) for x in vector]
            if self.cache is not None:
                self.cache.put(keys[i], ChatResponse(text=json.dumps(vectors[i])))
        return vectors  # type: ignore[return-value]

    def _embedding_key(self, model: str, text: str) -> str:
        payload = json.dumps(
            {"endpoint": self.endpoint_id, "embedding": {"model": model, "input": text}},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def embed(self, texts: Sequence[str], model: str, *, tag: str = "embedding") -> list[list[float]] | CallFailure:
        """Synchronous :meth:`aembed`."""
        return self._portal.call(lambda: self.aembed(texts, model, tag=tag))

    def map(
        self, requests: Sequence[ChatRequest], on_result: Callable[[int, Result], None] | None = None,
        *, batchable: bool = False, lanes: Sequence[int] | None = None,
    ) -> list[Result]:
        """Complete many requests concurrently (bounded by ``max_concurrency``), in order.

        With ``batchable`` and :attr:`batch` set, the requests the cache does not answer go
        through the endpoint's Batch API instead (:class:`~evolve.llm.BatchRunner`: answers
        within its window at batch prices, failed lines asked again interactively).

        Endpoint failures come back as :class:`CallFailure` results. An exception that stops
        the run (a :class:`~evolve.errors.RunStoppedError`: the server died, the endpoint is unreachable) cancels the other requests
        and is raised as itself (at a spend limit, :class:`~evolve.errors.SpendLimitReachedError`,
        the requests already sent finish first, so their answers are cached and not paid again).

        Args:
            requests: Requests; results come back in the same order.
            on_result: Called as ``on_result(index, result)`` when each finishes (from the
                client's loop thread) - e.g. to advance a progress bar or append to a journal.
            batchable: The requests are independent and nobody waits on any one of them (a
                phase that judges a fixed list): they may go by batch.
            lanes: A lane number per request (same length as ``requests``), or None. The
                requests of one lane go one after another in their order, each sent when the
                lane's previous one has come back, so a server that gives a request the slot
                it finds free (llama.cpp, with as many slots as lanes) keeps each lane on one
                slot and serves the prompt a lane's calls share from that slot's prefix cache.
                None: every request competes for the ``max_concurrency`` places in list order.

        Raises:
            ValueError: ``lanes`` is not one number per request.
        """
        if lanes is not None and len(lanes) != len(requests):
            raise ValueError(f"lanes has {len(lanes)} entries for {len(requests)} requests; give one per request")
        if batchable and self.batch is not None:
            return self._portal.call(BatchRunner(self, self.batch).run, list(requests), on_result)
        order = [[i] for i in range(len(requests))] if lanes is None else _lane_queues(lanes)
        return self._portal.call(self._amap, list(requests), order, on_result)

    async def _amap(self, requests: list[ChatRequest], queues: list[list[int]], on_result) -> list[Result]:
        """Run each queue of request indices in order, the queues concurrently."""
        results: list[Result | None] = [None] * len(requests)
        stopped: list[Exception] = []

        async def run(queue: list[int]) -> None:
            for i in queue:
                try:
                    results[i] = await self.acomplete(requests[i])
                except Exception as exc:  # noqa: BLE001 - a run-stopping error (the server died): stop the rest
                    if not stopped:
                        stopped.append(exc)
                    if not isinstance(exc, SpendLimitReachedError):  # at a spend limit, calls out finish and are cached
                        tg.cancel_scope.cancel()
                    return
                if on_result is not None:
                    on_result(i, results[i])

        async with anyio.create_task_group() as tg:
            for queue in queues:
                tg.start_soon(run, queue)
        if stopped:
            raise stopped[0]  # itself, not wrapped in an exception group
        return results  # type: ignore[return-value]

    def total_usage(self) -> Usage:
        """Usage summed over all tags."""
        total = Usage()
        with self._usage_lock:
            for u in self.usage.values():
                for field in Usage.model_fields:
                    setattr(total, field, getattr(total, field) + getattr(u, field))
        return total

    def close(self, *, cancel: bool = False) -> None:
        """Close the provider's kept-alive connections and stop the background loop (idempotent).

        Safe after an interruption: when an exception raised inside the loop (a
        ``KeyboardInterrupt`` from a provider, say) has already stopped it, there is nothing left
        to cancel and ``close`` returns quietly - the caller has that exception already.

        Args:
            cancel: Cancel calls still in flight (after an interrupt) instead of waiting for
                them; their results are lost and a resumed run pays for them again. Threads
                blocked in :meth:`complete`, :meth:`map` or :meth:`embed` then raise (a
                ``CancelledError`` or ``RuntimeError``) at once.
        """
        self._release.detach()
        portal_cm, self._portal_cm = self._portal_cm, None
        if portal_cm is None:
            return
        if cancel:
            try:
                self._portal.call(self._portal.stop, True)
            except RuntimeError:  # "This portal is not running": the loop has stopped already
                pass
        else:
            self._close_connections()
        try:
            portal_cm.__exit__(None, None, None)
        except RuntimeError:
            pass
        except BaseException as exc:
            # The loop ended with the exception that stopped it (already raised to its caller,
            # e.g. as an exception group); closing must not raise it a second time.
            if not _ended_loop(exc):
                raise

    def _close_connections(self) -> None:
        """Close the provider's kept-alive connections on this client's loop, before it stops,
        once no call is out (a provider without any, such as the fake one, has no ``aclose``)."""
        aclose = getattr(self.provider, "aclose", None)
        if aclose is None:
            return

        async def when_idle() -> None:
            while self._limiter.borrowed_tokens:  # held by a call from its first attempt to its last retry
                await anyio.sleep(0.01)
            await aclose()

        try:
            self._portal.call(when_idle)
        except Exception:  # noqa: BLE001, S110 - the loop has stopped already, or a socket is gone: nothing to close
            pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(cancel=exc_type is not None)


def _unchanged(text: str) -> str:
    """The scrubber of a provider without secrets."""
    return text


def _release_portal(portal_cm: Any, portal: Any) -> None:
    """Stop the loop of a client that was never closed, cancelling calls still in flight.

    Runs when the client is garbage-collected, or at interpreter exit while the loop's thread
    still runs: a client still referenced then (by the traceback of an error, say) would
    otherwise be stopped during finalization, after that thread is frozen, and exit would hang.
    """
    try:
        portal.call(portal.stop, True)
    except BaseException:  # noqa: BLE001, S110 - the loop has stopped already; nobody to tell
        pass
    try:
        portal_cm.__exit__(None, None, None)
    except BaseException:  # noqa: BLE001, S110 - what stopped the loop was raised to its caller
        pass


def _well_formed(request: ChatRequest, response: ChatResponse, *, schema_limits: bool = True) -> bool:
    """Whether an answer is worth caching (or replaying from the cache): any text for a
    free-text request; for a structured one, a JSON object that fits the ``json_schema`` of its
    ``response_format`` as sent (``schema_limits`` False: without length limits, as the provider
    sent it). Garbage, a truncated object, a score outside the scale or a wrong type is asked
    again on resume, not replayed (the caller still gets it and records its own failure)."""
    if request.response_format is None:
        return True
    try:
        value = parse_json_object(response.text)
    except ValueError:
        return False
    schema = sent_schema(request.response_format, schema_limits=schema_limits)
    return schema is None or schema_violation(value, schema) is None


def _ended_loop(exc: BaseException) -> bool:
    """Whether ``exc`` is what a portal's loop re-raises on exit after a call raised a
    ``KeyboardInterrupt`` or was cancelled inside it (possibly wrapped in exception groups)."""
    if isinstance(exc, (KeyboardInterrupt, anyio.get_cancelled_exc_class())):
        return True
    inner = getattr(exc, "exceptions", None)
    return bool(inner) and all(_ended_loop(e) for e in inner or ())
