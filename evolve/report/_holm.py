"""Holm's correction, marked on the paired verdicts of one report."""

from __future__ import annotations

from collections.abc import Sequence

from evolve.stats import holm

__all__ = ["DEFINITIVE", "mark_holm"]

DEFINITIVE = ("better", "worse", "higher", "lower")
"""Verdicts that claim a difference (the rest say none can be shown)."""


def mark_holm(verdicts: Sequence[dict], alpha: float) -> dict:
    """Holm's step-down correction (Holm 1979) over every verdict that has a ``p_value``.

    Each such verdict dict gains, in place, ``holm_p`` (the Holm-adjusted p-value) and
    ``holm_survives`` (for a definitive verdict, :data:`DEFINITIVE`: whether ``holm_p < alpha``;
    None for any other verdict).

    Args:
        verdicts: The report's verdict dicts (``verdict``, ``p_value`` in [0, 1] or None).
        alpha: The family-wise error level, e.g. 0.05.

    Returns:
        ``{"n", "correction", "alpha", "definitive", "not_surviving"}``: comparisons with a
        p-value, ``"Holm"``, ``alpha``, definitive verdicts, and those that do not survive.
    """
    found = [v for v in verdicts if v.get("p_value") is not None]
    for v, p in zip(found, holm([v["p_value"] for v in found])):
        v["holm_p"] = p
        v["holm_survives"] = (p is not None and p < alpha) if v["verdict"] in DEFINITIVE else None
    definitive = [v for v in found if v["verdict"] in DEFINITIVE]
    return {"n": len(found), "correction": "Holm", "alpha": alpha, "definitive": len(definitive),
            "not_surviving": sum(v["holm_survives"] is False for v in definitive)}
