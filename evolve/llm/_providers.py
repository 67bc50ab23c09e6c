"""Model providers behind one interface, and their registry (in the spirit of inspect_ai)."""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.to_thread

from evolve.errors import (
    ConfigError,
    EndpointConnectionError,
    EndpointError,
    EndpointServerError,
    TransientEndpointError,
    UnsupportedFeatureError,
)
from evolve.llm._secrets import Scrubber
from evolve.llm._types import ChatRequest, ChatResponse


@functools.cache
def _tls_context() -> Any:
    """The process's one TLS context for model endpoints, made on first use.

    Building a context reads the certificate bundle (about 24 ms of CPU), which httpx would
    otherwise do for every client, and a provider makes one client per event loop. It is made
    as httpx makes its default (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` are honoured when first
    read, else certifi's bundle), so sharing it changes no verification.
    """
    import httpx

    return httpx.create_ssl_context()


@runtime_checkable
class Provider(Protocol):
    """Anything that turns a :class:`ChatRequest` into a :class:`ChatResponse`.

    ``endpoint_id`` identifies the serving endpoint in cache keys (two endpoints never share
    cached answers). ``complete`` raises :class:`TransientEndpointError` for failures worth a
    retry (429, 5xx, timeouts, dropped connections) and :class:`EndpointError` otherwise.
    """

    endpoint_id: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...


@runtime_checkable
class EmbeddingProvider(Protocol):
    """A provider that can also embed texts (optional; :meth:`Client.embed` checks for it).

    ``embed`` returns one vector per text, in order, and raises like ``complete``:
    :class:`TransientEndpointError` for failures worth a retry, :class:`EndpointError`
    otherwise (including "this endpoint serves no embeddings").
    """

    endpoint_id: str

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]: ...


_REGISTRY: dict[str, Callable[..., Provider]] = {}


def register_provider(name: str, factory: Callable[..., Provider]) -> None:
    """Register a provider factory under ``name`` (e.g. ``"fake"``, ``"openai_compatible"``)."""
    _REGISTRY[name] = factory


def get_provider(name: str, **kwargs: Any) -> Provider:
    """Build a registered provider.

    Raises:
        ConfigError: Unknown provider name.
    """
    if name == "fake" and name not in _REGISTRY:
        import evolve.llm._fake  # noqa: F401  (registers "fake" as it loads; kept lazy with the package)
    if name not in _REGISTRY:
        raise ConfigError(f"unknown provider {name!r}; choose one of {sorted(_REGISTRY)}.")
    return _REGISTRY[name](**kwargs)


