"""Request/response records exchanged with a model endpoint."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from evolve.records import Record

MAX_OUTPUT_TOKENS: Final = 131_072
"""Hard cap on any output limit (``max_tokens``) evolve sends, tokens: 128 Ki, above the longest
outputs hosted models offer. A larger value in a configuration is a typo, refused before any
call; where the endpoint's context is known, output limits are also checked against it."""

MAX_SEED: Final = 2**31 - 1
"""Largest sampling seed a configuration may set: what OpenAI-compatible servers accept as
``seed`` (the judge's derived seeds use the same space)."""

MAX_CONTEXT_TOKENS: Final = 10_000_000
"""Hard cap on a declared context window (``endpoint.context_tokens``), tokens: the largest
published context windows are about ten million tokens."""


class Message(Record):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(Record):
    """Everything that determines a chat completion; its hash is the cache key.

    Attributes:
        model: Model id sent to the endpoint.
        messages: The conversation, in order.
        temperature: Sampling temperature, 0..2 (0 for the judge, 0.3 for mutation; consilium paper: judge calls, calibration).
        top_p: Nucleus sampling mass, in (0, 1] (1.0 = off).
        seed: Sampling seed; a fresh seed gives a fresh, separately cached sample.
        max_tokens: Output limit, tokens, 1..:data:`MAX_OUTPUT_TOKENS`.
        response_format: OpenAI ``response_format`` (e.g. a ``json_schema``), or None.
        tag: Free label for accounting (``judge``, ``mutation`` ...); part of the cache key.
        affinity: Routing key for several replicas (:class:`~evolve.llm.RoutingProvider`):
            calls with the same key go to the same replica, so its prefix cache stays warm
            (the judges pass the case id). Not sent, and NOT part of the cache key:
            where a call went never changes its answer. ``""``: routed by the shared prefix.
    """

    model: str
    messages: tuple[Message, ...]
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    max_tokens: int = Field(default=1024, ge=1, le=MAX_OUTPUT_TOKENS)
    response_format: dict[str, Any] | None = None
    tag: str = ""
    affinity: str = ""

    def cache_key(self, endpoint: str) -> str:
        """SHA-256 of the canonical JSON of this request plus the endpoint identity.

        ``affinity`` is left out: it says where a call goes, not what it asks.

        Args:
            endpoint: Identity of the serving endpoint (base URL, provider name or replica group).
        """
        payload = json.dumps(
            {"endpoint": endpoint, "request": self.model_dump(mode="json", exclude={"affinity"})},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ChatResponse(BaseModel):
    """A completed chat call.

    Attributes:
        text: The assistant message content.
        reasoning: Reasoning the provider returned apart from the content (OpenAI-compatible
            ``reasoning_content`` or ``reasoning`` of the message); ``""`` when none was.
        finish_reason: ``stop`` for a complete answer; ``length`` means it was cut by
            ``max_tokens`` (for JSON outputs: broken - treated as a model failure).
        prompt_tokens: Input tokens billed/processed.
        completion_tokens: Output tokens.
        cached_prompt_tokens: Prompt tokens the server served from its prefix cache.
        latency_s: Wall time of the HTTP call in seconds (0 when served from our cache).
        cached: True when served from the local response cache (no call made).
        endpoint: The replica that answered (its URL), set by
            :class:`~evolve.llm.RoutingProvider`; ``""`` with a single endpoint.
        batch: Answered through a Batch API (priced at the batch prices).
    """

    model_config = ConfigDict(frozen=True)

    text: str
    reasoning: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    endpoint: str = ""
    batch: bool = False


class CallFailure(BaseModel):
    """A call that failed after all retries (never turned into a score)."""

    model_config = ConfigDict(frozen=True)

    error: str
    kind: Literal["transient", "fatal", "unsupported"] = "fatal"
    attempts: int = 1


class Usage(BaseModel):
    """Running totals of a client, per tag.

    Attributes:
        calls: Calls that reached the endpoint.
        cache_hits: Calls answered by the local cache.
        failures: Calls that failed after retries.
        prompt_tokens: Sum over endpoint calls and cache hits (the cost the run represents).
        completion_tokens: Same, output side.
        billed_prompt_tokens: Prompt tokens of endpoint calls only (what was paid; cache hits
            cost nothing), the server's prefix-cached ones included.
        billed_completion_tokens: Completion tokens of endpoint calls only.
        cached_prompt_tokens: Of ``billed_prompt_tokens``, those the server served from its
            prefix cache (``usage.prompt_tokens_details.cached_tokens``; 0 where the endpoint
            does not report them), priced at the cached-input price when one is given.
    """

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    billed_prompt_tokens: int = 0
    billed_completion_tokens: int = 0
    cached_prompt_tokens: int = 0

    def add(self, response: ChatResponse) -> None:
        """Count one response."""
        if response.cached:
            self.cache_hits += 1
        else:
            self.calls += 1
            self.billed_prompt_tokens += response.prompt_tokens
            self.billed_completion_tokens += response.completion_tokens
            self.cached_prompt_tokens += response.cached_prompt_tokens
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens


__all__ = ["CallFailure", "ChatRequest", "ChatResponse", "Message", "Usage"]
