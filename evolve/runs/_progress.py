"""Progress of long work: the hook engines report to, one that draws nothing, and the meter
that turns finished calls into tokens and money (what a progress line shows)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from evolve.errors import ConfigError

if TYPE_CHECKING:  # the model client loads only for on_call: a reader of progress needs no HTTP stack
    from evolve.llm import Result

__all__ = ["CallMeter", "NoProgress", "Price", "ProgressHook", "on_call", "price_of", "report_step"]


class ProgressHook(Protocol):
    """Receives progress from an engine (the CLI draws it with rich).

    Work may run concurrently (criteria, cases), so every call names its ``key``; a hook
    keeps one bar per key. Calls may come from several threads.
    """

    def phase(self, description: str, total: int, key: str = "", unit: str = "calls") -> None:
        """A phase of ``total`` steps starts on bar ``key``.

        Args:
            description: What the phase does (``"judging"``, ``"c1: mutation"``).
            total: Steps the phase will take.
            key: The bar.
            unit: What one step is, plural - the thing that costs (``"judge calls"``,
                ``"mutation calls"``, ``"pipeline runs"``).
        """
        ...

    def advance(self, n: int = 1, key: str = "", prompt_tokens: int = 0, completion_tokens: int = 0,
                cached: bool = False, cached_prompt_tokens: int = 0, batch: bool = False) -> None:
        """``n`` steps of bar ``key`` finished.

        Args:
            n: Steps finished (0 reports tokens of a step already counted).
            key: The bar.
            prompt_tokens: Input tokens of these steps.
            completion_tokens: Output tokens of these steps.
            cached: The tokens were served from the response cache (or reused from the run
                folder): they cost nothing now.
            cached_prompt_tokens: Of ``prompt_tokens`` of steps not ``cached``, those the endpoint
                served from its prefix cache (``usage.prompt_tokens_details.cached_tokens``):
                charged the cached-input price.
            batch: The steps' calls were answered through a Batch API: charged the batch prices.
        """
        ...


class NoProgress:
    """A progress hook that draws nothing (the default of the library functions)."""

    def phase(self, description: str, total: int, key: str = "", unit: str = "calls") -> None:
        pass

    def advance(self, n: int = 1, key: str = "", prompt_tokens: int = 0, completion_tokens: int = 0,
                cached: bool = False, cached_prompt_tokens: int = 0, batch: bool = False) -> None:
        pass


class _Tokens(Protocol):
    """One call's accounting: a :class:`~evolve.llm.ChatResponse` or a recorded call."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...

    @property
    def cached(self) -> bool: ...

    @property
    def cached_prompt_tokens(self) -> int: ...


def report_step(progress: ProgressHook, key: str, calls: Iterable[_Tokens], *, reused: bool = False) -> None:
    """Advance bar ``key`` by one step made of ``calls`` (none for a failed call).

    The tokens of calls served from the cache are reported apart (``cached=True``), so a step
    whose calls were partly cached is charged only for the others; so are those of calls
    answered through a Batch API (``batch=True``: the batch prices). The prompt tokens the
    endpoint served from its prefix cache (a call's ``cached_prompt_tokens``) are charged the
    cached-input price.

    Args:
        progress: The hook.
        key: The bar.
        calls: The step's calls.
        reused: The step was read back from the run folder: all its calls cost nothing now.
    """
    calls = list(calls)
    reused_calls = [c for c in calls if c.cached or reused]
    fresh = [c for c in calls if not (c.cached or reused)]
    parts = [(False, [c for c in fresh if not getattr(c, "batch", False)]),
             (True, [c for c in fresh if getattr(c, "batch", False)])]
    parts = [(batch, group) for batch, group in parts if group]
    step = 1
    for batch, group in parts:
        progress.advance(step, key=key, prompt_tokens=sum(c.prompt_tokens for c in group),
                         completion_tokens=sum(c.completion_tokens for c in group),
                         cached_prompt_tokens=sum(c.cached_prompt_tokens for c in group), batch=batch)
        step = 0
    if reused_calls or step:
        progress.advance(step, key=key, prompt_tokens=sum(c.prompt_tokens for c in reused_calls),
                         completion_tokens=sum(c.completion_tokens for c in reused_calls), cached=bool(reused_calls))


def on_call(progress: ProgressHook, key: str) -> Callable[[int, Result], None]:
    """The ``on_result`` callback of :meth:`~evolve.llm.Client.map` that advances bar ``key``
    by one step per finished call, with the call's tokens (a failure has none)."""
    from evolve.llm import ChatResponse

    return lambda _index, result: report_step(progress, key, [result] if isinstance(result, ChatResponse) else [])