class OpenAICompatibleProvider:
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint (OpenAI, OpenRouter, vLLM, llama-server).

    :meth:`embed` also uses ``/v1/embeddings`` when the endpoint serves it.

    Every text this provider hands back - error messages, reply text, reasoning - passes
    through :attr:`scrub` first, so a key an endpoint echoes (a 400 quoting the
    ``Authorization`` header, say) reaches no file, journal or terminal.

    Args:
        base_url: Endpoint base URL ending in ``/v1``.
        api_key: Key sent as a bearer token; never written to any file. Local servers accept any.
        timeout: Per-request timeout, seconds.
        endpoint_id: Identity in cache keys; defaults to the base URL (with a password or a
            credential in its query redacted). The embedded server passes a port-independent
            id so its cache survives restarts on another port.
        schema_limits: Send ``maxLength``/``minLength`` in JSON schemas. Constrained decoders
            (llama.cpp, vLLM) need them to bound generation; some hosted strict modes reject
            these keywords, so set False there.
        liveness: Asked after a dropped or refused connection (in a worker thread; it may block
            a second): returns the exception that should stop the run when the server behind
            the endpoint is gone for good (the embedded server's death, say), else ``None``
            and the failure is retried as usual.
        headers: Extra headers sent with every request (an ``api-key`` header, a proxy's
            token); their values are secrets too.

    Attributes:
        scrub: A :class:`~evolve.llm._secrets.Scrubber` of this provider's secrets (the key,
            the header values, credentials in the URL; values under
            :data:`~evolve.llm._secrets.MIN_SECRET_CHARS` characters are not secrets).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        endpoint_id: str | None = None,
        schema_limits: bool = True,
        liveness: Callable[[], BaseException | None] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        import openai

        self.scrub = Scrubber.for_endpoint(api_key=api_key, headers=headers, base_url=base_url)
        self.endpoint_id = endpoint_id or self.scrub(base_url.rstrip("/"))
        self.schema_limits = schema_limits
        self._liveness = liveness
        self._timeout = timeout
        self._openai = openai
        self._settings: dict[str, Any] = {"base_url": base_url, "api_key": api_key or "not-needed", "timeout": timeout,
                                          "max_retries": 0, "default_headers": dict(headers) if headers else None}
        self._clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # event loop -> its AsyncOpenAI

    @property
    def _client(self) -> Any:
        """The ``openai.AsyncOpenAI`` of the running event loop, made on first use.

        Its connections are kept alive between calls and belong to that loop, so each loop
        (each :class:`~evolve.llm.Client`) gets its own; :meth:`aclose` closes it.
        """
        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            http_client = self._openai.DefaultAsyncHttpxClient(verify=_tls_context())
            self._clients[loop] = self._openai.AsyncOpenAI(**self._settings, http_client=http_client)
        return self._clients[loop]

    async def aclose(self) -> None:
        """Close the connections this provider keeps open on the running loop (idempotent).

        :meth:`Client.close <evolve.llm.Client.close>` calls it before stopping its loop; a
        later call on another loop opens new connections.
        """
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send one chat completion. See :class:`Provider`."""
        openai = self._openai
        start = time.perf_counter()
        try:
            # the body as built (the SDK's typed create() re-walks it against its TypedDicts, a
            # few ms of CPU per call, and sends the same JSON); the answer is parsed as create() parses it
            result = await self._client.post("/chat/completions", body=self.chat_body(request),
                                             cast_to=self._openai.types.chat.ChatCompletion)
        except openai.APIConnectionError as exc:  # includes timeouts
            raise await self._unreached(exc) from exc
        except openai.APIStatusError as exc:
            # not chained: the SDK's error quotes the endpoint's answer unscrubbed
            raise self._status_error(exc, explain_status(exc.status_code, self.scrub(str(exc)))) from None
        return self.response_of(result, latency_s=time.perf_counter() - start)

    def chat_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body of ``POST /v1/chat/completions`` for ``request``, exactly as sent (also
        the ``body`` of a Batch API line: :mod:`evolve.llm._batch`)."""
        body: dict[str, Any] = dict(
            model=request.model,
            messages=[m.model_dump() for m in request.messages],
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_tokens,
        )
        if request.seed is not None:
            body["seed"] = request.seed
        if request.response_format is not None:
            fmt = request.response_format
            body["response_format"] = fmt if self.schema_limits else strip_length_limits(fmt)
        return body

    def response_of(self, result: Any, *, latency_s: float = 0.0) -> ChatResponse:
        """A :class:`ChatResponse` from a chat completion (the SDK's object, or the JSON body of a
        Batch API output line as a dict), its texts scrubbed of this provider's secrets.

        Raises:
            TransientEndpointError: The completion has no choices.
        """
        if isinstance(result, dict):
            result = self._openai.types.chat.ChatCompletion.model_validate(result)
        if not result.choices:
            raise TransientEndpointError(f"{self.endpoint_id}: response had no choices")
        choice = result.choices[0]
        usage = result.usage
        cached_tokens = 0
        if usage is not None and getattr(usage, "prompt_tokens_details", None) is not None:
            cached_tokens = getattr(usage.prompt_tokens_details, "cached_tokens", 0) or 0
        return ChatResponse(
            text=self.scrub(choice.message.content or ""),
            reasoning=self.scrub(_separated_reasoning(choice.message)),
            finish_reason=choice.finish_reason or "stop",
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            cached_prompt_tokens=cached_tokens,
            latency_s=latency_s,
        )

    def batch_api(self) -> Any:
        """The ``openai.AsyncOpenAI`` client of this endpoint, for its files and batches routes
        (:class:`evolve.llm.BatchRunner`)."""
        return self._client

    async def _unreached(self, exc: Exception) -> TransientEndpointError:
        """The error for a call that got no answer: a timeout (retried) or no connection
        (retried and counted towards stopping the run). Raises what ``liveness`` returns first,
        when the server behind the endpoint is gone for good."""
        if self._liveness is not None:
            gone = await anyio.to_thread.run_sync(self._liveness)
            if gone is not None:
                raise gone from exc
        if isinstance(exc, self._openai.APITimeoutError):
            return TransientEndpointError(
                f"{self.endpoint_id}: timed out after {self._timeout:g} s without an answer; "
                "a slow model or a long prompt needs a longer endpoint.timeout_s"
            )
        unsent = type(exc.__cause__).__name__ in ("ConnectError", "ConnectTimeout")  # the transport's: no connection made
        return EndpointConnectionError(self.scrub(f"{self.endpoint_id}: {type(exc).__name__}: {exc}"), unsent=unsent)

    def _status_error(self, exc: Any, explained: str) -> EndpointError:
        """The error for an HTTP error status, its text scrubbed: :class:`TransientEndpointError`
        (retried) for 408/409/425/429, :class:`EndpointServerError` (retried) for 5xx, else :class:`EndpointError` saying ``explained``."""
        if exc.status_code >= 500:
            return EndpointServerError(f"{self.endpoint_id}: HTTP {exc.status_code}: {self.scrub(str(exc))}")
        if exc.status_code in (408, 409, 425, 429):
            return TransientEndpointError(f"{self.endpoint_id}: HTTP {exc.status_code}: {self.scrub(str(exc))}")
        return EndpointError(f"{self.endpoint_id}: HTTP {exc.status_code}: {explained}")

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        """Embed ``texts`` with ``POST /v1/embeddings`` (one vector per text, in order).

        Endpoints that do not serve embeddings (HTTP 404/405/501, e.g. a llama-server started
        without ``--embeddings``) raise :class:`EndpointError` at once - no retry.
        """
        openai = self._openai
        try:
            result = await self._client.embeddings.create(model=model, input=list(texts), encoding_format="float")
        except openai.APIConnectionError as exc:  # includes timeouts
            raise await self._unreached(exc) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (404, 405, 501):
                raise UnsupportedFeatureError(
                    f"{self.endpoint_id}: HTTP {exc.status_code}: the endpoint does not serve /v1/embeddings "
                    f"({self.scrub(str(exc))})"
                ) from None
            raise self._status_error(exc, self.scrub(str(exc))) from None
        data = sorted(result.data or [], key=lambda d: d.index)
        if len(data) != len(texts):
            raise EndpointError(f"{self.endpoint_id}: asked for {len(texts)} embeddings, got {len(data)}")
        vectors = []
        for item in data:
            if not isinstance(item.embedding, list):
                raise EndpointError(f"{self.endpoint_id}: embedding is not a list of floats")
            vectors.append([float(x) for x in item.embedding])
        return vectors


