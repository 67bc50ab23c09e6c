"""The order judge calls leave in, so a server's prefix cache serves most of each prompt.

A judge prompt is laid out shared parts first (protocol, case, target, criterion, then the
guidance: :class:`evolve.judge.Judge`), so two calls on the same target share everything up to the
guidance, and two calls on targets of the same case share everything up to the target. A server
keeps the last prompt of each of its slots (llama.cpp, vLLM and hosted endpoints all reuse a
cached prefix). So the calls are cut into ``lanes`` sequences, each a contiguous run of the
items grouped by case, every candidate and seed of an item one after another, and each sequence
is sent as one lane of :meth:`evolve.llm.Client.map` (its next call leaves when its last has
come back): with as many lanes as server slots, the slot a lane's call finds free is the one its
last call used, which holds the same item, or the previous item of the same case. The flat call
order (:func:`interleave`) takes the sequences call by call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["interleave", "lane_runs"]

T = TypeVar("T")


def lane_runs(case_ids: Sequence[str], lanes: int) -> list[list[int]]:
    """Item indices for each lane: the items grouped by case, then cut into contiguous runs.

    Args:
        case_ids: The case of each item, in the caller's item order (length n).
        lanes: Calls in flight (>= 1).

    Returns:
        ``min(lanes, n)`` lists of indices into ``case_ids`` that together hold each index once:
        the cases in order of first appearance, each case's items in their own order, cut into
        runs whose lengths differ by at most one (the first runs are the longer ones).

    Raises:
        ValueError: ``lanes`` < 1.
    """
    if lanes < 1:
        raise ValueError(f"lanes must be >= 1, got {lanes}")
    by_case: dict[str, list[int]] = {}
    for i, case in enumerate(case_ids):
        by_case.setdefault(case, []).append(i)
    grouped = [i for indices in by_case.values() for i in indices]
    n, k = len(grouped), min(lanes, len(grouped))
    runs, start = [], 0
    for lane in range(k):
        size = n // k + (1 if lane < n % k else 0)
        runs.append(grouped[start:start + size])
        start += size
    return runs


def interleave(sequences: Sequence[Sequence[T]]) -> list[T]:
    """One element of each sequence in turn (round robin), skipping exhausted sequences.

    While every sequence still has elements, element ``k`` and element ``k + len(sequences)``
    of the result come from the same sequence.
    """
    out: list[T] = []
    longest = max((len(s) for s in sequences), default=0)
    for position in range(longest):
        out += [s[position] for s in sequences if position < len(s)]
    return out