@dataclass(frozen=True)
class Price:
    """What an endpoint charges, in USD per million tokens.

    A prompt's tokens include those the server served from its prefix cache (OpenAI-style
    ``usage.prompt_tokens_details.cached_tokens``); those are charged the cached-input price
    when one is given, else the ordinary input price. Calls sent through a Batch API are
    charged the batch prices when given, else the interactive ones; their cached tokens are
    charged the cached-input price too (the cheaper of it and the batch input price).

    Attributes:
        input_usd_per_m: USD per million input (prompt) tokens, >= 0.
        output_usd_per_m: USD per million output (completion) tokens, >= 0.
        cached_input_usd_per_m: USD per million input tokens served from the server's prefix
            cache; None: charged as ordinary input.
        batch_input_usd_per_m: USD per million input tokens of a batch call; None: the
            interactive input price.
        batch_output_usd_per_m: USD per million output tokens of a batch call; None: the
            interactive output price.
    """

    input_usd_per_m: float
    output_usd_per_m: float
    cached_input_usd_per_m: float | None = None
    batch_input_usd_per_m: float | None = None
    batch_output_usd_per_m: float | None = None

    def usd(self, prompt_tokens: float, completion_tokens: float, *, cached_prompt_tokens: float = 0,
            batch: bool = False) -> float:
        """USD for ``prompt_tokens`` input and ``completion_tokens`` output tokens.

        Args:
            prompt_tokens: Input tokens, the cached ones included.
            completion_tokens: Output tokens.
            cached_prompt_tokens: Of ``prompt_tokens``, those served from the server's prefix
                cache (clipped to ``prompt_tokens``).
            batch: The tokens were sent through a Batch API.
        """
        input_price = self.input_usd_per_m
        output_price = self.output_usd_per_m
        if batch:
            input_price = input_price if self.batch_input_usd_per_m is None else self.batch_input_usd_per_m
            output_price = output_price if self.batch_output_usd_per_m is None else self.batch_output_usd_per_m
        cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
        cached_price = input_price if self.cached_input_usd_per_m is None else min(self.cached_input_usd_per_m, input_price)
        return ((prompt_tokens - cached) * input_price + cached * cached_price + completion_tokens * output_price) / 1e6


def price_of(price_in: float | None, price_out: float | None, *, cached_in: float | None = None,
             batch_in: float | None = None, batch_out: float | None = None) -> Price | None:
    """The price from ``--price-in``/``--price-out`` (USD per million tokens) and the optional
    ``--price-cached-in``, ``--price-batch-in``/``--price-batch-out``; None when neither input
    nor output price is given.

    Raises:
        ConfigError: Only one of input and output price is given, a cached or batch price is
            given without them, only one of the batch prices is given, or a price is negative.
    """
    extras = {"price_cached_in": cached_in, "price_batch_in": batch_in, "price_batch_out": batch_out}
    if price_in is None and price_out is None:
        given = [name for name, value in extras.items() if value is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} needs the ordinary prices too: give --price-in and --price-out "
                              "(or endpoint.price_in and endpoint.price_out), in USD per million tokens")
        return None
    if price_in is None or price_out is None:
        raise ConfigError("give both prices, input and output (--price-in and --price-out, or endpoint.price_in and "
                          "endpoint.price_out), in USD per million tokens")
    if (batch_in is None) != (batch_out is None):
        raise ConfigError("give both batch prices, input and output (--price-batch-in and --price-batch-out), "
                          "in USD per million tokens, or neither")
    for name, value in {"price_in": price_in, "price_out": price_out, **extras}.items():
        if value is not None and value < 0:
            raise ConfigError(f"prices cannot be negative ({name} {value} USD per million tokens)")
    return Price(price_in, price_out, cached_in, batch_in, batch_out)


