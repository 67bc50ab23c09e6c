"""``bench_report.json``: the consilium benchmark report of a bench run (:class:`BenchReport`).

What :func:`evolve.report.build_bench_report` returns and writes. Every share and mean of a table
row carries its 95% case-clustered percentile bootstrap interval as three flat fields - the
estimate ``x`` and its bounds ``x_low`` and ``x_high`` - as the table's CSV has them; a value is
None where it is undefined (no observation, a NaN or an infinity in the computation).
"""

from __future__ import annotations

from typing import Literal

from evolve.outputs._common import Usage
from evolve.records import Record

__all__ = [
    "BENCH_REPORT_VERSION",
    "AnchoredCriterion",
    "AnchoredDifference",
    "AnchoredSection",
    "AnchoredSystem",
    "BenchCounts",
    "BenchReport",
    "BenchTables",
    "ClusterBootstrap",
    "ComplexityRow",
    "DistributionRow",
    "FormatRow",
    "FreeFormSplit",
    "JudgeFileRef",
    "PanelsRow",
    "PipelineRecord",
    "RoleCategory",
    "RoleLabel",
    "Roles",
    "Table2Row",
    "Table3Row",
    "Table4Row",
    "Table6Row",
    "Table7Row",
    "Table8Row",
    "Table9Row",
]

BENCH_REPORT_VERSION = 1
"""Version of ``bench_report.json``'s layout (:class:`BenchReport`); raised on any change a reader sees."""

Bounds = tuple[float | None, float | None, float | None]
"""``(estimate, low, high)`` of one interval field of a row."""


class ClusterBootstrap(Record):
    """How a report's intervals were drawn.

    Attributes:
        method: ``"case-clustered percentile bootstrap"``.
        n_boot: Replicates per interval (>= 1).
        seed: Seed of the replicates' random stream.
        confidence: Interval level, 0.95.
        cluster: The resampling unit's column, ``"case_id"``.
    """

    method: str
    n_boot: int
    seed: int
    confidence: float
    cluster: str


class BenchCounts(Record):
    """What the report was computed from.

    Attributes:
        case_artifacts: Pipelines (``cases/*.json`` artifacts: one per case, model, condition
            and topology).
        cases: Distinct cases.
        models: Generating models, sorted.
        conditions: ``free-form`` and/or ``structured``, sorted.
        topologies: ``n+1`` and/or ``single``, sorted.
        failed_pipelines: Pipelines whose stop reason is ``failure``.
        judge_rows: Rows of ``judge_scores.csv`` (0 when not judged).
    """

    case_artifacts: int
    cases: int
    models: list[str]
    conditions: list[str]
    topologies: list[str]
    failed_pipelines: int
    judge_rows: int


class Table2Row(Record):
    """Table 2, the cohort: words per case text and the judged case complexity.

    Attributes:
        n_cases: Cases with a text (0 when the run's case file could not be read).
        words_median: Median words per case text; None without cases.
        words_q1: First quartile of words per case.
        words_q3: Third quartile.
        words_min: Fewest words.
        words_max: Most words.
        n_complexity: Cases with a criterion-10 (case complexity) score.
        complexity_mean: Mean case complexity (0-3; each case's mean over its panels).
        complexity_mean_low: Lower bound of its interval.
        complexity_mean_high: Upper bound.
    """

    n_cases: int
    words_median: float | None = None
    words_q1: float | None = None
    words_q3: float | None = None
    words_min: float | None = None
    words_max: float | None = None
    n_complexity: int
    complexity_mean: float | None
    complexity_mean_low: float | None
    complexity_mean_high: float | None


