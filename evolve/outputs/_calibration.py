"""``report.json`` of a calibration run: Table 5, agreement with intervals, verdicts, details.

Every field is computed by :func:`evolve.report.build_report` from the run's saved artifacts
(``scores.csv``, ``candidates.csv``, ``exclusions.csv``, ``audit.json``, the pack and the split);
nothing here computes. Statistics follow the consilium paper (calibration, Table 5).
"""

from __future__ import annotations

from typing import Final, Literal

from evolve.outputs._audit import CriterionAudit
from evolve.outputs._common import Comparisons, PairedVerdict, StatInterval, Usage
from evolve.records import Record
from evolve.stats import Agreement

__all__ = [
    "REPORT_VERSION",
    "ArchiveShape",
    "BaselineRow",
    "BootstrapSettings",
    "CalibrationReport",
    "CandidateSummary",
    "Ceiling",
    "CeilingSplit",
    "Confusion",
    "CriterionReport",
    "Evolution",
    "ExclusionRecord",
    "Finalist",
    "HoldoutEntry",
    "JudgeAsRater",
    "MacroMean",
    "RowKind",
    "RubricUsed",
    "Selection",
    "SplitCounts",
    "SplitStatistics",
    "Table5Row",
    "Verdicts",
    "Winner",
]

REPORT_VERSION: Final = 3
"""Format version of ``report.json``; bumped on any incompatible change of :class:`CalibrationReport`."""

RowKind = Literal["no-guidance", "initial", "training-median", "winner"]
"""The rows of a criterion: no guidance, each initial prompt, the training median, the winner."""


class BaselineRow(Record):
    """One candidate (or baseline) of a criterion, re-scored with fresh seeds.

    Attributes:
        label: Human label, e.g. ``initial 2`` or ``training median (1)``.
        kind: Which row this is (:data:`RowKind`).
        candidate_id: ``<criterion>:<id>``; empty for the training median (a constant).
        train: Agreement with every individual physician rating on the training targets.
        validation: The same on the validation targets.
        calls: Re-evaluation judge answers (response-cache answers included).
        cached_calls: Of those, answered by the response cache.
        prompt_tokens: Their prompt tokens.
        completion_tokens: Their completion tokens.
        best_initial: On initial rows: whether the run's selection rule chose this one as the
            best initial prompt; None on other rows.
    """

    label: str
    kind: RowKind
    candidate_id: str
    train: Agreement
    validation: Agreement
    calls: int
    cached_calls: int = 0
    prompt_tokens: int
    completion_tokens: int
    best_initial: bool | None = None


class JudgeAsRater(Record):
    """The winner as one more rater, one physician left out (targets with >= 2 physicians).

    Attributes:
        rater_id: The physician.
        n_targets: Targets that physician rated.
        judge_mae: Mean |judge - physician| (score points); None without pairs.
        judge_pairs: Pairs behind it.
        peers_mae: Mean |other physician - physician|; None without pairs.
        peer_pairs: Pairs behind it.
    """

    rater_id: str
    n_targets: int
    judge_mae: float | None = None
    judge_pairs: int = 0
    peers_mae: float | None = None
    peer_pairs: int = 0


class CeilingSplit(Record):
    """Physician vs physician on one split: how far two physicians are apart.

    Attributes:
        mae: Mean |physician - physician| over pairs on the same target; None without any.
        n_pairs: Pairs behind it.
        judge_mae_same_targets: The winner's MAE on the same targets, so the two compare.
        judge_pairs: Pairs behind that.
        judge_as_rater: The winner as one more rater, per physician.
        why_none: Why ``mae`` is None (one rater per target ...); None when it is defined.
    """

    mae: float | None
    n_pairs: int
    judge_mae_same_targets: float | None = None
    judge_pairs: int = 0
    judge_as_rater: list[JudgeAsRater] = []
    why_none: str | None = None


class Ceiling(Record):
    """The physician ceiling on the training and the validation targets."""

    train: CeilingSplit
    validation: CeilingSplit


class SplitCounts(Record):
    """Targets re-scored on each split."""

    train: int
    validation: int