@dataclass
class CallMeter:
    """Steps (calls, or pipeline runs) of one phase - or of all work - their tokens and their cost.

    A step served from the cache costs nothing, but its tokens still count towards the mean
    size of a step; the steps still to come are assumed not cached (what they cost at most).

    Attributes:
        total: Steps the phase takes; None when unknown (all work of a run).
        price: What the endpoint charges; None: no money is computed.
        done: Steps finished.
        cached: Steps served from the cache (free).
        prompt_tokens: Input tokens of the finished steps, cached ones included.
        completion_tokens: Output tokens of the finished steps, cached ones included.
        billed_prompt_tokens: Input tokens not served from the cache.
        billed_completion_tokens: Output tokens not served from the cache.
        billed_cached_prompt_tokens: Of ``billed_prompt_tokens``, those the endpoint served
            from its prefix cache (charged the cached-input price).
        batch_prompt_tokens: Of ``billed_prompt_tokens``, those of calls answered through a
            Batch API (charged the batch input price).
        batch_completion_tokens: Of ``billed_completion_tokens``, the same.
        batch_cached_prompt_tokens: Of ``billed_cached_prompt_tokens``, the same.
    """

    total: int | None = None
    price: Price | None = None
    done: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    billed_prompt_tokens: int = 0
    billed_completion_tokens: int = 0
    billed_cached_prompt_tokens: int = 0
    batch_prompt_tokens: int = 0
    batch_completion_tokens: int = 0
    batch_cached_prompt_tokens: int = 0

    def add(self, n: int = 1, prompt_tokens: int = 0, completion_tokens: int = 0, cached: bool = False,
            cached_prompt_tokens: int = 0, batch: bool = False) -> None:
        """Count ``n`` finished steps and their tokens (see :meth:`ProgressHook.advance`)."""
        self.done += n
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        if cached:
            self.cached += n
        else:
            self.billed_prompt_tokens += prompt_tokens
            self.billed_completion_tokens += completion_tokens
            self.billed_cached_prompt_tokens += cached_prompt_tokens
            if batch:
                self.batch_prompt_tokens += prompt_tokens
                self.batch_completion_tokens += completion_tokens
                self.batch_cached_prompt_tokens += cached_prompt_tokens

    @property
    def tokens(self) -> int:
        """Tokens of the finished steps (input and output, cached ones included)."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def remaining(self) -> int | None:
        """Steps still to come; None when the total is unknown."""
        return None if self.total is None else max(self.total - self.done, 0)

    def _mean(self) -> tuple[float, float] | None:
        """Mean input and output tokens per finished step; None before the first one."""
        return (self.prompt_tokens / self.done, self.completion_tokens / self.done) if self.done > 0 else None

    def tokens_to_go(self) -> int | None:
        """Tokens the remaining steps will take at the mean so far; None when unknown."""
        mean, remaining = self._mean(), self.remaining
        if remaining == 0:
            return 0
        return None if mean is None or remaining is None else round((mean[0] + mean[1]) * remaining)

    def spent_usd(self) -> float | None:
        """USD paid so far (cached steps free, prefix-cached prompt tokens at the cached-input
        price, Batch API calls at the batch prices); None without a price."""
        if self.price is None:
            return None
        interactive = self.price.usd(self.billed_prompt_tokens - self.batch_prompt_tokens,
                                     self.billed_completion_tokens - self.batch_completion_tokens,
                                     cached_prompt_tokens=self.billed_cached_prompt_tokens - self.batch_cached_prompt_tokens)
        return interactive + self.price.usd(self.batch_prompt_tokens, self.batch_completion_tokens,
                                            cached_prompt_tokens=self.batch_cached_prompt_tokens, batch=True)

    def expected_usd(self) -> float | None:
        """USD at the end of the phase: spent so far plus the remaining steps at the mean
        size so far, none of them cached (neither by the response cache nor by the endpoint's
        prefix cache: at most what they cost); None without a price or an estimate."""
        spent, mean, remaining = self.spent_usd(), self._mean(), self.remaining
        if spent is None or self.price is None or remaining is None:
            return None
        if remaining == 0:
            return spent
        return None if mean is None else spent + self.price.usd(mean[0] * remaining, mean[1] * remaining)

    def describe(self, unit: str = "calls") -> str:
        """One line: steps done (of the total) and left, tokens so far and to go, USD spent
        and expected (only with a price), e.g.
        ``"40/100 judge calls (5 cached), 60 left · 12.3k tokens, ~18.4k to go · $0.012 spent, ~$0.031 expected"``."""
        done = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        calls = f"{done} {unit}" + (f" ({self.cached:,} cached)" if self.cached else "")
        if self.remaining is not None:
            calls += f", {self.remaining:,} left"
        parts = [calls, f"{_count(self.tokens)} tokens"]
        to_go = self.tokens_to_go()
        if to_go is not None and self.remaining:
            parts[-1] += f", ~{_count(to_go)} to go"
        spent, expected = self.spent_usd(), self.expected_usd()
        if spent is not None:
            parts.append(f"{_usd(spent)} spent" + (f", ~{_usd(expected)} expected" if expected is not None else ""))
        return " · ".join(parts)


def _count(n: int) -> str:
    """``950``, ``12.3k``, ``4.5M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def _usd(x: float) -> str:
    """USD with two significant digits below a dollar (``$0.00018``), cents above (``$12.34``)."""
    if x <= 0:
        return "$0.00"
    if x >= 1:
        return f"${x:,.2f}"
    decimals = min(max(2, 1 - math.floor(math.log10(x))), 8)
    return f"${x:.{decimals}f}"