class Table3Row(Record):
    """Table 3: consilium outcomes of one model x condition x topology (``model`` ``all``: pooled).

    Shares (in [0, 1]) and the mean are over completed pipelines, except ``failure_share`` (over
    every pipeline); ``stop_*`` count pipelines by stop reason.

    Attributes:
        model: Generating model, or ``all``.
        condition: ``free-form`` or ``structured``.
        topology: ``single`` or ``n+1``.
        n_pipelines: Pipelines of the group.
        n_cases: Their distinct cases.
        n_completed: Pipelines that did not fail.
        first_round_consensus_share: Share reaching consensus in round 1.
        first_round_consensus_share_low: Lower bound.
        first_round_consensus_share_high: Upper bound.
        consensus_share: Share reaching consensus at all.
        consensus_share_low: Lower bound.
        consensus_share_high: Upper bound.
        mean_rounds: Mean review rounds completed.
        mean_rounds_low: Lower bound.
        mean_rounds_high: Upper bound.
        max_rounds_share: Share stopped at the round limit.
        max_rounds_share_low: Lower bound.
        max_rounds_share_high: Upper bound.
        failure_share: Share of every pipeline that failed.
        failure_share_low: Lower bound.
        failure_share_high: Upper bound.
        stop_consensus: Pipelines stopped at consensus.
        stop_no_substantive_change: Stopped because no opinion changed substantively.
        stop_repeated_report: Stopped on a repeated report.
        stop_max_rounds: Stopped at the round limit.
        stop_failure: Failed.
    """

    model: str
    condition: str
    topology: str
    n_pipelines: int
    n_cases: int
    n_completed: int
    first_round_consensus_share: float | None
    first_round_consensus_share_low: float | None
    first_round_consensus_share_high: float | None
    consensus_share: float | None
    consensus_share_low: float | None
    consensus_share_high: float | None
    mean_rounds: float | None
    mean_rounds_low: float | None
    mean_rounds_high: float | None
    max_rounds_share: float | None
    max_rounds_share_low: float | None
    max_rounds_share_high: float | None
    failure_share: float | None
    failure_share_low: float | None
    failure_share_high: float | None
    stop_consensus: int
    stop_no_substantive_change: int
    stop_repeated_report: int
    stop_max_rounds: int
    stop_failure: int

    @property
    def stops(self) -> dict[str, int]:
        """Pipelines per stop reason (``consensus``, ``no_substantive_change``, ...), in that order."""
        return {"consensus": self.stop_consensus, "no_substantive_change": self.stop_no_substantive_change,
                "repeated_report": self.stop_repeated_report, "max_rounds": self.stop_max_rounds,
                "failure": self.stop_failure}


class Table4Row(Record):
    """Table 4: role votes between consecutive review rounds (round r against r+1).

    The four ``*_share`` are over the row's transitions; ``dissent_resolved_share`` = no->yes
    among no votes, ``assent_lost_share`` = yes->no among yes votes; all in [0, 1].

    Attributes:
        model: Generating model, or ``all``.
        condition: ``free-form`` or ``structured``.
        topology: ``single`` or ``n+1``.
        role: A harmonised role category, or ``all``.
        rounds: ``all`` or a round pair such as ``1-2`` (pairs only on ``role == "all"`` rows).
        n_pipelines: Pipelines with a transition in the row.
        n_transitions: Transitions (one role's votes in two consecutive rounds).
        yes_yes: Transitions yes->yes.
        yes_no: Transitions yes->no.
        no_yes: Transitions no->yes.
        no_no: Transitions no->no.
        yes_yes_share: Share yes->yes.
        yes_yes_share_low: Lower bound.
        yes_yes_share_high: Upper bound.
        yes_no_share: Share yes->no.
        yes_no_share_low: Lower bound.
        yes_no_share_high: Upper bound.
        no_yes_share: Share no->yes.
        no_yes_share_low: Lower bound.
        no_yes_share_high: Upper bound.
        no_no_share: Share no->no.
        no_no_share_low: Lower bound.
        no_no_share_high: Upper bound.
        dissent_resolved_share: no->yes among no votes.
        dissent_resolved_share_low: Lower bound.
        dissent_resolved_share_high: Upper bound.
        assent_lost_share: yes->no among yes votes.
        assent_lost_share_low: Lower bound.
        assent_lost_share_high: Upper bound.
    """

    model: str
    condition: str
    topology: str
    role: str
    rounds: str
    n_pipelines: int
    n_transitions: int
    yes_yes: int
    yes_no: int
    no_yes: int
    no_no: int
    yes_yes_share: float | None
    yes_yes_share_low: float | None
    yes_yes_share_high: float | None
    yes_no_share: float | None
    yes_no_share_low: float | None
    yes_no_share_high: float | None
    no_yes_share: float | None
    no_yes_share_low: float | None
    no_yes_share_high: float | None
    no_no_share: float | None
    no_no_share_low: float | None
    no_no_share_high: float | None
    dissent_resolved_share: float | None
    dissent_resolved_share_low: float | None
    dissent_resolved_share_high: float | None
    assent_lost_share: float | None
    assent_lost_share_low: float | None
    assent_lost_share_high: float | None

    @property
    def transitions(self) -> list[tuple[str, int, Bounds]]:
        """``(kind, count, (share, low, high))`` for yes_yes, yes_no, no_yes, no_no, in that order."""
        return [("yes_yes", self.yes_yes, (self.yes_yes_share, self.yes_yes_share_low, self.yes_yes_share_high)),
                ("yes_no", self.yes_no, (self.yes_no_share, self.yes_no_share_low, self.yes_no_share_high)),
                ("no_yes", self.no_yes, (self.no_yes_share, self.no_yes_share_low, self.no_yes_share_high)),
                ("no_no", self.no_no, (self.no_no_share, self.no_no_share_low, self.no_no_share_high))]


