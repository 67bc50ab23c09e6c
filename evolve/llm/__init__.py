"""The LLM client layer: every model call in `evolve` goes through here.

A :class:`Client` wraps one *provider* (an OpenAI-compatible endpoint, or the ``fake``
provider that answers from a script, registered like any other, as inspect_ai's
``mockllm``) with bounded concurrency, retries with exponential backoff on transient
failures (HTTP 429/5xx, timeouts), a persistent SQLite :class:`ResponseCache` keyed on the full
request (so a repeated run costs no calls and a resumed run pays only for unfinished ones) and
per-tag token accounting. Failures come back as :class:`CallFailure` values, never as scores.
Structured requests use :func:`response_format` (a strict JSON schema from a pydantic model)
and :func:`parse_json_object`; their replies are cached only when they fit the schema sent
(``jsonschema``, JSON types read strictly), so a reply outside it is asked again on resume.
A provider's own secrets (its key, header values, credentials in its URL) are replaced by
``[redacted]`` in every text it returns, so an endpoint that echoes them puts them nowhere.
Several replicas of one model sit behind one :class:`RoutingProvider`: calls sharing a prompt
prefix (a request's ``affinity``: the judges pass the case) go to the same replica,
by rendezvous hashing, so its prefix cache stays warm; a failing replica is taken out.
A :class:`SpendLimit` on a client (``--max-usd``, ``--max-tokens``) refuses, before it leaves,
any call that could take the run past its limit (:class:`~evolve.errors.SpendLimitReachedError`
stops the run, resumable); what a run paid is a :class:`Spend` (cache hits are free).
Lists of independent requests may go through an endpoint's Batch API instead
(:class:`BatchOptions` on :attr:`Client.batch`, :meth:`Client.map` with ``batchable=True``):
one JSONL file of lines whose ``custom_id`` is the cache key and whose body is the interactive
one, answered within a 24 h window at batch prices, each answer checked and cached as if it had
come interactively; its usage counts under the tag ``"<tag> (batch)"``.
"""

from typing import TYPE_CHECKING

from evolve.lazy import lazy_members
from evolve.llm._budget import CHARS_PER_TOKEN, Spend, SpendLimit, one_call, request_chars, spend_of_usage
from evolve.llm._cache import ResponseCache
from evolve.llm._schema import limits_sent, validate_reply
from evolve.llm._secrets import REDACTED, url_credentials
from evolve.llm._structured import fence, parse_json_object, response_format, validation_problem
from evolve.llm._types import MAX_CONTEXT_TOKENS, MAX_OUTPUT_TOKENS, MAX_SEED, CallFailure, ChatRequest, ChatResponse, Message, Usage

# The HTTP client, its providers and the Batch API runner (anyio, tenacity, httpx) load only when
# one of these is first used: records, limits and replies are read without them, so commands
# that need no model - ``--help``, ``report``, ``compare`` - start fast.
_LAZY = {
    **dict.fromkeys(("BATCH_TAG_SUFFIX", "MAX_BATCH_BYTES", "MAX_BATCH_LINES", "BatchLedger", "BatchOptions",
                     "BatchRunner", "MemoryBatchLedger", "OutputLine", "batch_line", "batch_tag", "body_problem",
                     "is_batch_tag", "read_output_lines", "request_lines"), "evolve.llm._batch"),
    **dict.fromkeys(("Client", "Result"), "evolve.llm._client"),
    **dict.fromkeys(("FakeOutput", "FakeProvider"), "evolve.llm._fake"),
    **dict.fromkeys(("OpenAICompatibleProvider", "Provider", "get_provider", "register_provider",
                     "strip_length_limits"), "evolve.llm._providers"),
    **dict.fromkeys(("PREFIX_CHARS", "RoutingProvider", "rendezvous_ranking", "routing_key"), "evolve.llm._routing"),
}

if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers and readers
    from evolve.llm._batch import (
        BATCH_TAG_SUFFIX,
        MAX_BATCH_BYTES,
        MAX_BATCH_LINES,
        BatchLedger,
        BatchOptions,
        BatchRunner,
        MemoryBatchLedger,
        OutputLine,
        batch_line,
        batch_tag,
        body_problem,
        is_batch_tag,
        read_output_lines,
        request_lines,
    )
    from evolve.llm._client import Client, Result
    from evolve.llm._fake import FakeOutput, FakeProvider
    from evolve.llm._providers import (
        OpenAICompatibleProvider,
        Provider,
        get_provider,
        register_provider,
        strip_length_limits,
    )
    from evolve.llm._routing import PREFIX_CHARS, RoutingProvider, rendezvous_ranking, routing_key


__getattr__ = lazy_members(__name__, _LAZY, globals())


__all__ = [
    "BATCH_TAG_SUFFIX",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_LINES",
    "BatchLedger",
    "BatchOptions",
    "BatchRunner",
    "MemoryBatchLedger",
    "OutputLine",
    "batch_line",
    "batch_tag",
    "body_problem",
    "is_batch_tag",
    "read_output_lines",
    "request_lines",
    "MAX_CONTEXT_TOKENS",
    "MAX_OUTPUT_TOKENS",
    "MAX_SEED",
    "PREFIX_CHARS",
    "REDACTED",
    "CHARS_PER_TOKEN",
    "CallFailure",
    "ChatRequest",
    "ChatResponse",
    "Client",
    "FakeOutput",
    "FakeProvider",
    "Message",
    "OpenAICompatibleProvider",
    "Provider",
    "ResponseCache",
    "Spend",
    "SpendLimit",
    "RoutingProvider",
    "Result",
    "Usage",
    "fence",
    "get_provider",
    "limits_sent",
    "one_call",
    "parse_json_object",
    "register_provider",
    "request_chars",
    "rendezvous_ranking",
    "response_format",
    "routing_key",
    "spend_of_usage",
    "strip_length_limits",
    "url_credentials",
    "validate_reply",
    "validation_problem",
]
