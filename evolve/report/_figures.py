"""Figures of the HTML reports (matplotlib).

Every function takes plain data - the records a report dict already holds - and an optional
``ax``; it draws on that Axes (or on a new Figure of its own when ``ax`` is None), returns the
Axes and never calls ``show()`` nor touches pyplot's global figures, so a report can be drawn
in a worker thread, a test or a notebook alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from evolve.outputs import CandidateSummary, PipelineRecord, Table4Row
from evolve.rubric import MAX_GUIDANCE_CHARS

if TYPE_CHECKING:  # matplotlib loads (half a second) only when a figure is drawn
    from matplotlib.axes import Axes

__all__ = [
    "archive_heatmap",
    "confusion_heatmap",
    "drift_flags",
    "interval_plot",
    "lineage",
    "mae_over_attempts",
    "quality_vs_tokens",
    "stop_reasons_by_round",
    "vote_transitions",
]

FLAG_COLOURS = {"ok": "#2e7d32", "review": "#f9a825", "drift": "#c62828", "no_winner": "#9e9e9e"}
_ORIGIN_COLOURS = {"none": "#616161", "initial": "#1565c0", "mutation": "#ef6c00"}


def _axes(ax: Axes | None, size: tuple[float, float] = (6.0, 4.0)) -> Axes:
    """``ax``, or the Axes of a new stand-alone Figure (no pyplot state)."""
    if ax is not None:
        return ax
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout="constrained").add_subplot()


def _note(ax: Axes, text: str) -> Axes:
    """An empty panel that says why it is empty."""
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()
    return ax


def _scored(candidates: Sequence[CandidateSummary]) -> list[CandidateSummary]:
    return [c for c in candidates if c.train_mae is not None and c.origin != "none"]


def _mae(c: CandidateSummary) -> float:
    """The training MAE of a scored candidate (:func:`_scored` keeps only those)."""
    assert c.train_mae is not None
    return c.train_mae


def archive_heatmap(candidates: Sequence[CandidateSummary], *, length_bins: int, bias_bins: int, bias_range: float,
                    ax: Axes | None = None) -> Axes:
    """The archive over its two measures, each cell coloured by its elite's training MAE.

    Redrawn from the run's elites on the run's grid (length 0-800 characters on x, signed bias
    [-R, +R] score points on y, equal-width cells as pyribs' ``GridArchive`` cuts them); a cell
    holds its lowest-MAE elite; the winner is a star. Drawn with matplotlib alone, so a report
    loads neither pyribs nor numba.

    Args:
        candidates: A criterion's candidate records (``elite``, ``selected``, ``length``,
            ``train_signed_error``, ``train_mae``), as in ``report.json``.
        length_bins, bias_bins: The run's grid (``config.json`` ``archive``).
        bias_range: R, the criterion's score range.
        ax: Where to draw.
    """
    ax = _axes(ax)
    elites = [c for c in _scored(candidates) if c.elite]
    if not elites:
        return _note(ax, "no elite in the archive")
    r = float(bias_range)
    measures = np.array([[c.length, np.clip(c.train_signed_error or 0.0, -r, r)] for c in elites], dtype=float)
    edges = (np.linspace(0.0, float(MAX_GUIDANCE_CHARS), length_bins + 1), np.linspace(-r, r, bias_bins + 1))
    cells = np.full((bias_bins, length_bins), np.nan)
    for (length, bias), c in zip(measures, elites):
        i = min(int(np.searchsorted(edges[1], bias, side="right")) - 1, bias_bins - 1)
        j = min(int(np.searchsorted(edges[0], length, side="right")) - 1, length_bins - 1)
        if np.isnan(cells[i, j]) or c.train_mae < cells[i, j]:
            cells[i, j] = c.train_mae
    mesh = ax.pcolormesh(edges[0], edges[1], np.ma.masked_invalid(cells), cmap="viridis_r")
    ax.figure.colorbar(mesh, ax=ax, label="training MAE")
    filled = int(np.isfinite(cells).sum())
    for c, m in zip(elites, measures):
        if c.selected:
            ax.plot(m[0], m[1], marker="*", markersize=18, color="#d50000", markeredgecolor="white", label="winner")
    ax.set_xlabel("guidance length (characters)")
    ax.set_ylabel("signed bias (judge − physician)")
    ax.set_title(f"archive: {filled} of {length_bins * bias_bins} cells filled")
    if any(c.selected for c in elites):
        ax.legend(loc="upper right")
    return ax


def mae_over_attempts(candidates: Sequence[CandidateSummary], *, ax: Axes | None = None) -> Axes:
    """Training MAE of each candidate in the order it was made, and the best so far.

    Pruned mutants (racing stopped them on part of the targets) are hollow; the step line is
    the lowest MAE among the fully scored candidates up to each attempt.
    """
    ax = _axes(ax)
    scored = sorted(_scored(candidates), key=lambda c: c.seq)
    if not scored:
        return _note(ax, "no scored candidate")
    for origin, colour in _ORIGIN_COLOURS.items():
        for pruned in (False, True):
            pts = [c for c in scored if c.origin == origin and (c.status == "pruned") == pruned]
            if pts:
                ax.scatter([c.seq for c in pts], [_mae(c) for c in pts], s=36, label=f"{origin}{' (pruned)' if pruned else ''}",
                           facecolors="none" if pruned else colour, edgecolors=colour)
    best, xs, ys = np.inf, [], []
    for c in scored:
        if c.status != "pruned":
            best = min(best, _mae(c))
        if np.isfinite(best):
            xs.append(c.seq)
            ys.append(best)
    ax.step(xs, ys, where="post", color="black", linewidth=1.5, label="best so far")
    ax.set_xlabel("candidate (order made)")
    ax.set_ylabel("training MAE")
    ax.set_title("MAE over attempts")
    ax.legend(fontsize="small")
    return ax


def lineage(candidates: Sequence[CandidateSummary], *, ax: Axes | None = None) -> Axes:
    """How the winner descends from the initial prompts: every parent → child edge in grey
    (pruned mutants hollow), the winner's line of descent in colour, labelled with candidate
    ids, on (order made, training MAE)."""
    ax = _axes(ax)
    by_id = {c.candidate_id: c for c in _scored(candidates)}
    winner = next((c for c in candidates if c.selected), None)
    if winner is None or winner.candidate_id not in by_id:
        return _note(ax, "no winner")
    for c in by_id.values():
        parent = by_id.get(c.parent_id or "")
        if parent is not None:
            ax.plot([parent.seq, c.seq], [_mae(parent), _mae(c)], color="#bdbdbd", linewidth=0.8)
    for pruned in (False, True):  # racing's pruned mutants hollow, as in :func:`mae_over_attempts`
        pts = [c for c in by_id.values() if (c.status == "pruned") == pruned]
        ax.scatter([c.seq for c in pts], [_mae(c) for c in pts], s=16, edgecolors="#9e9e9e",
                   facecolors="none" if pruned else "#bdbdbd")
    chain: list[CandidateSummary] = []
    node = by_id.get(winner.candidate_id)
    while node is not None and len(chain) < len(by_id):
        chain.append(node)
        node = by_id.get(node.parent_id or "")
    chain.reverse()
    ax.plot([c.seq for c in chain], [_mae(c) for c in chain], color="#d50000", marker="o", linewidth=2)
    for c in chain:
        ax.annotate(c.candidate_id.split(":", 1)[-1], (c.seq, _mae(c)), textcoords="offset points",
                    xytext=(4, 6), fontsize="small")
    ax.set_xlabel("candidate (order made)")
    ax.set_ylabel("training MAE")
    generations = len(chain) - 1
    ax.set_title("winner's lineage: " + ("an initial prompt itself" if generations == 0 else f"{generations} mutation(s) from "
                                         f"{chain[0].candidate_id.split(':', 1)[-1]}"))
    return ax


def confusion_heatmap(matrix: Sequence[Sequence[int]], labels: Sequence[int], *, ax: Axes | None = None) -> Axes:
    """Judge × physician counts on validation (rows: physician score, columns: judge score),
    drawn with scikit-learn's ``ConfusionMatrixDisplay``; the diagonal is agreement."""
    from sklearn.metrics import ConfusionMatrixDisplay

    ax = _axes(ax, (4.5, 4.0))
    counts = np.asarray(matrix, dtype=int)
    if counts.sum() == 0:
        return _note(ax, "no numeric validation pair")
    ConfusionMatrixDisplay(counts, display_labels=list(labels)).plot(ax=ax, cmap="Blues", colorbar=False)
    ax.set_xlabel("judge score")
    ax.set_ylabel("physician score")
    ax.set_title(f"validation: judge × physician ({int(counts.sum())} pairs)")
    return ax