class Table6Row(Record):
    """Table 6: judge scores (0-3) of one component of a group's outputs.

    Attributes:
        model: Generating model, or ``all``.
        condition: ``free-form``, ``structured``, or ``all`` (case rows judged once per case).
        topology: ``single``, ``n+1``, or ``all``.
        component: ``reasoning``, ``opinion``, ``final`` or ``case`` (criteria 9 and 10 apart).
        criteria: The criterion numbers pooled, comma-separated (``1,2,...,8``).
        n_outputs: Outputs judged.
        n_calls: Judge calls (repeats included).
        n_numeric: Calls with a numeric score.
        n_not_evaluable: Calls answered "not evaluable".
        n_model_failure: Calls that failed.
        coverage: ``n_numeric / n_calls``, in [0, 1].
        mean: Mean score over scored (output, role, criterion) units, repeats averaged first.
        mean_low: Lower bound.
        mean_high: Upper bound.
        sd: Population SD of those units; None without one.
    """

    model: str
    condition: str
    topology: str
    component: str
    criteria: str
    n_outputs: int
    n_calls: int
    n_numeric: int
    n_not_evaluable: int
    n_model_failure: int
    coverage: float
    mean: float | None
    mean_low: float | None
    mean_high: float | None
    sd: float | None


class Table7Row(Record):
    """Table 7: final-report quality next to the generation tokens of one pipeline.

    Attributes:
        model: Generating model, or ``all``.
        condition: ``free-form`` or ``structured``.
        topology: ``single`` or ``n+1``.
        n_pipelines: Pipelines (failed ones included: their calls were spent).
        mean_tokens: Mean prompt + completion tokens of a pipeline's generation calls.
        mean_tokens_low: Lower bound.
        mean_tokens_high: Upper bound.
        mean_prompt_tokens: Mean prompt tokens.
        mean_completion_tokens: Mean completion tokens.
        n_scored: Pipelines with a final-report quality (0 when not judged).
        quality: Mean output-level final score on criteria 1-8 (0-3); None when not judged.
        quality_low: Lower bound.
        quality_high: Upper bound.
        tokens_per_point: ``mean_tokens / quality``.
        tokens_per_point_low: Lower bound (the ratio within each replicate).
        tokens_per_point_high: Upper bound.
    """

    model: str
    condition: str
    topology: str
    n_pipelines: int
    mean_tokens: float | None
    mean_tokens_low: float | None
    mean_tokens_high: float | None
    mean_prompt_tokens: float
    mean_completion_tokens: float
    n_scored: int
    quality: float | None
    quality_low: float | None
    quality_high: float | None
    tokens_per_point: float | None
    tokens_per_point_low: float | None
    tokens_per_point_high: float | None


