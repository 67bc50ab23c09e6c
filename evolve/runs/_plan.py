"""A run's cost before it is paid: calls, tokens, USD and hours by phase (``--plan``).

A plan counts what a command would send, phase by phase, without sending anything. Where the
count depends on what the model answers (racing prunes some mutants early, a run may stop at
the accepted budget) a phase gives a range: ``calls_low`` if every uncertain call is saved,
``calls_high`` if none is. Prompt tokens come from the requests the command would really send,
counted by the server's tokenizer when it offers one (llama.cpp and vLLM serve ``POST
/tokenize`` at the server root) or estimated at a stated number of characters per token.
Completion tokens are always an estimate (the model decides how long it answers); the plan
says where the estimate comes from.
"""

from __future__ import annotations

import contextlib
import json
import math
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from evolve.records import Record
from evolve.runs._progress import Price

__all__ = [
    "CHARS_PER_TOKEN", "CallPlan", "PhasePlan", "cached_keys", "count_tokens", "estimate_tokens", "has_batch_prices", "measured_calls_per_hour",
    "prompt_text",
    "tokenize_url",
]

CHARS_PER_TOKEN = 3.5
"""Characters per token of the estimate when no tokenizer answers: English prose with some
JSON and markup runs at 3-4 characters per token in the BPE vocabularies of current models;
3.5 errs towards more tokens (a plan should not promise less than it costs)."""


class PhasePlan(Record):
    """The calls of one phase of a run, and their tokens, as a range.

    Attributes:
        phase: What the phase does (``"initial evaluation"``, ``"evolution (racing)"``, ...).
        calls_low: Fewest model calls the phase makes (racing: every mutant pruned at the first
            rung); cache hits of requests repeated within the run are not calls.
        calls_high: Most model calls (racing: none pruned); ``>= calls_low``.
        prompt_tokens_low: Input tokens of ``calls_low`` calls.
        prompt_tokens_high: Input tokens of ``calls_high`` calls.
        completion_tokens_low: Output tokens of ``calls_low`` calls (an estimate).
        completion_tokens_high: Output tokens of ``calls_high`` calls (an estimate).
        cached_prompt_tokens_low: Of ``prompt_tokens_low``, those a warm prefix cache can serve
            (the part of each prompt an earlier call of the run already sent); 0 when not known.
        cached_prompt_tokens_high: The same of ``prompt_tokens_high``.
        batchable: The phase is not interactive (no call waits on another's answer), so
            ``--batch`` may send it through a provider's Batch API at batch prices.
        note: One line on how the count was made, or what makes it a range.
    """

    phase: str
    calls_low: int = Field(ge=0)
    calls_high: int = Field(ge=0)
    prompt_tokens_low: int = Field(default=0, ge=0)
    prompt_tokens_high: int = Field(default=0, ge=0)
    completion_tokens_low: int = Field(default=0, ge=0)
    completion_tokens_high: int = Field(default=0, ge=0)
    cached_prompt_tokens_low: int = Field(default=0, ge=0)
    cached_prompt_tokens_high: int = Field(default=0, ge=0)
    batchable: bool = False
    note: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> PhasePlan:
        for name in ("calls", "prompt_tokens", "completion_tokens", "cached_prompt_tokens"):
            low, high = getattr(self, f"{name}_low"), getattr(self, f"{name}_high")
            if low > high:
                raise ValueError(f"phase {self.phase!r}: {name}_low ({low}) exceeds {name}_high ({high})")
        if self.cached_prompt_tokens_high > self.prompt_tokens_high or self.cached_prompt_tokens_low > self.prompt_tokens_low:
            raise ValueError(f"phase {self.phase!r}: more cached prompt tokens than prompt tokens")
        return self

    @classmethod
    def of_calls(
        cls, phase: str, calls_low: int, calls_high: int, *, prompt_tokens_per_call: float,
        completion_tokens_per_call: float | tuple[float, float], cached_share: float = 0.0,
        batchable: bool = False, note: str = "",
    ) -> PhasePlan:
        """A phase whose calls all have the same mean size (tokens rounded up).

        Args:
            phase: The phase's name.
            calls_low: Fewest calls.
            calls_high: Most calls.
            prompt_tokens_per_call: Mean input tokens of one call.
            completion_tokens_per_call: Mean output tokens of one call, or ``(low, high)`` per
                call (the low end goes with ``calls_low``, the high end with ``calls_high``).
            cached_share: Fraction (0..1) of the prompt tokens a warm prefix cache can serve.
            batchable: See :attr:`batchable`.
            note: See :attr:`note`.

        Raises:
            ValueError: A count is negative, a low end exceeds its high end, or
                ``cached_share`` is outside 0..1.
        """
        if not 0.0 <= cached_share <= 1.0:
            raise ValueError(f"cached_share must be within 0..1, not {cached_share}")
        done_low, done_high = (completion_tokens_per_call if isinstance(completion_tokens_per_call, tuple)
                               else (completion_tokens_per_call, completion_tokens_per_call))
        prompt_low = math.ceil(calls_low * prompt_tokens_per_call)
        prompt_high = math.ceil(calls_high * prompt_tokens_per_call)
        return cls(phase=phase, calls_low=calls_low, calls_high=calls_high,
                   prompt_tokens_low=prompt_low, prompt_tokens_high=prompt_high,
                   completion_tokens_low=math.ceil(calls_low * done_low),
                   completion_tokens_high=math.ceil(calls_high * done_high),
                   cached_prompt_tokens_low=math.floor(prompt_low * cached_share),
                   cached_prompt_tokens_high=math.floor(prompt_high * cached_share),
                   batchable=batchable, note=note)

    def usd(self, price: Price, *, batch: bool = False, cached: bool = False) -> tuple[float, float]:
        """``(low, high)`` USD of the phase at ``price``.

        Args:
            price: What the endpoint charges.
            batch: Price the phase at the batch prices (``Price.batch_*``, each falling back on
                the interactive price) if it is :attr:`batchable`; else the interactive prices.
            cached: Charge :attr:`cached_prompt_tokens_low`/``_high`` at the cached-input price
                (``Price.cached_input_usd_per_m``; the input price when None).
        """
        batch = batch and self.batchable
        low = price.usd(self.prompt_tokens_low, self.completion_tokens_low, batch=batch,
                        cached_prompt_tokens=self.cached_prompt_tokens_low if cached else 0)
        high = price.usd(self.prompt_tokens_high, self.completion_tokens_high, batch=batch,
                         cached_prompt_tokens=self.cached_prompt_tokens_high if cached else 0)
        return low, high