def interval_plot(rows: Sequence[Mapping], *, xlabel: str, title: str = "", reference: float | None = None,
                  ax: Axes | None = None) -> Axes:
    """Point estimates with their 95% intervals, one row each (a forest plot).

    Args:
        rows: ``label``, ``estimate``, ``low``, ``high`` (None where undefined: drawn as a gap).
        xlabel: The statistic and its unit.
        title: Panel title.
        reference: An x to mark with a dashed line (0 for differences).
        ax: Where to draw.
    """
    ax = _axes(ax, (6.0, 0.5 + 0.45 * max(len(rows), 1)))
    shown = [r for r in rows if r.get("estimate") is not None]
    if not shown:
        return _note(ax, "no estimate")
    ys = np.arange(len(shown))[::-1]
    for y, r in zip(ys, shown):
        if r.get("low") is not None and r.get("high") is not None:
            ax.plot([r["low"], r["high"]], [y, y], color="#1565c0", linewidth=2)
        ax.plot(r["estimate"], y, "o", color="#0d47a1")
    if reference is not None:
        ax.axvline(reference, color="#757575", linestyle="--", linewidth=1)
    ax.set_yticks(ys, [r["label"] for r in shown])
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    return ax


def drift_flags(rows: Sequence[Mapping], *, ax: Axes | None = None) -> Axes:
    """The audit's verdicts as a grid: one row per criterion, one column per audited prompt
    (the winner, then the initial prompts), coloured ok / review / drift.

    Args:
        rows: ``criterion`` and ``flags`` (a list of ``(prompt label, flag)``).
        ax: Where to draw.
    """
    ax = _axes(ax, (6.0, 0.8 + 0.5 * max(len(rows), 1)))
    if not rows:
        return _note(ax, "not audited (run `evolve audit RUN`)")
    width = max(len(r["flags"]) for r in rows)
    for y, r in enumerate(rows[::-1]):
        for x, (label, flag) in enumerate(r["flags"]):
            ax.add_patch(_cell(x, y, FLAG_COLOURS.get(flag, "#9e9e9e")))
            ax.text(x + 0.5, y + 0.5, f"{label}\n{flag}", ha="center", va="center", fontsize="small",
                    color="black" if flag == "review" else "white")  # dark on the light amber, for contrast
    ax.set_xlim(0, width)
    ax.set_ylim(0, len(rows))
    ax.set_yticks(np.arange(len(rows)) + 0.5, [r["criterion"] for r in rows[::-1]])
    ax.set_xticks([])
    ax.set_title("drift audit: winner and initial prompts")
    return ax