class Table8Row(Record):
    """Table 8: one criterion (1-8), the final report's mean against the primary role's.

    Attributes:
        model: Generating model, or ``all``.
        condition: ``free-form`` or ``structured``.
        topology: ``single`` or ``n+1``.
        number: Criterion number, 1-8.
        criterion: Criterion id.
        n_final: Final reports scored on it.
        final_mean: Their mean score (0-3).
        final_mean_low: Lower bound.
        final_mean_high: Upper bound.
        n_reasoning: Primary-role reasonings scored (0 where the criterion does not apply).
        reasoning_mean: Their mean.
        reasoning_mean_low: Lower bound.
        reasoning_mean_high: Upper bound.
        n_opinion: Primary-role opinions scored.
        opinion_mean: Their mean.
        opinion_mean_low: Lower bound.
        opinion_mean_high: Upper bound.
        final_minus_reasoning: ``final_mean - reasoning_mean`` (score points).
        final_minus_reasoning_low: Lower bound (the difference within each replicate).
        final_minus_reasoning_high: Upper bound.
        final_minus_opinion: ``final_mean - opinion_mean``.
        final_minus_opinion_low: Lower bound.
        final_minus_opinion_high: Upper bound.
    """

    model: str
    condition: str
    topology: str
    number: int
    criterion: str
    n_final: int
    final_mean: float | None
    final_mean_low: float | None
    final_mean_high: float | None
    n_reasoning: int
    reasoning_mean: float | None
    reasoning_mean_low: float | None
    reasoning_mean_high: float | None
    n_opinion: int
    opinion_mean: float | None
    opinion_mean_low: float | None
    opinion_mean_high: float | None
    final_minus_reasoning: float | None
    final_minus_reasoning_low: float | None
    final_minus_reasoning_high: float | None
    final_minus_opinion: float | None
    final_minus_opinion_low: float | None
    final_minus_opinion_high: float | None


class Table9Row(Record):
    """Table 9: final-report scores and case complexity by review rounds completed.

    Attributes:
        condition: ``all`` or one condition.
        rounds: ``1``, ``2`` or ``3+``.
        n_outputs: Judged outputs with that many rounds.
        mean: Mean output-level final score on criteria 1-8 (0-3).
        mean_low: Lower bound.
        mean_high: Upper bound.
        sd: Population SD; None without outputs.
        below_2_share: Share of outputs scoring below 2, in [0, 1].
        below_2_share_low: Lower bound.
        below_2_share_high: Upper bound.
        n_complexity: Outputs with a case-complexity score.
        complexity_mean: Mean criterion-10 score (not part of the quality mean).
        complexity_mean_low: Lower bound.
        complexity_mean_high: Upper bound.
    """

    condition: str
    rounds: str
    n_outputs: int
    mean: float | None
    mean_low: float | None
    mean_high: float | None
    sd: float | None
    below_2_share: float | None
    below_2_share_low: float | None
    below_2_share_high: float | None
    n_complexity: int
    complexity_mean: float | None
    complexity_mean_low: float | None
    complexity_mean_high: float | None


class PanelsRow(Record):
    """Roles per distinct panel of one model and topology (``model`` ``all``: every model).

    Attributes:
        model: Generating model, or ``all``.
        topology: ``single`` or ``n+1``.
        n_panels: Distinct panels (a panel serves every condition of its case).
        roles_1: Panels of 1 role.
        roles_2: Panels of 2 roles.
        roles_3: Panels of 3 roles.
        roles_4: Panels of 4 roles.
        roles_5: Panels of 5 roles.
        median_roles: Median roles per panel.
    """

    model: str
    topology: str
    n_panels: int
    roles_1: int
    roles_2: int
    roles_3: int
    roles_4: int
    roles_5: int
    median_roles: float

    @property
    def by_size(self) -> list[int]:
        """Panels of 1, 2, 3, 4 and 5 roles."""
        return [self.roles_1, self.roles_2, self.roles_3, self.roles_4, self.roles_5]