def _separated_reasoning(message: Any) -> str:
    """The reasoning a server returned beside the content: ``reasoning`` (OpenRouter, newer vLLM)
    or ``reasoning_content`` (DeepSeek, vLLM, llama-server); ``""`` when neither is a string."""
    for name in ("reasoning", "reasoning_content"):
        value = getattr(message, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


_STATUS_CAUSES = (
    (("context length", "context_length", "maximum context", "too many tokens", "too long", "exceeds the context", "exceeds the available context",
      "exceed_context_size"),
     "the request is longer than the model's context window. Use a model with a longer context, lower the "
     "output limits, or shorten the inputs"),
    (("model_not_found", "does not exist", "unknown model", "no such model", "model not found", "invalid model"),
     "the endpoint does not know this model. Check --model (or --judge-model) against the endpoint's model list"),
    (("unsupported", "not supported", "unrecognized", "unknown parameter", "extra inputs are not permitted",
      "response_format", "json_schema"),
     "the endpoint refused a request parameter (structured output, seed or a schema keyword). Check that it "
     "supports response_format json_schema; --no-schema-limits drops maxLength/minLength"),
)


def explain_status(status: int, message: str) -> str:
    """Name what a non-retryable HTTP error from an endpoint means, and the fix.

    Args:
        status: The HTTP status (4xx other than 408/409/425/429).
        message: The endpoint's error text.

    Returns:
        ``"<what it means>. <fix> (<the endpoint's message>)"``.
    """
    if status in (401, 403):
        return (f"the endpoint refused the API key. Check the environment variable named by --api-key-env "
                f"(default EVOLVE_API_KEY) ({message})")
    low = message.lower()
    for needles, cause in _STATUS_CAUSES:
        if any(n in low for n in needles):
            return f"{cause} ({message})"
    if status == 404:
        return f"{_STATUS_CAUSES[1][1]}, and the base URL (it should end in /v1) ({message})"
    return f"the endpoint rejected the request ({message}). Check the model name and the endpoint's documentation"


def strip_length_limits(value: Any) -> Any:
    """A copy of a JSON schema (or ``response_format``) without ``maxLength``/``minLength`` keys."""
    if isinstance(value, dict):
        return {k: strip_length_limits(v) for k, v in value.items() if k not in ("maxLength", "minLength")}
    if isinstance(value, list):
        return [strip_length_limits(v) for v in value]
    return value


def _openai_factory(
    base_url: str | None = None, api_key: str | None = None, timeout: float = 600.0, schema_limits: bool = True,
    headers: Mapping[str, str] | None = None,
) -> Provider:
    if not base_url:
        raise ConfigError("provider 'openai_compatible' needs a base_url (e.g. http://127.0.0.1:8080/v1).")
    return OpenAICompatibleProvider(
        base_url=base_url, api_key=api_key, timeout=timeout, schema_limits=schema_limits, headers=headers
    )


register_provider("openai_compatible", _openai_factory)