def _cell(x: float, y: float, colour: str):
    from matplotlib.patches import Rectangle

    return Rectangle((x + 0.03, y + 0.05), 0.94, 0.9, facecolor=colour)


def stop_reasons_by_round(pipelines: Sequence[PipelineRecord], *, title: str = "", ax: Axes | None = None) -> Axes:
    """How many consilia stopped after each number of rounds, stacked by stop reason
    (consensus, the round limit, failure ...).

    Args:
        pipelines: The pipelines (their ``rounds_completed`` and ``stop_reason``).
        title: Panel title (the model × condition × topology it shows).
        ax: Where to draw.
    """
    ax = _axes(ax)
    if not pipelines:
        return _note(ax, "no pipeline")
    rounds = sorted({p.rounds_completed for p in pipelines})
    reasons = sorted({p.stop_reason for p in pipelines})
    series = {reason: [sum(1 for p in pipelines if p.stop_reason == reason and p.rounds_completed == r)
                       for r in rounds] for reason in reasons}
    return _stacked_bars(ax, [str(r) for r in rounds], series, xlabel="review rounds completed", ylabel="pipelines",
                         title=title or "stop reasons by round")


def vote_transitions(rows: Sequence[Table4Row], *, title: str = "", ax: Axes | None = None) -> Axes:
    """Role votes between consecutive rounds (yes→yes, yes→no, no→yes, no→no), one stacked bar
    per round pair.

    Args:
        rows: Table 4 records of one group with ``role == "all"`` and a round pair
            (``rounds`` like ``"1-2"``), with the counts ``yes_yes`` ... ``no_no``.
        title: Panel title.
        ax: Where to draw.
    """
    ax = _axes(ax)
    if not rows:
        return _note(ax, "no consilium reached a second round")
    series = {"yes→yes": [r.yes_yes for r in rows], "yes→no": [r.yes_no for r in rows],
              "no→yes": [r.no_yes for r in rows], "no→no": [r.no_no for r in rows]}
    return _stacked_bars(ax, [r.rounds for r in rows], series, xlabel="rounds", ylabel="role votes",
                         title=title or "vote transitions")


def _stacked_bars(ax: Axes, xs: Sequence[str], series: Mapping[str, Sequence[float]], *, xlabel: str, ylabel: str,
                  title: str) -> Axes:
    """One stacked bar per x, one layer per series (in the mapping's order), with a legend."""
    bottom = np.zeros(len(xs))
    for label, counts in series.items():
        values = np.asarray(counts, dtype=float)
        ax.bar(list(xs), values, bottom=bottom, label=label)
        bottom += values
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small")
    return ax


def quality_vs_tokens(pipelines: Sequence[PipelineRecord], *, ax: Axes | None = None) -> Axes:
    """Final-report quality (judge, 0-3) against the generation tokens of each pipeline, one
    colour per model × condition × topology.

    Args:
        pipelines: The pipelines (their ``tokens`` and ``quality``, None when not judged; one
            colour per ``model · condition · topology``).
        ax: Where to draw.
    """
    ax = _axes(ax)
    judged = [(" · ".join((p.model, p.condition, p.topology)), p.tokens, p.quality) for p in pipelines
              if p.quality is not None]
    if not judged:
        return _note(ax, "not judged yet (`evolve bench judge RUN`)")
    for arm in sorted({a for a, _, _ in judged}):
        pts = [(tokens, quality) for a, tokens, quality in judged if a == arm]
        ax.scatter([t for t, _ in pts], [q for _, q in pts], label=arm, s=30, alpha=0.8)
    ax.set_xlabel("generation tokens per pipeline (prompt + completion)")
    ax.set_ylabel("final-report quality (mean of criteria 1-8, 0-3)")
    ax.set_title("quality against tokens")
    ax.legend(fontsize="small")
    return ax