def has_batch_prices(price: Price | None) -> bool:
    """Whether ``price`` carries a batch price."""
    return price is not None and (price.batch_input_usd_per_m is not None or price.batch_output_usd_per_m is not None)


class CallPlan(Record):
    """What a command would send, phase by phase, before anything is sent.

    Attributes:
        command: The command planned (``"evolve calibrate"``, ``"evolve judge"``, ...).
        phases: Its phases in the order they run.
        token_source: How prompt tokens were counted: ``"the server's tokenizer (/tokenize)"``
            or ``"estimate: 3.5 characters per token"``.
        completion_source: How completion tokens were estimated.
        notes: Further lines printed under the table (what the plan leaves out, assumptions).
    """

    command: str
    phases: tuple[PhasePlan, ...]
    token_source: str
    completion_source: str = ""
    notes: tuple[str, ...] = ()

    def totals(self) -> PhasePlan:
        """All phases added up (``batchable`` when every phase is)."""
        def add(field: str) -> int:
            return sum(getattr(p, field) for p in self.phases)

        return PhasePlan(
            phase="total", calls_low=add("calls_low"), calls_high=add("calls_high"),
            prompt_tokens_low=add("prompt_tokens_low"), prompt_tokens_high=add("prompt_tokens_high"),
            completion_tokens_low=add("completion_tokens_low"), completion_tokens_high=add("completion_tokens_high"),
            cached_prompt_tokens_low=add("cached_prompt_tokens_low"),
            cached_prompt_tokens_high=add("cached_prompt_tokens_high"),
            batchable=bool(self.phases) and all(p.batchable for p in self.phases),
        )

    def usd(self, price: Price, *, batch: bool = False, cached: bool = False) -> tuple[float, float]:
        """``(low, high)`` USD of the whole plan (see :meth:`PhasePlan.usd`): with ``batch`` the
        batchable phases at batch prices, the others at interactive prices; with ``cached`` the
        prompt tokens a warm prefix cache can serve at the cached-input price."""
        spans = [p.usd(price, batch=batch, cached=cached) for p in self.phases]
        return sum(s[0] for s in spans), sum(s[1] for s in spans)

    def hours(self, calls_per_hour: float) -> tuple[float, float]:
        """``(low, high)`` hours at ``calls_per_hour`` calls per hour (> 0).

        Raises:
            ValueError: ``calls_per_hour`` is not positive.
        """
        if not calls_per_hour > 0:
            raise ValueError(f"calls per hour must be positive, not {calls_per_hour}")
        total = self.totals()
        return total.calls_low / calls_per_hour, total.calls_high / calls_per_hour

    def render(self, price: Price | None = None, calls_per_hour: float | None = None, *,
               throughput_source: str = "") -> str:
        """The plan as a plain-text table, with totals, USD and hours.

        Args:
            price: Prices the USD column and lines; None: no money shown (and a line saying how
                to get it).
            calls_per_hour: Throughput for the hours line; None: a line saying how to give it.
            throughput_source: Where ``calls_per_hour`` comes from (e.g. ``"--calls-per-hour"``).

        Returns:
            Lines joined by newlines, ending without one.
        """
        rows = [(p, p.usd(price) if price else None) for p in self.phases]
        total = self.totals()
        header = ["phase", "calls", "prompt tokens", "completion tokens"] + (["USD"] if price else []) + ["batch"]
        table = [header]
        for phase, usd in [*rows, (total, self.usd(price) if price else None)]:
            line = [phase.phase, _span(phase.calls_low, phase.calls_high),
                    _span(phase.prompt_tokens_low, phase.prompt_tokens_high),
                    _span(phase.completion_tokens_low, phase.completion_tokens_high)]
            if usd is not None:
                line.append(_usd_span(*usd))
            line.append("" if phase is total else ("yes" if phase.batchable else "no"))
            table.append(line)
        lines = [f"Plan of {self.command} (no call made)", *_columns(table)]
        lines += self._notes(price, calls_per_hour, throughput_source)
        return "\n".join(lines)

    def _notes(self, price: Price | None, calls_per_hour: float | None, throughput_source: str) -> list[str]:
        lines = [""]
        for p in self.phases:
            if p.note:
                lines.append(f"  {p.phase}: {p.note}")
        lines.append(f"Prompt tokens: {self.token_source}.")
        if self.completion_source:
            lines.append(f"Completion tokens: {self.completion_source}.")
        lines += list(self.notes)
        lines.append(self._money_line(price))
        lines.append(self._hours_line(calls_per_hour, throughput_source))
        return lines

    def _money_line(self, price: Price | None) -> str:
        if price is None:
            return "USD: give --price-in and --price-out (USD per million input and output tokens) to price the plan."
        low, high = self.usd(price)
        text = (f"USD at {price.input_usd_per_m:g}/{price.output_usd_per_m:g} per million input/output tokens, "
                f"every prompt token at the full price: {_usd_span(low, high)}")
        cached = price.cached_input_usd_per_m is not None and self.totals().cached_prompt_tokens_high > 0
        if cached:
            c_low, c_high = self.usd(price, cached=True)
            text += (f"; with a warm prefix cache serving the prompt prefixes the run repeats at "
                     f"{price.cached_input_usd_per_m:g} per million (--price-cached-in): {_usd_span(c_low, c_high)}")
        if has_batch_prices(price):
            b_low, b_high = self.usd(price, batch=True, cached=cached)
            also = " as well" if cached else ""
            text += f"; with --batch{also} (batchable phases at batch prices): {_usd_span(b_low, b_high)}"
        return text + "."

    def _hours_line(self, calls_per_hour: float | None, source: str) -> str:
        if calls_per_hour is None and source.startswith("measured in "):  # a resumed run's journal, without one
            return (f"Hours: nothing was {source} yet (no paid call finished there); give --calls-per-hour (calls the "
                    "endpoint answers per hour at this concurrency).")
        if calls_per_hour is None:
            return ("Hours: give --calls-per-hour (calls the endpoint answers per hour at this concurrency), or plan "
                    "with --resume RUN to use the throughput that run measured.")
        low, high = self.hours(calls_per_hour)
        where = f" ({source})" if source else ""
        return f"Hours at {calls_per_hour:,.0f} calls per hour{where}: {_hours_span(low, high)}."


