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
from typing import Any, TypeVar

from pydantic import BaseModel

from evolve.errors import ConfigError, SpendLimitReachedError
from evolve.llm import Client, OpenAICompatibleProvider, Provider, ResponseCache, get_provider
from evolve.local import running_llama_servers
from evolve.runs._endpoint import EndpointSettings
from evolve.runs._journal import CALL_COUNTS, Event, Journal, run_usage

__all__ = ["default_cache_path", "open_client", "owned_client", "with_cache_path"]

_C = TypeVar("_C", bound=BaseModel)


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
        elif kind == "unsent":
            self.journal.note(Event.UNSENT, session=self.client.session, tag=tag)
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
