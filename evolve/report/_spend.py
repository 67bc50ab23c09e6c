"""What a run spent against its spending limit (``--max-usd``, ``--max-tokens``), read from its journal."""

from __future__ import annotations

from dataclasses import asdict

from evolve.llm import spend_of_usage
from evolve.outputs import PriceRecord, SpendRecord
from evolve.runs import Event, Journal, Price, run_usage

__all__ = ["render_spend", "spend_report"]


def spend_report(journal: Journal) -> dict | None:
    """The spending of a run over all its processes, beside the limit and prices it ran under.

    Returns:
        None when no process of the run had a spending limit or prices (nothing to add to the
        calls and tokens); else ``{"max_usd", "max_tokens"}`` (the last process's limit; None:
        none), ``"price"`` (USD per million tokens, the last given, or None), ``"spent"``
        (:class:`evolve.llm.Spend` as a dict: paid calls, their prompt, completion and
        prefix-cached prompt tokens, the batch parts), ``"tokens"``, ``"usd"`` (None without a
        price), ``"stopped_at_limit"`` (how many times a process stopped at its limit) and
        ``"stops"`` (their messages).
    """
    limits = [e for e in journal.events() if e.get("event") == Event.SPEND_LIMIT.value]
    stops = [e for e in journal.events() if e.get("event") == Event.SPEND_LIMIT_REACHED.value]
    if not limits and not stops:
        return None
    limited = [e for e in limits if e.get("max_usd") is not None or e.get("max_tokens") is not None]
    limit = limited[-1] if limited else {}
    priced = [e["price"] for e in limits if isinstance(e.get("price"), dict)]
    price = _price(priced[-1]) if priced else None
    spent = spend_of_usage(run_usage(journal))
    return {"max_usd": limit.get("max_usd"), "max_tokens": limit.get("max_tokens"),
            "price": None if price is None else asdict(price), "spent": asdict(spent), "tokens": spent.tokens,
            "usd": spent.usd(price), "stopped_at_limit": len(stops), "stops": [str(e.get("message", "")) for e in stops]}


def _price(fields: dict) -> Price | None:
    try:
        return Price(**fields)
    except TypeError:  # a journal from another version: the figures stay unpriced
        return None


def render_spend(spend: SpendRecord | None) -> list[str]:
    """Markdown: the limit, what was spent (paid calls, tokens, prefix-cached tokens, USD) and
    whether the run stopped at its limit; nothing when the run had neither limit nor prices."""
    if spend is None:
        return []
    s = spend.spent
    limit = [f"--max-usd {spend.max_usd:g}"] if spend.max_usd is not None else []
    limit += [f"--max-tokens {spend.max_tokens:,}"] if spend.max_tokens is not None else []
    usd = f", ${spend.usd:.4f}" if spend.usd is not None else ""
    lines = ["### Spending", "",
             f"Spending limit: {' and '.join(limit) if limit else 'none'}. Spent over every process of the run: "
             f"{s.calls:,} paid calls, {spend.tokens:,} tokens ({s.prompt_tokens:,} prompt, of which "
             f"{s.cached_prompt_tokens:,} served from the server's prefix cache; {s.completion_tokens:,} completion){usd}"
             + (f" at the prices given ({_prices(spend.price)})" if spend.price is not None else "") + "."]
    if s.batch_prompt_tokens:
        lines[-1] += (f" Of these, {s.batch_prompt_tokens:,} prompt and {s.batch_completion_tokens:,} completion "
                      "tokens went through a Batch API (priced at the batch prices).")
    n = spend.stopped_at_limit
    if n:
        lines[-1] += f" The run stopped at its limit {n} time{'s' if n != 1 else ''} and was resumed with a higher one."
    elif limit:
        lines[-1] += " The run never reached its limit."
    return [*lines, ""]


def _prices(price: PriceRecord) -> str:
    """``in $2/M, out $8/M, cached in $0.5/M`` (the prices given)."""
    names = {"input_usd_per_m": "in", "output_usd_per_m": "out", "cached_input_usd_per_m": "cached in",
             "batch_input_usd_per_m": "batch in", "batch_output_usd_per_m": "batch out"}
    values = price.model_dump()
    return ", ".join(f"{name} ${values[key]:g}/M" for key, name in names.items() if values[key] is not None)
