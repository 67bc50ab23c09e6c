"""Numbers in report tables: an estimate with its interval, written one way everywhere."""

from __future__ import annotations


def format_interval(estimate: float | None, low: float | None, high: float | None, *, digits: int = 3,
                    scale: float = 1.0, suffix: str = "", missing: str = "—") -> str:
    """``estimate [low, high]`` for a Markdown table cell.

    Args:
        estimate: The point estimate; None writes ``missing``.
        low, high: The interval's bounds; the estimate is written alone unless both are given.
        digits: Decimals of every number written.
        scale: Factor applied to the three numbers (100 for percentages).
        suffix: Written after the estimate (``"%"``).
        missing: What stands for an estimate that was not computed (``—``) or is undefined.

    Returns:
        For example ``2.310 [2.100, 2.520]``, ``12.5% [8.0, 17.1]`` or ``—``; a value that rounds
        to zero is written ``0.000``, never ``-0.000``.
    """
    if estimate is None:
        return missing
    text = format_number(estimate * scale, digits=digits) + suffix
    if low is None or high is None:
        return text
    return f"{text} [{format_number(low * scale, digits=digits)}, {format_number(high * scale, digits=digits)}]"


def format_number(value: float, *, digits: int = 3, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals, never ``-0.000`` (a tiny negative rounds to zero).

    Args:
        value: The number.
        digits: Decimals written.
        signed: Write the sign of a positive number and of zero too (``+0.400``, ``+0.000``), as
            a difference is written.

    Returns:
        For example ``0.125``, ``-0.020`` or, signed, ``+0.000``.
    """
    text = f"{value:.{digits}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return f"+{text}" if signed and not text.startswith("-") else text


def count_noun(n: int, noun: str) -> str:
    """``1 judge call``, ``2 judge calls`` (``noun`` singular; an ``s`` added unless ``n`` is 1)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