class DistributionRow(Record):
    """Score distribution of one criterion (1-8) of the final report.

    Attributes:
        number: Criterion number.
        criterion: Criterion id.
        n_outputs: Outputs scored.
        at_max_share: Share at 3 (repeats averaged, then rounded), in [0, 1].
        zero_or_one_share: Share at 0 or 1, in [0, 1].
        n_cases: Cases scored.
        case_median: Median of each case's mean over its outputs (0-3).
        case_q1: Its first quartile.
        case_q3: Its third quartile.
    """

    number: int
    criterion: str
    n_outputs: int
    at_max_share: float
    zero_or_one_share: float
    n_cases: int
    case_median: float
    case_q1: float
    case_q3: float


class ComplexityRow(Record):
    """Final-report quality at one judged case complexity (0-3, rounded).

    Attributes:
        complexity: The complexity level.
        n_outputs: Outputs of cases at that level.
        n_cases: Those cases.
        quality_mean: Mean output-level quality (0-3).
        quality_mean_low: Lower bound.
        quality_mean_high: Upper bound.
        below_2_share: Share of outputs below 2, in [0, 1].
    """

    complexity: int
    n_outputs: int
    n_cases: int
    quality_mean: float | None
    quality_mean_low: float | None
    quality_mean_high: float | None
    below_2_share: float


class FormatRow(Record):
    """Structured minus free-form final reports on one criterion (1-8), paired by case, model
    and topology.

    Attributes:
        number: Criterion number.
        criterion: Criterion id.
        n_pairs: Pairs of outputs.
        structured_mean: Mean score of the structured reports (0-3).
        free_form_mean: Mean score of the free-form reports.
        difference: Mean paired difference (score points; positive favours structured).
        difference_low: Lower bound.
        difference_high: Upper bound.
    """

    number: int
    criterion: str
    n_pairs: int
    structured_mean: float
    free_form_mean: float
    difference: float | None
    difference_low: float | None
    difference_high: float | None


class BenchTables(Record):
    """Every table of the report (a judge-based table of an unjudged run is empty).

    Attributes:
        table3: Consilium outcomes.
        table4: Vote transitions.
        table6: Judge scores per component.
        table7: Quality and tokens.
        table8: Criterion profiles, final report against the primary role.
        table9: Final-report scores by rounds completed.
        distribution: Score distributions of the final report.
        complexity: Quality by case complexity.
        format: Structured minus free-form (empty unless both conditions were judged).
        table2: The cohort, one row.
        panels: Panel sizes.
    """

    table3: list[Table3Row]
    table4: list[Table4Row]
    table6: list[Table6Row]
    table7: list[Table7Row]
    table8: list[Table8Row]
    table9: list[Table9Row]
    distribution: list[DistributionRow] = []
    complexity: list[ComplexityRow] = []
    format: list[FormatRow] = []
    table2: list[Table2Row] = []
    panels: list[PanelsRow] = []


class RoleCategory(Record):
    """One harmonised role category and the exact labels collapsed into it.

    Attributes:
        category: The category (e.g. ``oncology``).
        n_exact_labels: Exact labels in it.
        n_assignments: Role assignments over distinct panels.
        n_primary: Of them, primary roles.
        exact_labels: The labels, joined by ``"; "``.
    """

    category: str
    n_exact_labels: int
    n_assignments: int
    n_primary: int
    exact_labels: str


class RoleLabel(Record):
    """One exact role label and its category.

    Attributes:
        label: The label as the model wrote it.
        category: Its harmonised category.
        n_assignments: Assignments over distinct panels.
        n_primary: Of them, primary roles.
    """

    label: str
    category: str
    n_assignments: int
    n_primary: int


class Roles(Record):
    """Exact role labels against harmonised categories, over distinct panels.

    Attributes:
        n_panels: Distinct panels.
        n_assignments: Role assignments.
        n_exact_labels: Distinct exact labels.
        n_categories: Categories.
        n_collapsed: ``n_exact_labels - n_categories``.
        categories: One row per category, most assigned first.
        labels: One record per exact label, by category and label.
    """

    n_panels: int
    n_assignments: int
    n_exact_labels: int
    n_categories: int
    n_collapsed: int
    categories: list[RoleCategory]
    labels: list[RoleLabel]


