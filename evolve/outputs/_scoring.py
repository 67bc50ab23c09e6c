"""``summary.json`` of a scoring run (``evolve judge``, and a calibration's ``holdout/``).

A calibrated judge file scored new targets: per criterion the counts, the judge's mean score,
the physician-anchored mean (PPI++: Angelopoulos et al., Science 2023) and, where the targets
carry ratings, agreement with them. Built by :func:`evolve.report.build_scoring_report`.
"""

from __future__ import annotations

from typing import Final, Literal

from evolve.outputs._common import Comparisons, PairedVerdict, SpendRecord
from evolve.records import Record

__all__ = [
    "SCORING_REPORT_VERSION",
    "AnchoredMean",
    "MeanInterval",
    "MedianAgreement",
    "RatedAgreement",
    "RatedTargets",
    "ScoringCounts",
    "ScoringCriterion",
    "ScoringJudge",
    "ScoringReport",
    "ScoringVerdicts",
]

SCORING_REPORT_VERSION: Final = 1
"""Format version of ``summary.json``; bumped on any incompatible change of :class:`ScoringReport`."""


class MeanInterval(Record):
    """A statistic with its case-clustered bootstrap interval (None where undefined).

    Attributes:
        estimate: The statistic (scale points for means and MAE).
        low: Lower end of the interval.
        high: Upper end.
        n_pairs: Observations (items, or judge-physician pairs) behind it.
        n_cases: Cases resampled.
    """

    estimate: float | None
    low: float | None
    high: float | None
    n_pairs: int
    n_cases: int


class ScoringCounts(Record):
    """Every item of a criterion, once: ``n_items = n_scored + n_failed + n_not_evaluable + n_excluded``."""

    n_items: int
    n_scored: int
    n_failed: int
    n_not_evaluable: int
    n_excluded: int


class AnchoredMean(Record):
    """The physician-anchored mean (:func:`evolve.stats.ppi_mean`), or why it was refused.

    Attributes:
        estimate: The anchored mean, scale points; None when refused.
        low: Lower end of its interval.
        high: Upper end.
        confidence: Interval level; None when refused before any computation.
        judge_mean: The raw judge mean on the unrated targets.
        judge_low: Lower end of its interval.
        judge_high: Upper end.
        rated_mean: The physicians' mean on the rated sample (the judge file's validation targets).
        lam: Weight of the judge's scores (PPI++'s lambda), in [0, 1].
        n_rated: Rated targets.
        n_rated_cases: Their cases.
        n_unrated: Unrated (scored) targets.
        n_unrated_cases: Their cases.
        effective_n: How many physician ratings the estimate is worth.
        refused: Why no anchored mean was given; None when one was.
        assumption: What the estimate assumes (the rated targets are drawn like the unrated ones).
    """

    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    judge_mean: float | None = None
    judge_low: float | None = None
    judge_high: float | None = None
    rated_mean: float | None = None
    lam: float | None = None
    n_rated: int = 0
    n_rated_cases: int = 0
    n_unrated: int = 0
    n_unrated_cases: int = 0
    effective_n: float | None = None
    refused: str | None = None
    assumption: str = ""


class RatedAgreement(Record):
    """A judge against every individual rating of the targets: MAE, QWK, Krippendorff's alpha."""

    mae: MeanInterval | None
    qwk: MeanInterval | None
    krippendorff_alpha: MeanInterval | None
    n_pairs: int
    n_cases: int


class MedianAgreement(Record):
    """The training median (a constant predictor) against the targets' ratings."""

    value: float
    mae: MeanInterval | None


class ScoringVerdicts(Record):
    """The calibrated judge against no guidance and the training median (winner minus baseline MAE)."""

    no_guidance: PairedVerdict
    training_median: PairedVerdict


class RatedTargets(Record):
    """Agreement with the targets' own physicians, when the targets are rated.

    Attributes:
        winner: The calibrated judge.
        no_guidance: The judge without guidance.
        training_median: The constant predictor.
        verdicts: Paired verdicts (Holm-corrected over the report).
        physician_mean: The physicians' actual mean over the rated items (a check of the anchored mean).
    """

    winner: RatedAgreement
    no_guidance: RatedAgreement
    training_median: MedianAgreement
    verdicts: ScoringVerdicts
    physician_mean: MeanInterval | None = None


class ScoringCriterion(Record):
    """One criterion of a scoring run.

    Attributes:
        name: The criterion's name.
        counts: Items by status.
        n_calls: Judge calls of the winner.
        n_failed_calls: Of those, model failures.
        coverage: Share of calls that gave a score; None without calls.
        judge_mean: Mean judge score over scored items.
        no_better_than_constant: The judge file's flag (no better than the training median on validation).
        anchored: The physician-anchored mean.
        rated: Agreement with the targets' physicians; None for unrated targets.
    """

    name: str
    counts: ScoringCounts
    n_calls: int
    n_failed_calls: int
    coverage: float | None
    judge_mean: MeanInterval
    no_better_than_constant: bool
    anchored: AnchoredMean
    rated: RatedTargets | None = None


class ScoringJudge(Record):
    """The judge file a scoring run used: its calibration run, rubric and model."""

    run_id: str
    source_run: str
    rubric_id: str
    rubric_version: str
    model: str | None


class ScoringReport(Record):
    """``summary.json`` of a scoring run.

    Attributes:
        version: Format version (:data:`SCORING_REPORT_VERSION`).
        run_id: The scoring run folder's name.
        run_dir: Its path.
        targets: The targets scored (a pack folder or a table), as given.
        judge: The judge file used.
        rated: Whether the targets carried ratings.
        confidence: Interval level, e.g. 0.95.
        n_boot: Bootstrap replicates.
        criteria: Per criterion, in the order of the items.
        prefix_cached_share: Share of prompt tokens sent that the server's prefix cache served.
        spend: Spending against a limit or prices; None without either.
        comparisons: Holm's correction over every verdict.
        warnings: What the judge file says against using a criterion's judge (no better than a
            constant, a drift flag, another model), as the run gave them.
    """

    version: Literal[1] = SCORING_REPORT_VERSION
    run_id: str
    run_dir: str
    targets: str | None = None
    judge: ScoringJudge
    rated: bool
    confidence: float
    n_boot: int
    criteria: dict[str, ScoringCriterion]
    prefix_cached_share: float | None = None
    spend: SpendRecord | None = None
    comparisons: Comparisons
    warnings: list[str] = []