class Evolution(Record):
    """What MAP-Elites did for one criterion.

    Attributes:
        attempts: Mutation attempts.
        accepted: Mutants judged on every training target (accepted into the archive's contest).
        pruned: Mutants racing stopped early.
        rejected: The rest (invalid, too long, below min_coverage ...).
        calls_saved: Judge calls racing saved.
        status_counts: Mutants per status.
        elites: Elites in the archive at the end.
        archive_cells: Cells of the archive.
        judge_calls: Training judge answers during evolution (cache answers included).
        judge_cache_hits: Of those, answered by the response cache.
        mutation_prompt_tokens: Prompt tokens of the mutation LLM.
        mutation_completion_tokens: Its completion tokens.
        accepted_asked: The accepted budget the run asked for; None in reports before it was kept.
    """

    attempts: int
    accepted: int
    pruned: int = 0
    rejected: int
    calls_saved: int = 0
    status_counts: dict[str, int]
    elites: int
    archive_cells: int
    judge_calls: int
    judge_cache_hits: int = 0
    mutation_prompt_tokens: int
    mutation_completion_tokens: int
    accepted_asked: int | None = None


class Winner(Record):
    """The selected guidance of a criterion.

    Attributes:
        candidate_id: ``<criterion>:<id>``.
        origin: ``none``, ``initial`` or ``mutation``.
        parent_id: The elite it was mutated from; empty for an initial prompt.
        evolution_train_mae: Its training MAE during evolution; None when never scored there.
        text: The guidance (<= 800 characters; empty: no guidance).
    """

    candidate_id: str
    origin: str
    parent_id: str
    evolution_train_mae: float | None
    text: str


class Verdicts(Record):
    """The winner against each baseline on validation (MAE differences, winner minus baseline)."""

    best_initial: PairedVerdict | None = None
    no_guidance: PairedVerdict | None = None
    training_median: PairedVerdict | None = None


class Finalist(Record):
    """A finalist of robust selection: re-judged with a fresh seed.

    Attributes:
        candidate_id: ``<criterion>:<id>``.
        origin: ``initial`` or ``mutation``.
        finalist_mae: MAE of its fresh-seed calls; None when undefined.
        pooled_mae: MAE over all its training calls (what selection minimises); None when undefined.
    """

    candidate_id: str
    origin: str
    finalist_mae: float | None = None
    pooled_mae: float | None = None


class Selection(Record):
    """Which rule chose the winner (``robust`` or ``paper``) and its finalists (robust only)."""

    rule: Literal["robust", "paper"]
    finalists: list[Finalist] = []


class ArchiveShape(Record):
    """The archive's measures: guidance length bins and signed-error bins over +/- ``bias_range``."""

    length_bins: int
    bias_bins: int
    bias_range: float


class CandidateSummary(Record):
    """One candidate of a criterion in attempt order (the figures read these).

    Attributes:
        candidate_id: ``<criterion>:<id>``.
        parent_id: Its parent elite; empty when none.
        origin: ``none``, ``initial`` or ``mutation``.
        status: ``accepted``, ``pruned``, ``rejected_*`` ...
        seq: Attempt order.
        elite: Whether it is an elite at the end.
        selected: Whether it won.
        length: Guidance length, characters.
        train_mae: Training MAE; for a pruned mutant, on the targets judged before it was stopped;
            None when never scored.
        train_signed_error: Training mean(judge - physician); None when never scored.
    """

    candidate_id: str
    parent_id: str
    origin: str
    status: str
    seq: int
    elite: bool
    selected: bool
    length: int
    train_mae: float | None = None
    train_signed_error: float | None = None


class Confusion(Record):
    """Judge x physician counts on validation: ``matrix[i][j]`` = pairs with physician score
    ``labels[i]`` and judge score ``labels[j]``."""

    labels: list[int]
    matrix: list[list[int]]
    n_pairs: int


class SplitStatistics(Record):
    """Every agreement statistic (:data:`evolve.stats.STATISTICS`) with its interval, per split."""

    train: dict[str, StatInterval] = {}
    validation: dict[str, StatInterval] = {}


