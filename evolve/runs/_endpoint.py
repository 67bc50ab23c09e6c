"""The endpoint settings of a run: where its model calls go, how fast, at what price and limit.

Kept apart from the client that opens them (:mod:`evolve.runs._client`), so a reader of run
settings - ``evolve report``, ``compare``, a config - loads no HTTP stack.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from evolve.llm._types import MAX_CONTEXT_TOKENS
from evolve.records import Record
from evolve.runs._progress import Price, price_of

__all__ = ["EndpointSettings", "context_window", "output_limit_problem"]


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

        for base in self.urls:
            parts = urlsplit(base)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"base_url (--base-url) {base!r} is not an http:// or https:// URL; give the server's "
                                 "OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
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
