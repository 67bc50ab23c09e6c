"""Row lookups shared by the report builders."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd


def rows_by(frame: pd.DataFrame, columns: Sequence[str]) -> Callable[..., pd.DataFrame]:
    """``rows(*key)``: the rows of ``frame`` whose ``columns`` equal ``key`` (one value per
    column), in their order; empty (same columns) when none do.

    The frame is split once, not filtered once per key: the builders look up every candidate,
    split, component and criterion of small frames, where each boolean filter costs a fraction
    of a millisecond.
    """
    parts = dict(iter(frame.groupby(list(columns), sort=False, observed=True)))
    empty = frame.iloc[0:0]
    return lambda *key: parts.get(key, empty)
