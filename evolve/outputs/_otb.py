"""``otb_report.json``: the OpenTumorBoard report of a judged run (:class:`OtbReport`).

What :func:`evolve.report.build_otb_report` returns and writes: per task and model the paper's
Table A2/A3 figures, the four decisions of the Board Simulation and the Specialist Turn by
question type. Scores are on the released 1-5 scales; rates are in [0, 1]; a value is None
where it is undefined (no scored item).
"""

from __future__ import annotations

from typing import Literal

from evolve.outputs._bench import ClusterBootstrap, JudgeFileRef
from evolve.outputs._common import Usage
from evolve.records import Record

__all__ = ["OTB_REPORT_VERSION", "OtbAnchored", "OtbAnchoredCriterion", "OtbDecisionRow", "OtbMainRow",
           "OtbQuestionTypeRow", "OtbReport", "OtbTables"]

OTB_REPORT_VERSION = 1
"""Version of ``otb_report.json``'s layout (:class:`OtbReport`); raised on any change a reader sees."""


class OtbMainRow(Record):
    """One task and model (a row of ``otb_table.csv``).

    Attributes:
        task: ``board`` (Board Simulation) or ``turn`` (Specialist Turn).
        model: Generating model.
        items: Answered items (= scored + format_failures + judge_failures).
        scored: Items with a judge score.
        format_failures: Malformed answers (counted 1, the floor, in the mean).
        judge_failures: Items whose judging failed (left out of the mean).
        mean: Mean judge score (1-5), malformed answers at 1; None without any.
        mean_low: Lower bound of its case-clustered 95% interval.
        mean_high: Upper bound.
        critical_error_rate: Share of scored items flagged with a critical error (turn only).
        critical_error_rate_low: Lower bound.
        critical_error_rate_high: Upper bound.
        unsupported_claim_rate: Share flagged with an unsupported claim (turn only).
        unsupported_claim_rate_low: Lower bound.
        unsupported_claim_rate_high: Upper bound.
        rouge_l: Mean ROUGE-L F1 against the reference, in [0, 1].
        bertscore: Mean BERTScore-style F1 on the stand-in encoder.
        bertscore_model: The encoders used, joined by ``"; "``.
        bertscore_missing: Why BERTScore is missing for some rows, joined by ``"; "`` (empty: never).
        output_tokens: Mean completion tokens per answer.
    """

    task: str
    model: str
    items: int
    scored: int
    format_failures: int
    judge_failures: int
    mean: float | None
    mean_low: float | None
    mean_high: float | None
    critical_error_rate: float | None
    critical_error_rate_low: float | None
    critical_error_rate_high: float | None
    unsupported_claim_rate: float | None
    unsupported_claim_rate_low: float | None
    unsupported_claim_rate_high: float | None
    rouge_l: float | None
    bertscore: float | None
    bertscore_model: str
    bertscore_missing: str
    output_tokens: float | None


class OtbDecisionRow(Record):
    """One of the four decisions (Board Simulation) of one model.

    Attributes:
        model: Generating model.
        decision: ``therapy``, ``surgery``, ``next_action`` or ``clinical_trial``.
        cases: Items whose reference took the decision (in scope).
        mean: Mean score (1-5) over them; None without any.
        items: Every item (= cases + out_of_scope + judge_failures + format_failures).
        scored: Items judged on the decision.
        out_of_scope: Judged items whose reference never took it (-1).
        judge_failures: Items whose four-decision call gave nothing usable.
        format_failures: Malformed answers.
    """

    model: str
    decision: str
    cases: int
    mean: float | None
    items: int
    scored: int
    out_of_scope: int
    judge_failures: int
    format_failures: int


class OtbQuestionTypeRow(Record):
    """Specialist Turn figures of one model and question type (scored items only, no floor).

    Attributes:
        model: Generating model.
        qa_type: The question type.
        count: Scored items (as released).
        items: Every item of the type.
        scored: Scored items.
        format_failures: Malformed answers.
        judge_failures: Judge failures.
        mean: Mean score (1-5); None without a scored item.
        critical_error_rate: Share flagged with a critical error; None without a flag.
        unsupported_claim_rate: Share flagged with an unsupported claim; None without a flag.
    """

    model: str
    qa_type: str
    count: int
    items: int
    scored: int
    format_failures: int
    judge_failures: int
    mean: float | None
    critical_error_rate: float | None
    unsupported_claim_rate: float | None


class OtbTables(Record):
    """The report's tables.

    Attributes:
        main: One row per task and model (Tables A2/A3).
        decisions: Four decisions per model (empty unless judged).
        question_types: Specialist Turn by question type.
    """

    main: list[OtbMainRow]
    decisions: list[OtbDecisionRow]
    question_types: list[OtbQuestionTypeRow]


class OtbAnchoredCriterion(Record):
    """A criterion of the judge file with an anchor.

    Attributes:
        criterion: Criterion id.
        n_rated: Rated targets of its anchor.
        n_rated_cases: Their cases.
    """

    criterion: str
    n_rated: int
    n_rated_cases: int


class OtbAnchored(Record):
    """The judge file an OpenTumorBoard run was judged with, and why no anchored mean is given.

    Attributes:
        judge_file: The judge file (path, sha256, calibration run, judge model).
        available: Always False: the report gives no physician-anchored mean.
        criteria: The judge file's criteria with an anchor.
        reason: Why not, in words.
    """

    judge_file: JudgeFileRef
    available: bool
    criteria: list[OtbAnchoredCriterion]
    reason: str


class OtbReport(Record):
    """``otb_report.json`` of an OpenTumorBoard run (:func:`evolve.report.build_otb_report`).

    Attributes:
        version: :data:`OTB_REPORT_VERSION` (reports written before it had none: version 1).
        run_dir: The run folder.
        judge_rubric_version: The judge prompts' version (``evolve-otb-judge-1``).
        bootstrap: How the intervals were drawn.
        tables: Main table, four decisions, question types.
        anchored: The judge file used; None when judged without one.
        usage: Every model call of every process of the run; None in old reports.
        prefix_cached_share: Share of the judge's prompt tokens the server served from its
            prefix cache, in [0, 1]; None when unknown.
    """

    version: Literal[1] = 1
    run_dir: str
    judge_rubric_version: str
    bootstrap: ClusterBootstrap
    tables: OtbTables
    anchored: OtbAnchored | None = None
    usage: Usage | None = None
    prefix_cached_share: float | None = None