class HoldoutEntry(Record):
    """A criterion's held-out numbers (``--evaluate-holdout``; ``<run>/holdout/``).

    Attributes:
        mae: Winner vs every held-out rating; None when the held-out cases are unrated.
        mae_low: Lower end of its interval.
        mae_high: Upper end.
        judge_mean: Mean raw judge score.
        judge_low: Lower end.
        judge_high: Upper end.
        anchored: Physician-anchored mean (PPI++ over the validation targets); None when refused.
        anchored_low: Lower end.
        anchored_high: Upper end.
        anchored_refused: Why no anchored mean was given; None when it was.
        physician_mean: The held-out physicians' actual mean (a check); None when unrated.
        physician_low: Lower end.
        physician_high: Upper end.
        n_targets: Targets scored.
        n_items: Items asked.
        n_cases: Cases.
        run_dir: The held-out scoring folder's name.
    """

    mae: float | None = None
    mae_low: float | None = None
    mae_high: float | None = None
    judge_mean: float | None = None
    judge_low: float | None = None
    judge_high: float | None = None
    anchored: float | None = None
    anchored_low: float | None = None
    anchored_high: float | None = None
    anchored_refused: str | None = None
    physician_mean: float | None = None
    physician_low: float | None = None
    physician_high: float | None = None
    n_targets: int
    n_items: int
    n_cases: int = 0
    run_dir: str


class CriterionReport(Record):
    """One criterion of a calibration report.

    Attributes:
        rows: No guidance, each initial prompt, the training median, the winner.
        ceiling: Physician vs physician per split.
        n_targets: Targets re-scored per split.
        n_raters: Physicians who rated this criterion's training and validation targets (those the
            MAEs rest on; raters of held-out targets only are not counted).
        evolution: What MAP-Elites did.
        winner: The selected guidance.
        verdicts: The winner against each baseline (paired, with Holm's correction).
        selection: The selection rule and its finalists.
        calls: Every judge answer of the criterion (response-cache answers included).
        cached_calls: Of those, from the response cache.
        calls_made: Of those, sent to the endpoint.
        prefix_cached_share: Share of prompt tokens sent that the server's prefix cache served;
            None when the endpoint does not say.
        prompt_tokens: Prompt tokens of every judge answer.
        completion_tokens: Their completion tokens.
        number: The criterion's number in its rubric; None when unnumbered.
        name: Its name.
        no_better_than_constant: Whether the winner's validation MAE is not below the training
            median's; None when either is undefined.
        archive: The archive's measures.
        candidates: Every candidate, in attempt order.
        confusion: The winner's validation confusion matrix.
        agreement: Per row (``no-guidance``, ``best-initial``, ``training-median``, ``winner``,
            ``ceiling``) every statistic with its interval, per split.
        audit: The drift audit of the criterion, when ``audit.json`` exists.
        holdout: Held-out numbers, when the run evaluated the held-out cases.
    """

    rows: list[BaselineRow]
    ceiling: Ceiling
    n_targets: SplitCounts
    n_raters: int
    evolution: Evolution
    winner: Winner
    verdicts: Verdicts
    selection: Selection
    calls: int
    cached_calls: int = 0
    calls_made: int
    prefix_cached_share: float | None = None
    prompt_tokens: int
    completion_tokens: int
    number: int | None = None
    name: str
    no_better_than_constant: bool | None = None
    archive: ArchiveShape
    candidates: list[CandidateSummary]
    confusion: Confusion
    agreement: dict[str, SplitStatistics]
    audit: CriterionAudit | None = None
    holdout: HoldoutEntry | None = None

    def row(self, kind: RowKind) -> BaselineRow | None:
        """The first row of this kind (for ``initial``: the best initial prompt), or None."""
        if kind == "initial":
            return next((r for r in self.rows if r.best_initial), None)
        return next((r for r in self.rows if r.kind == kind), None)


