"""A pyribs grid archive of text elites and its measures (descriptors)."""

from __future__ import annotations

import numpy as np
from ribs.archives import GridArchive

from evolve.rubric import MAX_GUIDANCE_CHARS, Criterion

MEASURE_NAMES = ("length_chars", "signed_bias")
"""The two measures of a guidance candidate.

- ``length_chars``: guidance length in characters, range [0, 800]. Short and long guidance
  are kept apart, so a verbose prompt cannot crowd out a terse one.
- ``signed_bias``: mean of (judge score - physician score) over training pairs, range
  [-R, +R] with R the criterion's scale range. Lenient and harsh judges are kept apart, so
  the archive holds diverse stepping stones around the unbiased centre.
"""


def make_archive(criterion: Criterion, *, length_bins: int, bias_bins: int, seed: int) -> GridArchive:
    """An empty MAP-Elites grid for one criterion's guidance texts.

    Solutions are Python strings (``solution_dim=()``, ``solution_dtype=object``); the extra
    field ``candidate_id`` links each elite to ``candidates.csv``.

    Args:
        criterion: Sets the range of the bias measure.
        length_bins: Cells along the length measure.
        bias_bins: Cells along the bias measure.
        seed: Seed of the archive's random generator (parent sampling).

    Returns:
        A ``GridArchive`` with ``length_bins * bias_bins`` cells.
    """
    return make_grid(float(criterion.scale_range), length_bins=length_bins, bias_bins=bias_bins, seed=seed)


def make_grid(bias_range: float, *, length_bins: int, bias_bins: int, seed: int = 0) -> GridArchive:
    """The grid of :func:`make_archive` from the bias range alone (a report redraws a run's
    archive from ``candidates.csv`` without the rubric).

    Args:
        bias_range: R of the bias measure's range [-R, +R] (score points, > 0).
        length_bins: Cells along the length measure (0-800 characters).
        bias_bins: Cells along the bias measure.
        seed: Seed of the archive's random generator.
    """
    r = float(bias_range)
    return GridArchive(
        solution_dim=(),
        dims=[length_bins, bias_bins],
        ranges=[(0.0, float(MAX_GUIDANCE_CHARS)), (-r, r)],
        solution_dtype=object,
        extra_fields={"candidate_id": ((), object)},
        seed=seed,
    )


def measures_of(text: str, signed_bias: float | None, criterion: Criterion) -> tuple[np.ndarray, bool]:
    """Measures of one candidate, clipped into the archive's ranges.

    Args:
        text: Guidance text.
        signed_bias: Mean judge-minus-rater error on training pairs; None (no numeric
            scores) is placed at 0.
        criterion: Gives the bias range.

    Returns:
        ``(measures, clipped)``: a float array of shape (2,) and whether any value was clipped.
    """
    r = float(criterion.scale_range)
    raw = np.array([float(len(text)), 0.0 if signed_bias is None else float(signed_bias)])
    clipped_values = np.array([np.clip(raw[0], 0.0, float(MAX_GUIDANCE_CHARS)), np.clip(raw[1], -r, r)])
    return clipped_values, bool(np.any(clipped_values != raw))