class FreeFormSplit(Record):
    """How free-form role opinions were split into reasoning and opinion.

    Attributes:
        opinions: Free-form role opinions of completed pipelines.
        fallbacks: Of them, without a ``FINAL OPINION:`` line (reasoning = the whole text,
            opinion = its last paragraph).
        primary_opinions: Primary-role opinions.
        primary_fallbacks: Of them, fallbacks.
        roles_judged: Whether free-form role components were judged (``judge.json``); None:
            not judged yet.
    """

    opinions: int
    fallbacks: int
    primary_opinions: int
    primary_fallbacks: int
    roles_judged: bool | None


class PipelineRecord(Record):
    """One pipeline, for the figures.

    Attributes:
        case_id: The case.
        model: Generating model.
        condition: ``free-form`` or ``structured``.
        topology: ``single`` or ``n+1``.
        stop_reason: ``consensus``, ``max_rounds``, ``failure`` ...
        rounds_completed: Review rounds completed.
        consensus: Whether the consilium reached consensus.
        tokens: Prompt + completion tokens of its generation calls.
        quality: Final-report quality (mean of criteria 1-8, 0-3); None when not judged.
    """

    case_id: str
    model: str
    condition: str
    topology: str
    stop_reason: str
    rounds_completed: int
    consensus: bool
    tokens: int
    quality: float | None


class JudgeFileRef(Record):
    """The judge file a run was judged with (``judge.json``'s ``judge_file``, ``judge_file.json``).

    Attributes:
        path: The judge file read (absolute).
        sha256: Hex SHA-256 of its bytes (equal to the copy's).
        run_id: The calibration run that wrote it.
        judge_model: The judge model its guidance was validated with.
        copy_name: The copy's file name inside the judged run.
    """

    path: str
    sha256: str
    run_id: str = ""
    judge_model: str = ""
    copy_name: str = "calibrated_judge.json"


class AnchoredCriterion(Record):
    """One criterion of the judge file and its anchor (rated validation targets).

    Attributes:
        criterion: Criterion id.
        number: Its number in the bench's rubric.
        name: Its name.
        guidance: The winner's candidate id (the guidance the bench should be judged with).
        n_rated: Rated targets of the anchor.
        n_rated_cases: Their cases.
        rated_judge_mean: The anchor's mean judge score; None without targets.
        rated_physician_mean: The anchor's mean physician rating; None without targets.
        refused: Why the criterion gets no anchored figure; None: it does.
    """

    criterion: str
    number: int
    name: str
    guidance: str
    n_rated: int
    n_rated_cases: int
    rated_judge_mean: float | None
    rated_physician_mean: float | None
    refused: str | None


class AnchoredSystem(Record):
    """Raw and physician-anchored means of one system (model x condition x topology) on one criterion.

    Attributes:
        model: Generating model, or ``all``.
        condition: ``free-form`` or ``structured``.
        topology: ``single`` or ``n+1``.
        number: Criterion number.
        criterion: Criterion id.
        n_items: Judged items with a numeric score (repeats averaged).
        n_unscored: Items whose every repeat failed or was not evaluable.
        n_cases: Cases of the scored items.
        judge_mean: Raw judge mean (score points).
        judge_mean_low: Lower bound (case-clustered bootstrap).
        judge_mean_high: Upper bound.
        n_rated: The anchor's rated targets.
        n_rated_cases: Their cases.
        anchored_mean: Prediction-powered estimate of the physicians' mean; None when refused.
        anchored_mean_low: Lower bound.
        anchored_mean_high: Upper bound.
        lam: PPI++ weight in [0, 1] (0: the judge is ignored, 1: plain PPI).
        effective_n: Physician ratings the estimate is worth.
        refused: Why there is no anchored figure; None: there is.
    """

    model: str
    condition: str
    topology: str
    number: int
    criterion: str
    n_items: int
    n_unscored: int
    n_cases: int
    judge_mean: float | None
    judge_mean_low: float | None
    judge_mean_high: float | None
    n_rated: int
    n_rated_cases: int
    anchored_mean: float | None
    anchored_mean_low: float | None
    anchored_mean_high: float | None
    lam: float | None
    effective_n: float | None
    refused: str | None