class Table5Row(Record):
    """One criterion's row of Table 5 (``table5.csv``): baselines and winner, train and
    validation MAE, verdicts, evolution counts, held-out numbers (consilium paper, calibration).

    Column names follow :data:`evolve.report.TABLE5_COLUMNS`; ``*_val_*`` is validation,
    ``vs_<baseline>_*`` the winner minus that baseline (``diff``, ``low``, ``high``, ``verdict``,
    ``p``, ``holm_survives``); MAE in score points.
    """

    number: int | None = None
    criterion: str
    name: str = ""
    no_guidance_train_mae: float | None = None
    no_guidance_val_mae: float | None = None
    best_initial: str | None = None
    best_initial_train_mae: float | None = None
    best_initial_val_mae: float | None = None
    median_train_mae: float | None = None
    median_val_mae: float | None = None
    evolved: str
    evolved_origin: str
    evolved_train_mae: float | None = None
    evolved_val_mae: float | None = None
    delta_val_mae: float | None = None
    evolved_val_repeat_sd: float | None = None
    evolved_val_coverage: float | None = None
    evolved_val_signed_error: float | None = None
    ceiling_val_mae: float | None = None
    ceiling_val_pairs: int = 0
    evolved_val_mae_ceiling_targets: float | None = None
    evolved_val_pairs_ceiling_targets: int = 0
    n_train_targets: int
    n_val_targets: int
    drift: str | None = None
    vs_initial_diff: float | None = None
    vs_initial_low: float | None = None
    vs_initial_high: float | None = None
    vs_initial_verdict: str | None = None
    vs_initial_p: float | None = None
    vs_initial_holm_survives: bool | None = None
    vs_none_diff: float | None = None
    vs_none_low: float | None = None
    vs_none_high: float | None = None
    vs_none_verdict: str | None = None
    vs_none_p: float | None = None
    vs_none_holm_survives: bool | None = None
    vs_median_diff: float | None = None
    vs_median_low: float | None = None
    vs_median_high: float | None = None
    vs_median_verdict: str | None = None
    vs_median_p: float | None = None
    vs_median_holm_survives: bool | None = None
    no_better_than_constant: bool | None = None
    selection: str
    attempts: int
    accepted: int
    pruned: int = 0
    rejected: int
    judge_calls: int
    judge_cache_hits: int = 0
    accepted_asked: int | None = None
    holdout_mae: float | None = None
    holdout_mae_low: float | None = None
    holdout_mae_high: float | None = None
    holdout_judge_mean: float | None = None
    holdout_anchored_mean: float | None = None
    holdout_anchored_low: float | None = None
    holdout_anchored_high: float | None = None
    holdout_physician_mean: float | None = None
    holdout_n_targets: int | None = None


class MacroMean(Record):
    """An unweighted mean over criteria of one Table 5 column, and how many criteria it rests on."""

    mean: float | None
    n_criteria: int


class RubricUsed(Record):
    """The rubric a report was built with.

    Attributes:
        id: Rubric id.
        version: Rubric version.
        run_copy: Whether it was read from the run's own copy (``judge_prompts/``).
        notes: How the original rubric has changed since the run, one sentence each.
    """

    id: str
    version: str
    run_copy: bool
    notes: list[str] = []


class BootstrapSettings(Record):
    """How the report's intervals were drawn: replicates, seed, confidence, cluster column."""

    n_boot: int
    seed: int
    confidence: float
    cluster: str


class ExclusionRecord(Record):
    """A (criterion, component) pair the rubric does not apply to, left out of scoring (``exclusions.csv``)."""

    criterion: str
    component: str
    split: str
    n_targets: int
    n_ratings: int
    reason: str


class CalibrationReport(Record):
    """``report.json`` of a calibration run (:func:`evolve.report.build_report`).

    Attributes:
        version: Format version (:data:`REPORT_VERSION`).
        run_id: The run folder's name.
        pack: The rating pack's name.
        rubric: The rubric used.
        conditions: Producing conditions the run was limited to; None: all.
        bootstrap: How the intervals were drawn.
        criteria: One entry per criterion with a winner, in the order scored.
        exclusions: Structurally inapplicable (criterion, component) pairs.
        usage: Every model call of the run.
        prefix_cached_share: Share of the prompt tokens sent that the server's prefix cache
            served; None when the endpoint does not say.
        comparisons: Holm's correction over every verdict.
        table5: One row per criterion.
        macro: Unweighted means over criteria of the numeric Table 5 columns.
        warnings: What a reader must know before using the numbers (a judge no better than a
            constant, a shortfall of accepted mutants ...).
        without_winner: Criteria where no candidate reached ``min_coverage``.
    """

    version: Literal[3] = REPORT_VERSION
    run_id: str
    pack: str
    rubric: RubricUsed
    conditions: list[str] | None = None
    bootstrap: BootstrapSettings
    criteria: dict[str, CriterionReport]
    exclusions: list[ExclusionRecord] = []
    usage: Usage
    prefix_cached_share: float | None = None
    comparisons: Comparisons
    table5: list[Table5Row] = []
    macro: dict[str, MacroMean] = {}
    warnings: list[str] = []
    without_winner: list[str] = []
