"""Turning ``config.endpoint`` into a ready :class:`~evolve.llm.Client`."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Callable

from evolve.archive import Journal
from evolve.config import CalibrationConfig, EndpointSettings
from evolve.errors import ConfigError
from evolve.llm import Client, OpenAICompatibleProvider, ResponseCache, get_provider


def default_cache_path() -> Path:
    """``$EVOLVE_CACHE_DIR/responses.sqlite`` (default ``~/.cache/evolve/responses.sqlite``)."""
    from evolve.local import cache_dir

    return cache_dir() / "responses.sqlite"


def _running_llama_servers() -> list[int]:
    """PIDs of llama-server processes already running on this machine (Linux /proc; else [])."""
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "llama-server":
                pids.append(int(comm.parent.name))
        except OSError:
            continue
    return sorted(pids)


def open_client(
    config: CalibrationConfig, *, journal: Journal | None = None
) -> tuple[Client, Callable[[], None] | None]:
    """Build the client of a run; start the embedded server if the endpoint says so.

    Returns:
        ``(client, closer)``: call ``closer()`` after ``client.close()`` to stop a server this
        function started (None when nothing was started).

    Raises:
        ConfigError: Unknown provider or missing base URL.
        LocalServerError: The embedded server is not installed or failed to start.
    """
    ep: EndpointSettings = config.endpoint
    cache = ResponseCache(config.cache_path or default_cache_path())
    api_key = os.environ.get(ep.api_key_env)
    closer = None
    if ep.provider == "embedded":
        from evolve.local import LOCAL_MODELS, LocalServer

        if ep.local_model not in LOCAL_MODELS:
            raise ConfigError(f"unknown local model {ep.local_model!r}; choose one of {sorted(LOCAL_MODELS)}.")
        others = _running_llama_servers()
        if others and journal is not None:
            journal.append("warning", message=f"other llama-server processes are running (pids {others}); "
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
            journal.append("embedded_server_started", model=spec.name, base_url=base_url, pid=server.pid)
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