class AnchoredDifference(Record):
    """System A minus system B on one criterion: raw and physician-anchored.

    Attributes:
        between: ``conditions`` (structured - free-form), ``topologies`` (n+1 - single) or
            ``models`` (each pair, in name order).
        a_model: System A's model.
        a_condition: System A's condition.
        a_topology: System A's topology.
        b_model: System B's model.
        b_condition: System B's condition.
        b_topology: System B's topology.
        number: Criterion number.
        criterion: Criterion id.
        n_items_a: A's scored items.
        n_items_b: B's scored items.
        judge_difference: Raw difference of judge means (score points).
        judge_difference_low: Lower bound (joint case-clustered bootstrap).
        judge_difference_high: Upper bound.
        anchored_difference: Anchored difference; None when refused.
        anchored_difference_low: Lower bound.
        anchored_difference_high: Upper bound.
        lam: PPI++ weight.
        effective_n: Physician ratings the estimate is worth.
        refused: Why there is no anchored figure; None: there is.
    """

    between: str
    a_model: str
    a_condition: str
    a_topology: str
    b_model: str
    b_condition: str
    b_topology: str
    number: int
    criterion: str
    n_items_a: int
    n_items_b: int
    judge_difference: float | None
    judge_difference_low: float | None
    judge_difference_high: float | None
    anchored_difference: float | None
    anchored_difference_low: float | None
    anchored_difference_high: float | None
    lam: float | None
    effective_n: float | None
    refused: str | None


class AnchoredSection(Record):
    """Physician-anchored means of a bench judged with a judge file.

    Attributes:
        available: Whether anchored figures were computed.
        reason: Why not, in words; None when available.
        judge_file: The judge file used; None when judged without one.
        assumption: The sentence shown with every anchored figure.
        difference_assumption: The one the anchored differences rest on; None when none was
            computed.
        confidence: Interval level, 0.95.
        min_rated_cases: Fewest rated cases an anchored figure needs.
        criteria: Per criterion of the judge file.
        systems: Per criterion and system.
        differences: Per criterion and compared pair of systems.
        notes: Things a reader should know (criteria not judged, shared cases ...).
    """

    available: bool
    reason: str | None
    judge_file: JudgeFileRef | None
    assumption: str
    difference_assumption: str | None
    confidence: float
    min_rated_cases: int
    criteria: list[AnchoredCriterion]
    systems: list[AnchoredSystem]
    differences: list[AnchoredDifference]
    notes: list[str]


class BenchReport(Record):
    """``bench_report.json`` of a bench run (:func:`evolve.report.build_bench_report`).

    Attributes:
        version: :data:`BENCH_REPORT_VERSION`.
        run_dir: The run folder the report was built from.
        bootstrap: How the intervals were drawn.
        counts: What the report was computed from.
        judged: Whether ``judge_scores.csv`` exists.
        notes: Rows left out and why, and other things a reader should know.
        tables: Tables 2-9, panel sizes, distributions, complexity, format.
        roles: Exact role labels against their harmonised categories.
        free_form_split: How free-form opinions were split; None in reports written before it.
        pipelines: One record per pipeline (the figures' data).
        anchored: The physician-anchored section; None when not judged.
        usage: Every model call of every process of the run; None in old reports.
        prefix_cached_share: Share of the judge's prompt tokens the server served from its
            prefix cache, in [0, 1]; None when unknown or not judged.
    """

    version: Literal[1]
    run_dir: str
    bootstrap: ClusterBootstrap
    counts: BenchCounts
    judged: bool
    notes: list[str]
    tables: BenchTables
    roles: Roles
    free_form_split: FreeFormSplit | None = None
    pipelines: list[PipelineRecord]
    anchored: AnchoredSection | None = None
    usage: Usage | None = None
    prefix_cached_share: float | None = None
