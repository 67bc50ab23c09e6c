"""A hard spending limit: a call that could take the run past it is not sent."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import astuple, dataclass
from typing import Protocol

from evolve.errors import ConfigError, SpendLimitReachedError
from evolve.llm._types import ChatRequest

__all__ = ["CHARS_PER_TOKEN", "Spend", "SpendLimit", "one_call", "request_chars", "spend_of_usage"]

CHARS_PER_TOKEN = 3.0
"""Characters per prompt token assumed before the first answer shows the real ratio: on the
low side of what BPE tokenizers give on English (about 4), so the first estimates are high,
and a call is refused rather than let through past the limit."""


class Priced(Protocol):
    """What a spending limit needs of a price (:class:`evolve.runs.Price` is one)."""

    def usd(self, prompt_tokens: float, completion_tokens: float, *, cached_prompt_tokens: float = 0,
            batch: bool = False) -> float: ...


@dataclass(frozen=True)
class Spend:
    """Calls paid and their tokens (cache hits are free and left out).

    Attributes:
        calls: Calls answered by the endpoint (interactively or by batch).
        prompt_tokens: Their input tokens, the server's prefix-cached ones included.
        completion_tokens: Their output tokens.
        cached_prompt_tokens: Of ``prompt_tokens``, those the server served from its prefix cache.
        batch_prompt_tokens: Of ``prompt_tokens``, those of calls answered through a Batch API.
        batch_completion_tokens: Of ``completion_tokens``, those of batch calls.
        batch_cached_prompt_tokens: Of ``cached_prompt_tokens``, those of batch calls.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    batch_prompt_tokens: int = 0
    batch_completion_tokens: int = 0
    batch_cached_prompt_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Input and output tokens together (what ``--max-tokens`` counts)."""
        return self.prompt_tokens + self.completion_tokens

    def usd(self, price: Priced | None) -> float | None:
        """USD at ``price``: cached prompt tokens at its cached-input price, batch calls at its
        batch prices; None without a price."""
        if price is None:
            return None
        interactive = price.usd(self.prompt_tokens - self.batch_prompt_tokens,
                                self.completion_tokens - self.batch_completion_tokens,
                                cached_prompt_tokens=self.cached_prompt_tokens - self.batch_cached_prompt_tokens)
        batch = price.usd(self.batch_prompt_tokens, self.batch_completion_tokens,
                          cached_prompt_tokens=self.batch_cached_prompt_tokens, batch=True)
        return interactive + batch

    def __add__(self, other: Spend) -> Spend:
        return Spend(*(a + b for a, b in zip(astuple(self), astuple(other))))


def one_call(prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0, *, batch: bool = False) -> Spend:
    """The :class:`Spend` of one paid call (``batch``: answered through a Batch API)."""
    if batch:
        return Spend(1, prompt_tokens, completion_tokens, cached_prompt_tokens,
                     prompt_tokens, completion_tokens, cached_prompt_tokens)
    return Spend(1, prompt_tokens, completion_tokens, cached_prompt_tokens)


def spend_of_usage(usage: Mapping[str, Mapping[str, int]], *, is_batch: Callable[[str], bool] | None = None) -> Spend:
    """What a run's usage (``{tag: counts}``, as :meth:`Client.usage_snapshot` or
    :func:`evolve.runs.run_usage` give it) paid, summed over its tags.

    Counts journaled before the billed ones existed (no ``billed_prompt_tokens``) are
    estimated: the tag's tokens shared out over its calls and cache hits alike, the calls'
    part counted as paid.

    Args:
        usage: The counts per tag.
        is_batch: Whether a tag counts calls answered through a Batch API (default: tags
            ending in `` (batch)``, as :func:`evolve.llm.batch_tag` names them).
    """
    batch_tag = is_batch or (lambda tag: tag.endswith(" (batch)"))
    total = Spend()
    for tag, counts in usage.items():
        calls = int(counts.get("calls", 0))
        if "billed_prompt_tokens" in counts:
            prompt, completion = int(counts["billed_prompt_tokens"]), int(counts.get("billed_completion_tokens", 0))
        else:
            share = calls / max(calls + int(counts.get("cache_hits", 0)), 1)
            prompt = round(int(counts.get("prompt_tokens", 0)) * share)
            completion = round(int(counts.get("completion_tokens", 0)) * share)
        part = one_call(prompt, completion, int(counts.get("cached_prompt_tokens", 0)), batch=batch_tag(str(tag)))
        total = total + Spend(calls, *astuple(part)[1:])
    return total


def request_chars(request: ChatRequest) -> int:
    """Characters a request sends as prompt: its messages and its output schema."""
    schema = request.response_format
    return sum(len(m.content) for m in request.messages) + (len(str(schema)) if schema else 0)


@dataclass(frozen=True)
class _Ticket:
    """A call allowed out, holding its estimate until its answer (or failure) comes back."""

    prompt_chars: int
    prompt_tokens: float
    completion_tokens: float
    batch: bool = False


class SpendLimit:
    """The spending limit of one run, checked before each request leaves.

    Spent = what earlier processes of the run paid (``before``, read from its journal) + what
    this process's calls paid + the estimate of every call still in flight. A call is refused
    (:class:`~evolve.errors.SpendLimitReachedError`, nothing sent) when spent plus its own
    estimate would pass ``max_tokens`` or, priced, ``max_usd``; from then on every call is
    refused, so the run ends. Only calls that go to the endpoint pass here: a response-cache
    hit costs nothing and is never refused.

    A call's estimate: prompt tokens from its characters (:func:`request_chars`) at the ratio
    of tokens to characters measured over this process's answered calls, before the first
    answer at :data:`CHARS_PER_TOKEN`; completion tokens at the mean of the calls paid so far
    (this run's, earlier processes included), before the first one at the request's
    ``max_tokens`` (the most it can cost). Estimates are priced without the cached-input
    discount (the most they can cost). The limit is kept to within the estimates' error:
    a call whose real size exceeds its estimate can take the total slightly past the limit.

    Args:
        max_usd: Most USD the run may spend (needs ``price``); None: no USD limit.
        max_tokens: Most tokens (prompt and completion of paid calls) the run may use; None:
            no token limit.
        price: How tokens turn into USD (:class:`evolve.runs.Price`).
        before: What the run spent before this process.

    Raises:
        ConfigError: ``max_usd`` without a price, or a negative limit.
    """

    def __init__(self, *, max_usd: float | None = None, max_tokens: int | None = None, price: Priced | None = None,
                 before: Spend | None = None) -> None:
        if max_usd is not None and price is None:
            raise ConfigError(f"--max-usd {max_usd} needs prices to turn tokens into USD: give --price-in and "
                              "--price-out (USD per million tokens; or endpoint.price_in and endpoint.price_out in "
                              "the config), or limit tokens with --max-tokens instead")
        if (max_usd is not None and max_usd < 0) or (max_tokens is not None and max_tokens < 0):
            raise ConfigError(f"a spending limit cannot be negative (max_usd {max_usd}, max_tokens {max_tokens})")
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self.price = price
        self.before = before or Spend()
        self.paid = Spend()  # this process's answered calls
        self.reached: str | None = None  # why the first call was refused, once one was
        self._chars = 0  # prompt characters of this process's answered calls
        self._in_flight: list[_Ticket] = []
        self._lock = threading.Lock()

    def spent(self) -> Spend:
        """What the run has paid so far, earlier processes included (calls in flight not)."""
        with self._lock:
            return self.before + self.paid

    def spent_usd(self) -> float | None:
        """:meth:`spent` in USD; None without a price."""
        return self.spent().usd(self.price)

    def reserve(self, prompt_chars: int, max_tokens: int | None, *, batch: bool = False) -> _Ticket:
        """Let one call out, or refuse it.

        Args:
            prompt_chars: Characters the call sends (:func:`request_chars`).
            max_tokens: Its output limit, tokens (None: none known, e.g. an embedding call).
            batch: The call goes as a line of a Batch API request (priced at batch prices).

        Returns:
            A ticket to hand to :meth:`settle` once the call has ended.

        Raises:
            SpendLimitReachedError: The call could take the run past a limit (or one was
                reached already); the message names the limit, the spend and the estimate.
        """
        with self._lock:
            if self.reached is not None:
                raise SpendLimitReachedError(self.reached)
            ticket = self._estimate(prompt_chars, max_tokens, batch)
            problem = self._past_limit(ticket)
            if problem is not None:
                self.reached = problem
                raise SpendLimitReachedError(problem)
            self._in_flight.append(ticket)
            return ticket

    def settle(self, ticket: _Ticket, *, prompt_tokens: int = 0, completion_tokens: int = 0,
               cached_prompt_tokens: int = 0, answered: bool = True) -> None:
        """A call let out by :meth:`reserve` has ended: its estimate gives way to what it cost.

        Args:
            ticket: What :meth:`reserve` returned.
            prompt_tokens, completion_tokens, cached_prompt_tokens: What the endpoint reported.
            answered: False for a call that failed (nothing reported: counted as free).
        """
        with self._lock:
            self._in_flight.remove(ticket)
            if answered:
                self.paid = self.paid + one_call(prompt_tokens, completion_tokens, cached_prompt_tokens, batch=ticket.batch)
                self._chars += ticket.prompt_chars

    def _estimate(self, prompt_chars: int, max_tokens: int | None, batch: bool) -> _Ticket:
        chars_per_token = self._chars / self.paid.prompt_tokens if self._chars and self.paid.prompt_tokens else CHARS_PER_TOKEN
        total = self.before + self.paid
        completion = total.completion_tokens / total.calls if total.calls else float(max_tokens or 0)
        return _Ticket(prompt_chars, prompt_chars / chars_per_token, completion, batch)

    def _past_limit(self, ticket: _Ticket) -> str | None:
        """Why ``ticket`` would pass a limit (the message), or None (call under the lock)."""
        spent = self.before + self.paid
        out = [*self._in_flight, ticket]
        prompt = sum(t.prompt_tokens for t in out)
        completion = sum(t.completion_tokens for t in out)
        stop = ("the call was not sent and the run stops here; finished calls are cached, so resuming with a higher "
                "limit pays nothing twice")
        if self.max_tokens is not None and spent.tokens + prompt + completion > self.max_tokens:
            return (f"the token limit (--max-tokens {self.max_tokens:,}) would be passed: {spent.tokens:,} tokens spent "
                    f"over {spent.calls:,} paid calls, {round(prompt + completion):,} more estimated for the next call "
                    f"and those in flight; {stop}")
        if self.max_usd is not None and self.price is not None:
            spent_usd = spent.usd(self.price) or 0.0
            more = sum(self.price.usd(t.prompt_tokens, t.completion_tokens, batch=t.batch) for t in out)
            if spent_usd + more > self.max_usd:
                return (f"the USD limit (--max-usd {self.max_usd:g}) would be passed: {_usd(spent_usd)} spent over "
                        f"{spent.calls:,} paid calls, {_usd(more)} more estimated for the next call and those in "
                        f"flight; {stop}")
        return None


def _usd(x: float) -> str:
    """``$12.34``; below a dollar to four significant digits (``$0.00003733``), never in
    scientific notation."""
    if x >= 1 or x <= 0:
        return f"${max(x, 0):,.2f}"
    return f"${x:.{min(max(2, 3 - math.floor(math.log10(x))), 10)}f}"
