"""Opening the model client of a run: the endpoint settings, the embedded server, the cache."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field, model_validator

from evolve.errors import ConfigError, SpendLimitReachedError
from evolve.llm import MAX_CONTEXT_TOKENS, Client, OpenAICompatibleProvider, Provider, ResponseCache, get_provider
from evolve.local import running_llama_servers
from evolve.records import Record
from evolve.runs._journal import CALL_COUNTS, Event, Journal, run_usage
from evolve.runs._progress import Price, price_of

__all__ = [
    "EndpointSettings", "context_window", "default_cache_path", "open_client", "output_limit_problem", "owned_client",
    "with_cache_path",
]

_C = TypeVar("_C", bound=BaseModel)


class EndpointSettings(Record):
    """Where model calls go.

    Attributes:
        provider: ``embedded`` (start the local llama-server, the default), ``openai_compatible``
            (any base URL: OpenAI, OpenRouter, vLLM, a running llama-server) or ``fake`` (tests).
            Given a ``base_url`` and no provider, ``openai_compatible``; ``embedded`` together
            with a ``base_url`` is refused.
        base_url: Base URL ending in ``/v1`` for ``openai_compatible`` (implies it); with several
            replicas, the first of ``base_urls`` (a list given here becomes ``base_urls``).
        base_urls: Base URLs of several replicas serving the same model (``()``: just
            ``base_url``). Calls are spread over them by prefix affinity and a failing one is
            taken out (:class:`evolve.llm.RoutingProvider`). Which replicas serve a run changes
            none of its answers: a resume may add, drop or reorder them.
        group: Name of the replica group in cache keys; None: the model id when there are
            several ``base_urls``, else the base URL itself. The replicas serve one model, so
            they share one cache identity: a cached answer is found whichever replica gave
            it, in any order and after a replica is added. Set it when several URLs serve a
            model under a generic name (llama-server ignores the model id), or before growing
            from one URL to several so the first URL's cache carries over.
        model: Model id sent with each request (llama-server ignores it).
        api_key_env: Name of the environment variable holding the API key (the key itself is
            never stored).
        local_model: Which embedded model to serve (see ``evolve.local.LOCAL_MODELS``).
        max_concurrency: Requests in flight at once.
        max_retries: Retries on 429/5xx/timeouts.
        timeout_s: Per-request timeout, seconds (at most one day).
        schema_limits: Send ``maxLength`` in output JSON schemas (needed by constrained
            decoders such as llama.cpp; turn off for hosted strict modes that reject it).
        context_tokens: Context window of one request, tokens (prompt and output together),
            checked before a benchmark pays for calls, and the ceiling of the judge's and the
            mutation's ``max_tokens`` (at most :data:`evolve.llm.MAX_CONTEXT_TOKENS`).
            None: the embedded server's slot (:data:`evolve.local.SLOT_CONTEXT`); unknown, and
            not checked, for other endpoints.
        price_in: USD per million input (prompt) tokens, or None. Shown as money spent and
            expected on the progress line (with ``price_out``); changes no result.
        price_out: USD per million output (completion) tokens, or None (given with ``price_in``).
        price_cached_in: USD per million input tokens the server serves from its prefix cache
            (reported as ``cached_tokens``), or None (charged as ordinary input).
        price_batch_in: USD per million input tokens of calls sent through a Batch API, or None
            (the interactive price; given with ``price_batch_out``).
        price_batch_out: USD per million output tokens of batch calls, or None.
        max_usd: A hard spending limit of the whole run (every process of it, resumptions
            included), USD at the prices above: a call that could pass it is not sent and the
            run stops, resumable (:class:`evolve.llm.SpendLimit`). None: no limit. Needs
            ``price_in``/``price_out``. A resume may raise it.
        max_tokens: The same limit in tokens (prompt and completion tokens of paid calls;
            cache hits are free). Not the output limit of one call (``judge.max_tokens``).
        batch: Send the non-interactive phases (a calibration's initial evaluation, finalist
            re-judging, re-evaluation and held-out scoring; ``evolve judge``) through the
            endpoint's Batch API (``--batch``): answered within its 24 h window at batch
            prices, each batch journaled before it is polled so a resume never pays twice.
            The answers are the same; a resume may turn it on or off. Ignored, with a
            warning, by the embedded server, which has no Batch API.
        batch_poll_s: Wait before the second status poll of a batch, seconds (the first is at
            once); each later wait is 1.5 times longer, up to ten minutes.
    """

    provider: Literal["embedded", "openai_compatible", "fake"] = "embedded"
    base_url: str | None = None
    base_urls: tuple[str, ...] = ()
    group: str | None = Field(default=None, min_length=1, max_length=200)
    model: str = "local"
    api_key_env: str = "EVOLVE_API_KEY"
    local_model: str = "qwen2.5-coder-0.5b"
    max_concurrency: int = Field(default=2, ge=1, le=256)
    max_retries: int = Field(default=4, ge=0, le=20)
    timeout_s: float = Field(default=600.0, gt=0, le=86_400)
    schema_limits: bool = True
    context_tokens: int | None = Field(default=None, ge=256, le=MAX_CONTEXT_TOKENS)
    price_in: float | None = Field(default=None, ge=0, le=10_000)
    price_out: float | None = Field(default=None, ge=0, le=10_000)
    price_cached_in: float | None = Field(default=None, ge=0, le=10_000)
    price_batch_in: float | None = Field(default=None, ge=0, le=10_000)
    price_batch_out: float | None = Field(default=None, ge=0, le=10_000)
    max_usd: float | None = Field(default=None, ge=0, le=10_000_000)
    max_tokens: int | None = Field(default=None, ge=0, le=10**13)
    batch: bool = False
    batch_poll_s: float = Field(default=10.0, gt=0, le=3600)

    RESULT_NEUTRAL: ClassVar[tuple[str, ...]] = ("max_concurrency", "max_retries", "timeout_s", "price_in", "price_out",
                                                 "price_cached_in", "price_batch_in", "price_batch_out",
                                                 "max_usd", "max_tokens", "batch", "batch_poll_s")
    """Fields that change how a run goes (parallelism, patience, the money shown and the spending
    limit), never what it computes: a resume may change them."""

    def price(self) -> Price | None:
        """The prices of this endpoint (:func:`~evolve.runs.price_of`); None when none is set."""
        return price_of(self.price_in, self.price_out, cached_in=self.price_cached_in,
                        batch_in=self.price_batch_in, batch_out=self.price_batch_out)

    def resume_fields(self) -> dict[str, Any]:
        """The fields a resumed run must keep (JSON-like; every field but :attr:`RESULT_NEUTRAL`,
        and for a replica group, whose identity is :meth:`cache_identity`, not its URLs)."""
        neutral = self.RESULT_NEUTRAL + (("base_url", "base_urls") if self.is_group else ())
        return {k: v for k, v in self.model_dump(mode="json").items() if k not in neutral}

    @property
    def urls(self) -> tuple[str, ...]:
        """Every base URL calls go to (``()`` for the embedded and fake providers)."""
        return self.base_urls or ((self.base_url,) if self.base_url else ())

    @property
    def is_group(self) -> bool:
        """Whether calls go through a replica group (several URLs, or a ``group`` name)."""
        return self.provider == "openai_compatible" and (len(self.urls) > 1 or self.group is not None)

    def cache_identity(self) -> str | None:
        """The endpoint identity in cache keys of a replica group, ``group:<group or model>``;
        None for a single URL (its provider's own identity, the URL, as before groups existed)."""
        return f"group:{self.group or self.model}" if self.is_group else None

    @model_validator(mode="before")
    @classmethod
    def _url_list(cls, data: Any) -> Any:
        """A list of base URLs becomes ``base_urls`` with ``base_url`` its first; a one-URL list
        is a plain ``base_url``."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("base_url"), list | tuple):
            urls = [str(u) for u in data["base_url"]]
            data["base_url"], data["base_urls"] = (urls[0] if urls else None), urls
        urls = list(data.get("base_urls") or ())
        if len(urls) != len(set(urls)):
            raise ValueError(f"base_urls lists a URL twice ({urls}); list each replica once")
        if len(urls) == 1 and data.get("base_url") in (None, urls[0]):
            data["base_url"], data["base_urls"] = urls[0], ()
        elif len(urls) > 1:
            if data.get("base_url") not in (None, urls[0]):
                raise ValueError(f"base_url {data['base_url']!r} is not the first of base_urls {urls}; give the "
                                 "replicas once, as base_urls (or a repeated --base-url)")
            data["base_url"] = urls[0]
        if data.get("base_url") and data.get("provider") is None:  # as _provider_of_url (run before this one)
            data["provider"] = "openai_compatible"
        return data

    @model_validator(mode="before")
    @classmethod
    def _provider_of_url(cls, data: Any) -> Any:
        """A base URL without a provider means ``openai_compatible``; with ``embedded`` (which
        serves its own model and would ignore the URL) it is refused."""
        if not isinstance(data, dict) or not data.get("base_url"):
            return data
        provider = data.get("provider")
        if provider is None:
            return {**data, "provider": "openai_compatible"}
        if provider == "embedded":
            raise ValueError(f"provider 'embedded' starts its own model server and would ignore base_url "
                             f"{data['base_url']!r}; drop the provider (a base URL means 'openai_compatible') "
                             "or drop base_url to use the embedded model")
        return data

    @model_validator(mode="after")
    def _needs_url(self) -> EndpointSettings:
        if self.provider == "openai_compatible" and not self.base_url:
            raise ValueError("provider 'openai_compatible' needs base_url (or set EVOLVE_BASE_URL)")
        if (self.price_in is None) != (self.price_out is None):
            raise ValueError("price_in and price_out (USD per million input and output tokens) go together: give both")
        if (self.price_batch_in is None) != (self.price_batch_out is None):
            raise ValueError("price_batch_in and price_batch_out (USD per million batch input and output tokens) go "
                             "together: give both")
        if self.price_in is None and (self.price_cached_in is not None or self.price_batch_in is not None):
            raise ValueError("price_cached_in and price_batch_in/out need price_in and price_out too (USD per million "
                             "tokens)")
        if self.max_usd is not None and self.price_in is None:
            raise ValueError(f"max_usd {self.max_usd} needs prices to turn tokens into USD: set price_in and price_out "
                             "(--price-in, --price-out, USD per million tokens), or limit tokens with max_tokens "
                             "(--max-tokens) instead")
        from evolve.llm import url_credentials

        for url in self.urls or (None,):
            if credentials := url_credentials(url):  # the URL is stored with the run: no key in it
                raise ValueError(f"base_url holds a credential ({', '.join(credentials)}), which would be stored with "
                                 f"the run's settings; put the key in the environment variable named by api_key_env "
                                 f"({self.api_key_env}) instead")
        if self.base_urls and self.provider != "openai_compatible":
            raise ValueError(f"base_urls (several replicas) need provider 'openai_compatible', not {self.provider!r}")
        if not (self.api_key_env.isascii() and self.api_key_env.isidentifier()):  # stored with the run: never a key
            raise ValueError("api_key_env takes the NAME of the environment variable holding the key (letters, digits "
                             "and _, e.g. EVOLVE_API_KEY), not the key itself, which would be stored with the run's "
                             "settings")
        return self


def context_window(endpoint: EndpointSettings) -> tuple[int | None, str]:
    """The context of one request at this endpoint, tokens, and where the figure comes from
    (``(None, ...)`` when nobody knows it)."""
    if endpoint.context_tokens is not None:
        return endpoint.context_tokens, "endpoint.context_tokens"
    if endpoint.provider == "embedded":
        from evolve.local import SLOT_CONTEXT

        return SLOT_CONTEXT, "the embedded server's slot"
    return None, "unknown: set endpoint.context_tokens to check prompts against it"


def output_limit_problem(endpoint: EndpointSettings, key: str, max_tokens: int) -> str | None:
    """Why an output limit cannot be sent to this endpoint, or None when it can.

    An output limit above the context of one request (prompt and output together) can never be
    reached; it is a typo, or a context that was not declared (``endpoint.context_tokens``).
    Nothing is checked when the context is unknown (:func:`context_window`).

    Args:
        endpoint: Where the calls go.
        key: The configuration key of the limit, for the message (``judge.max_tokens``).
        max_tokens: The limit, tokens.

    Returns:
        None, or a message naming the key, the value, the context and its source, and the fix.
    """
    context, source = context_window(endpoint)
    if context is None or max_tokens <= context:
        return None
    return (f"{key} is {max_tokens} tokens, more than the whole context of one request ({context} tokens: {source}); "
            f"lower {key} to at most {context}, or declare the model's real context with endpoint.context_tokens")


def default_cache_path() -> Path:
    """``$EVOLVE_CACHE_DIR/responses.sqlite`` (default ``~/.cache/evolve/responses.sqlite``)."""
    from evolve.local import cache_dir

    return cache_dir() / "responses.sqlite"


def with_cache_path(config: _C) -> _C:
    """``config`` (any run configuration with a ``cache_path`` field) with its response cache's
    path filled in (:func:`default_cache_path` when unset), so that the stored configuration
    names the cache and a resumed run finds it again."""
    if getattr(config, "cache_path", None) is not None:
        return config
    return config.model_copy(update={"cache_path": default_cache_path()})


def open_client(
    endpoint: EndpointSettings, *, cache_path: Path | None = None, journal: Journal | None = None
) -> tuple[Client, Callable[[], None] | None]:
    """Build the client of a run; start the embedded server if the endpoint says so.

    Prefer :func:`owned_client`, which also closes the client and stops the server.

    Args:
        endpoint: Where calls go.
        cache_path: SQLite response cache; None = :func:`default_cache_path`.
        journal: Receives ``embedded_server_started`` and warnings.

    Returns:
        ``(client, closer)``: call ``closer()`` after ``client.close()`` to stop a server this
        function started (None when nothing was started).

    Raises:
        ConfigError: Unknown provider or missing base URL.
        LocalServerError: The embedded server is not installed or failed to start.
    """
    ep = endpoint
    cache = ResponseCache(cache_path or default_cache_path())
    api_key = os.environ.get(ep.api_key_env)
    closer = None
    provider: Provider
    if ep.provider == "embedded":
        from evolve.local import LOCAL_MODELS, LocalServer

        if ep.local_model not in LOCAL_MODELS:
            raise ConfigError(f"unknown local model {ep.local_model!r}; choose one of {sorted(LOCAL_MODELS)}.")
        others = running_llama_servers()
        if others and journal is not None:
            journal.append(Event.WARNING, message=f"other llama-server processes are running (pids {others}); "
                           "they share the 2 CPU cores and can slow every call many times over")
        # A fresh random key per start: only this process can use the server (a web page
        # in a local browser cannot). It lives in memory and the server's environment only:
        # never on a command line, in a log or in a file.
        key = secrets.token_urlsafe(24)
        server = LocalServer(ep.local_model, api_key=key)
        base_url = server.start()
        spec = LOCAL_MODELS[ep.local_model]
        provider = OpenAICompatibleProvider(
            base_url, api_key=key, timeout=ep.timeout_s, endpoint_id=f"embedded:{spec.name}:{(spec.sha256 or '')[:12]}",
            liveness=server.death,  # a dead server stops the run (resumable) instead of failing every call
        )
        closer = server.stop
        if journal is not None:
            journal.append(Event.EMBEDDED_SERVER_STARTED, model=spec.name, base_url=base_url, pid=server.pid)
    elif ep.is_group:
        provider = _replica_group(ep, api_key, journal)
    elif ep.provider == "openai_compatible":
        provider = get_provider(
            "openai_compatible", base_url=ep.base_url, api_key=api_key, timeout=ep.timeout_s,
            schema_limits=ep.schema_limits,
        )
    else:
        raise ConfigError(
            f"provider {ep.provider!r} cannot be built from a config file; pass a Client to calibrate() (tests)."
        )
    client = Client(provider, cache=cache, max_concurrency=ep.max_concurrency, max_retries=ep.max_retries)
    return client, closer


def _replica_group(ep: EndpointSettings, api_key: str | None, journal: Journal | None) -> Provider:
    """The :class:`~evolve.llm.RoutingProvider` over ``ep.urls`` (one key and settings for all),
    journaling a warning when a replica is taken out."""
    from evolve.llm import RoutingProvider

    def taken_out(replica: str, reason: str) -> None:
        if journal is not None:
            journal.append(Event.WARNING, message=f"replica {replica} taken out: {reason}; its calls go to the next "
                           "replica in their ranking")

    replicas = [get_provider("openai_compatible", base_url=url, api_key=api_key, timeout=ep.timeout_s,
                             schema_limits=ep.schema_limits) for url in ep.urls]
    return RoutingProvider(replicas, endpoint_id=ep.cache_identity() or "", on_out=taken_out)


@contextlib.contextmanager
def owned_client(
    endpoint: EndpointSettings, *, cache_path: Path | None = None, journal: Journal | None = None,
    client: Client | None = None, journal_usage: bool | None = None,
) -> Iterator[Client]:
    """The client of a run, released on any exit: closed (its calls in flight cancelled when
    the block raised, e.g. on Ctrl-C, so the interrupt is not held until they finish), then its
    embedded server stopped.

    With a ``journal``, an owned client's usage (calls, cache hits, failures, retries, tokens
    per tag, with the client's ``session``) is journaled as it goes - a ``sent`` event before
    each request leaves, a ``calls`` event after each paid call (cache hits at most once a
    second) - and as a ``usage`` snapshot every 30 s and on every exit, so
    :func:`~evolve.runs.run_usage` adds up a run's processes, killed ones included.

    Args:
        endpoint, cache_path, journal: As for :func:`open_client`.
        client: A client the caller owns (tests, a workflow sharing one client between steps):
            yielded as it is and left open - its owner releases it.
        journal_usage: Journal the usage on exit; default: only for a client opened here (a
            workflow that borrows its caller's client passes True: it is the run's top level).

    Raises:
        As :func:`open_client`.
    """
    if client is not None:
        limited = _limit_spend(client, endpoint, journal)
        batched = _batch_by_api(client, endpoint, journal)
        try:
            with _journal_spend_stop(journal if limited else None, client):
                yield client
        finally:
            if limited:
                client.spend_limit = None  # the owner's client, as it was lent
            if batched:
                client.batch = None
            if journal_usage:
                _journal_usage(journal, client)
        return
    client, closer = open_client(endpoint, cache_path=cache_path, journal=journal)
    limited = _limit_spend(client, endpoint, journal)
    if journal is not None:
        client.on_usage = lambda usage: journal.append(Event.USAGE, session=client.session, usage=usage, final=False,
                                                       **_endpoints(client))
        client.on_call_event = UsageLedger(journal, client)
    _batch_by_api(client, endpoint, journal)
    finished = False
    try:
        with _journal_spend_stop(journal if limited else None, client):
            yield client
        finished = True
    finally:
        try:
            at_limit = client.spend_limit is not None and client.spend_limit.reached is not None
            client.close(cancel=not (finished or at_limit))  # at a spend limit, calls out finish and are cached
        finally:
            if journal_usage is not False:
                _journal_usage(journal, client)
            if closer is not None:
                closer()


def default_models(data: dict[str, Any]) -> dict[str, Any]:
    """Fill in the models of a layered generation config (benchmark, OpenTumorBoard), in place:
    without ``models`` the endpoint's model generates; without an endpoint model the first
    generating model becomes it; the judge model defaults to the endpoint's model."""
    endpoint = data.setdefault("endpoint", {})
    if not data.get("models"):
        data["models"] = (endpoint.get("model") or EndpointSettings().model,)
    elif not endpoint.get("model"):
        endpoint["model"] = data["models"][0]
    if data.get("judge", {}).get("model") is None:
        data.setdefault("judge", {})["model"] = endpoint.get("model") or EndpointSettings().model
    return data


def _batch_by_api(client: Client, endpoint: EndpointSettings, journal: Journal | None) -> bool:
    """With ``endpoint.batch``, let ``client`` send batchable phases through the Batch API, its
    batches journaled (:func:`~evolve.runs.run_batch_options`); without it, still poll the
    batches a killed process of the run submitted (nothing new is submitted: a run resumed
    without ``--batch`` pays nothing twice). False when it does neither (the client has batch
    options already, nothing to poll, or the embedded server: warned)."""
    if client.batch is not None:
        return False
    if not endpoint.batch:
        from evolve.runs._batches import JournalBatchLedger, run_batch_options

        ledger = JournalBatchLedger(journal) if journal is not None else None
        pending = [*ledger.pending(), *ledger.unclaimed()] if ledger is not None else []
        if not pending:
            return False
        assert journal is not None
        journal.append(Event.WARNING, message=f"{len(pending)} batch(es) a previous process submitted (or was "
                       "creating) are polled and read although --batch is off; the run's other calls go interactively")
        client.batch = run_batch_options(journal, poll_initial_s=endpoint.batch_poll_s, submit=False)
        return True
    if endpoint.provider == "embedded":
        if journal is not None:
            journal.append(Event.WARNING, message="--batch: the embedded server has no Batch API; every call goes "
                           "interactively")
        return False
    if endpoint.is_group:  # a batch is one endpoint's job; the replicas share no files or batches
        if journal is not None:
            journal.append(Event.WARNING, message="--batch: a Batch API belongs to one endpoint, not a group of "
                           "replicas; every call goes interactively (give one --base-url to batch)")
        return False
    from evolve.runs._batches import run_batch_options

    client.batch = run_batch_options(journal, poll_initial_s=endpoint.batch_poll_s)
    return True


def _limit_spend(client: Client, endpoint: EndpointSettings, journal: Journal | None) -> bool:
    """Put the endpoint's spending limit (``max_usd``, ``max_tokens``) on ``client``, counting
    what the run's earlier processes paid (its journal); False when there is no limit or the
    client has one already (an outer step of the run set it). The limit and the prices are
    journaled (``spend_limit``; the prices alone when there is no limit) for the report.

    Raises:
        ConfigError: ``max_usd`` without prices.
    """
    from evolve.llm import SpendLimit, spend_of_usage

    if client.spend_limit is not None:
        return False
    price = endpoint.price()
    if endpoint.max_usd is None and endpoint.max_tokens is None:
        if journal is not None and price is not None:  # no limit: the prices still price the report's figures
            journal.append(Event.SPEND_LIMIT, session=client.session, max_usd=None, max_tokens=None,
                           price=dataclasses.asdict(price))
        return False
    before = spend_of_usage(run_usage(journal)) if journal is not None else None
    client.spend_limit = SpendLimit(max_usd=endpoint.max_usd, max_tokens=endpoint.max_tokens, price=price, before=before)
    if journal is not None:
        journal.append(Event.SPEND_LIMIT, session=client.session, max_usd=endpoint.max_usd,
                       max_tokens=endpoint.max_tokens, price=None if price is None else dataclasses.asdict(price),
                       spent_before=dataclasses.asdict(client.spend_limit.before))
    return True


@contextlib.contextmanager
def _journal_spend_stop(journal: Journal | None, client: Client) -> Iterator[None]:
    """Journal ``spend_limit_reached`` when the block ends at the client's spending limit."""
    try:
        yield
    except SpendLimitReachedError as exc:
        limit = client.spend_limit
        if journal is not None and limit is not None:
            journal.append(Event.SPEND_LIMIT_REACHED, session=client.session, message=str(exc)[:500],
                           spent=dataclasses.asdict(limit.spent()), usd=limit.spent_usd())
        raise


def _journal_usage(journal: Journal | None, client: Client) -> None:
    if journal is not None:
        journal.append(Event.USAGE, session=client.session, usage=client.usage_snapshot(), **_endpoints(client))


def _endpoints(client: Client) -> dict[str, Any]:
    """``{"endpoints": {replica: usage}}`` for a usage event of a client routing over replicas,
    else nothing (read back by :func:`~evolve.runs.run_endpoint_usage`)."""
    snapshot = getattr(client, "endpoint_usage_snapshot", None)
    endpoints = snapshot() if snapshot is not None else {}
    return {"endpoints": endpoints} if endpoints else {}


class UsageLedger:
    """Journals a client's calls as they happen (its ``on_call_event``), so that a process
    killed outright (``kill -9``) leaves every call it paid for in the journal.

    A ``sent`` event precedes each request; after each paid call (answered or failed) one
    ``calls`` event carries what the client counted since the previous one
    (``{tag: [n per CALL_COUNTS]}``, so the retries and the cache hits in between ride along);
    cache hits alone are written at most once every :attr:`hit_interval_s` seconds (a resume
    replaying 10^5 cached calls writes a few hundred lines, not 10^5). Lines are written
    without fsync (:meth:`Journal.note`): about 185 bytes per paid call (measured), 18.5 MB per 10^5.

    Args:
        journal: The run's journal.
        client: The client whose :meth:`~evolve.llm.Client.usage_snapshot` is journaled.
    """

    hit_interval_s = 1.0

    def __init__(self, journal: Journal, client: Client) -> None:
        self.journal = journal
        self.client = client
        self._written: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()
        self._last = time.monotonic()

    def __call__(self, kind: str, tag: str) -> None:
        if kind == "sent":
            self.journal.note(Event.SENT, session=self.client.session, tag=tag)
        elif kind == "done" or time.monotonic() - self._last >= self.hit_interval_s:
            self.flush()

    def flush(self) -> None:
        """Journal what was counted since the last ``calls`` event (nothing when nothing was)."""
        with self._lock:
            now = self.client.usage_snapshot()
            counts = {}
            for tag, fields in now.items():
                before = self._written.get(tag, {})
                delta = [int(fields.get(name, 0)) - int(before.get(name, 0)) for name in CALL_COUNTS]
                if any(delta):
                    counts[tag] = delta
            self._last = time.monotonic()
            if counts:
                self._written = now
                self.journal.note(Event.CALLS, session=self.client.session, counts=counts)