def _span(low: int, high: int) -> str:
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def _usd(x: float) -> str:
    return f"${x:,.2f}" if x >= 1 or x == 0 else f"${x:.4f}"


def _usd_span(low: float, high: float) -> str:
    return _usd(low) if _usd(low) == _usd(high) else f"{_usd(low)}-{_usd(high)}"


def _hours_span(low: float, high: float) -> str:
    return f"{low:,.1f} h" if round(low, 1) == round(high, 1) else f"{low:,.1f}-{high:,.1f} h"


def _columns(table: list[list[str]]) -> list[str]:
    """Rows of cells aligned in columns (first column left, the others right)."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    out = []
    for row in table:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)]
        out.append("  ".join(cells).rstrip())
    return out


def estimate_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Tokens of ``text`` at ``chars_per_token`` characters per token (rounded up, >= 1 for
    a non-empty text)."""
    return math.ceil(len(text) / chars_per_token)


def tokenize_url(base_url: str) -> str:
    """The tokenizer route of an OpenAI-compatible server: ``POST /tokenize`` at the server root
    (the base URL without its ``/v1``), where llama.cpp's server and vLLM serve it."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return f"{root}/tokenize"


TOKENIZE_SAMPLE = 64
"""Prompts sent to a server's tokenizer per plan at most; the others are counted at the
characters per token measured on them (a paper-scale plan has 10^4-10^5 prompts)."""


def count_tokens(
    texts: Sequence[str], *, base_url: str | None = None, model: str | None = None,
    headers: dict[str, str] | None = None, chars_per_token: float = CHARS_PER_TOKEN, timeout_s: float = 10.0,
    sample: int = TOKENIZE_SAMPLE,
) -> tuple[list[int], str]:
    """Tokens of each text: the server's tokenizer when it has one, else an estimate.

    The tokenizer is tried on the first text; if that fails (no route, an error status, an
    unreadable answer, no server) every text is estimated at ``chars_per_token``. When it
    answers, up to ``sample`` texts (evenly spread) are tokenized exactly and the others are
    counted at the characters per token measured on those. Tokenizing sends no completion
    request and costs nothing.

    Args:
        texts: The prompts (a request's messages joined, :func:`prompt_text`).
        base_url: The endpoint's base URL (ending in ``/v1``); None: estimate (the embedded
            endpoint is never started for a plan).
        model: Model id sent with the tokenize request (vLLM wants it; llama.cpp ignores it).
        headers: Extra headers (e.g. ``Authorization``).
        chars_per_token: Characters per token of the estimate, > 0.
        timeout_s: Timeout of one tokenize request, seconds.
        sample: Most texts tokenized by the server (>= 1).

    Returns:
        ``(tokens, source)``: one count per text, and one clause saying how they were counted
        (``"the server's tokenizer (POST .../tokenize)"``, ``"estimate: 3.5 characters per token"``).
    """
    estimate = f"estimate: {chars_per_token:g} characters per token"
    if base_url is None or not texts:
        return [estimate_tokens(t, chars_per_token) for t in texts], estimate
    url = tokenize_url(base_url)
    k = max(1, min(sample, len(texts)))
    chosen = sorted({round(i * (len(texts) - 1) / max(1, k - 1)) for i in range(k)})
    exact: dict[int, int] = {}
    for i in chosen:
        n = _tokenize(url, texts[i], model=model, headers=headers or {}, timeout_s=timeout_s)
        if n is None and not exact:
            return ([estimate_tokens(t, chars_per_token) for t in texts],
                    f"{estimate} (the server's tokenizer, POST {url}, did not answer)")
        if n is not None:
            exact[i] = n
    if len(exact) == len(texts):
        return [exact[i] for i in range(len(texts))], f"the server's tokenizer (POST {url})"
    measured = sum(len(texts[i]) for i in exact) / max(1, sum(exact.values()))
    measured = measured if measured > 0 else chars_per_token
    counts = [exact[i] if i in exact else estimate_tokens(t, measured) for i, t in enumerate(texts)]
    return counts, (f"the server's tokenizer (POST {url}) on {len(exact)} of {len(texts):,} prompts, "
                    f"{measured:.2f} characters per token applied to the others")


def _tokenize(url: str, text: str, *, model: str | None, headers: dict[str, str], timeout_s: float) -> int | None:
    """Tokens of ``text`` by the server at ``url``, or None when it does not answer with them."""
    body: dict[str, Any] = {"content": text, "add_special": False}
    if model:
        body["model"] = model
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310 - the user's endpoint
            payload = json.loads(answer.read().decode())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return _token_count(payload)


def _token_count(payload: Any) -> int | None:
    """The count in a tokenize answer: llama.cpp's ``{"tokens": [...]}``, vLLM's ``{"count": n,
    "tokens": [...]}``; None for anything else."""
    if not isinstance(payload, dict):
        return None
    count = payload.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    tokens = payload.get("tokens")
    if isinstance(tokens, list):
        return len(tokens)
    return None


def prompt_text(messages: Iterable[Any]) -> str:
    """The text of a request's messages, joined as a tokenizer would see them (roles and
    contents; a chat template adds a few tokens per message that this leaves out)."""
    parts = []
    for m in messages:
        role = getattr(m, "role", None) or (m.get("role") if isinstance(m, dict) else "")
        content = getattr(m, "content", None) if not isinstance(m, dict) else m.get("content")
        parts.append(f"{role}\n{content or ''}")
    return "\n".join(parts)


PAUSE_S = 600.0
"""A gap between two counted calls longer than this (seconds) is a pause (the run was stopped
and resumed later), not time spent calling."""


def measured_calls_per_hour(journal_path: Path) -> float | None:
    """Paid calls per hour a run achieved, from its journal's ``calls`` events.

    The time counted is from each paid call to the next, leaving out pauses longer than
    :data:`PAUSE_S` (a run stopped and resumed later); cache hits are not calls.

    Args:
        journal_path: A run's ``journal.jsonl`` (read only; a missing file gives None).

    Returns:
        Calls per hour, or None when the journal has fewer than two paid calls or no time
        between them.
    """
    if not Path(journal_path).is_file():
        return None
    times: list[float] = []
    paid_per_event: list[int] = []
    with open(journal_path, encoding="utf-8") as fh:
        for line in fh:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            counts = event.get("counts") if isinstance(event, dict) and event.get("event") == "calls" else None
            if not isinstance(counts, dict):
                continue
            paid = sum(int(c[0]) for c in counts.values() if isinstance(c, list) and c and isinstance(c[0], int))
            if paid > 0 and isinstance(event.get("t"), (int, float)):
                times.append(float(event["t"]))
                paid_per_event.append(paid)
    busy = calls = 0.0
    for i in range(1, len(times)):  # the calls of an event were made since the one before it
        if 0 < times[i] - times[i - 1] <= PAUSE_S:
            busy += times[i] - times[i - 1]
            calls += paid_per_event[i]
    return calls * 3600.0 / busy if busy > 0 else None


def cached_keys(cache_path: Path | None, keys: Iterable[str]) -> set[str]:
    """Which of ``keys`` a response cache already answers (read only: a missing cache file is
    not created, a cache that cannot be read answers none).

    Args:
        cache_path: The SQLite response cache (``evolve.llm.ResponseCache``); None: none.
        keys: Cache keys (:meth:`evolve.llm.ChatRequest.cache_key` with the endpoint's identity).

    Returns:
        The keys found.
    """
    wanted = list(dict.fromkeys(keys))
    if cache_path is None or not Path(cache_path).is_file() or not wanted:
        return set()
    import sqlite3

    found: set[str] = set()
    uri = Path(cache_path).resolve().as_uri()
    for query in (f"{uri}?mode=ro", f"{uri}?immutable=1"):  # a WAL database without its -shm file needs the second
        try:
            with contextlib.closing(sqlite3.connect(query, uri=True, timeout=5)) as conn:
                for start in range(0, len(wanted), 500):
                    chunk = wanted[start:start + 500]
                    rows = conn.execute(f"SELECT key FROM responses WHERE key IN ({','.join('?' * len(chunk))})", chunk)
                    found.update(row[0] for row in rows)
            return found
        except sqlite3.Error:
            found.clear()
    return found
