"""Reports rebuilt from saved run artifacts (no model calls).

:func:`write_report` turns a calibration run folder into:

- ``report.md`` / ``report.json`` - **Table 5** (consilium paper, calibration): per criterion, train and validation
  MAE of no guidance, the best initial prompt, the training median and the evolved winner,
  the winner's repeat SD, numeric coverage and signed error, the physician ceiling and the
  drift flag of the audit, then unweighted **macro means** over criteria; every agreement
  statistic of :mod:`evolve.stats` (MAE, class-balanced MAE, QWK, ordinal Krippendorff's
  alpha, Spearman) with a case-clustered bootstrap 95% interval for each baseline and for
  physician vs physician; the structurally inapplicable (criterion, component) pairs; and
  per-criterion details (every initial prompt, evolution counts, calls, tokens, the winner);
  **paired verdicts** of the winner against the best initial prompt, no guidance and the
  training median (:data:`VERDICTS`): a sign-flip test over case clusters with the interval
  that inverts it, "too few cases to tell" below :data:`evolve.stats.MIN_CASES` cases, Holm's
  correction over every comparison of the report (:func:`apply_holm`), and "no better than a
  constant" for a winner whose validation MAE is not below the training median's;
- ``table5.csv`` (:data:`TABLE5_COLUMNS`) and ``agreement.csv`` (:data:`AGREEMENT_COLUMNS`);
- ``judge.json`` - the judge file (:func:`build_judge_file`, :mod:`evolve.calibrated`): the
  calibrated judge with its rubric copy, settings, seeds, validation figures and anchor sample.

Every number comes from ``scores.csv``, ``candidates.csv``, ``exclusions.csv``, ``audit.json``,
the pack and the split, so a report can be rebuilt - and checked - at any time.

:func:`write_bench_report` turns a benchmark run folder (``cases/*.json`` CaseRun artifacts,
optionally ``judge_scores.csv``) into ``bench_report.md`` / ``bench_report.json`` and one CSV per
table (consilium paper, tables):

- **Table 3** (``table3.csv``, :data:`TABLE3_COLUMNS`) - consilium outcomes per model x
  condition x topology: first-round and eventual consensus, mean rounds, round-limit stops,
  failures, stop reasons;
- **Table 4** (``table4.csv``, :data:`TABLE4_COLUMNS`) - role-level vote transitions between
  consecutive rounds, by harmonised role category (:func:`harmonise_role`, ``roles.csv``);
- **Table 6** (``table6.csv``) - judge-score means, population SD, numeric coverage,
  not-evaluable and failure counts per component;
- **Table 7** (``table7.csv``) - final-report quality vs generation tokens per case;
- **Table 8** (``table8.csv``) - per criterion, the final report vs the primary role;
- **Table 9** (``table9.csv``) - final-report scores and case complexity by rounds completed
  (1, 2, 3+).

Shares and means carry case-clustered percentile bootstrap 95% intervals; the judge-based
tables say "not judged yet" when ``judge_scores.csv`` is absent.

:func:`write_otb_report` turns an OpenTumorBoard run folder (``evolve otb run``) into
``otb_report.md`` / ``otb_report.json`` / ``otb_table.csv``: per task and model the Table A2/A3
layouts (mean with case-clustered intervals, malformed answers at the floor, judge failures
counted, flag rates, ROUGE-L, BERTScore or why it is missing, output tokens), the four
decisions and the scores by question type.

Every run report also writes **report.html** (:func:`calibration_html`, :func:`bench_html`,
:func:`otb_html`): one self-contained page, figures embedded as PNG, then the Markdown report's tables. Each figure is
drawn by a public function that takes the records a report holds and an optional matplotlib
``ax`` (:func:`archive_heatmap`, :func:`mae_over_attempts`, :func:`lineage`,
:func:`confusion_heatmap`, :func:`interval_plot`, :func:`drift_flags`,
:func:`stop_reasons_by_round`, :func:`vote_transitions`, :func:`quality_vs_tokens`), so the same
figures can be drawn in a notebook; matplotlib loads only when one is drawn.

:func:`write_comparison` (``evolve compare``) puts runs side by side under ``reports/<name>/``:
calibration runs on the same pack and split (validation agreement of each, and paired MAE
differences with case-clustered intervals on the targets they share), or bench runs on the same
case file (final-report quality paired by case); anything else is refused.

All reports end with **calls and tokens** (:func:`usage_report`): every model call of every
process that worked on the run - retries, failures, cache hits, the audit's and the mutation
LLM's calls included - summed from the journal (each paid call is journaled as it finishes, so
a killed process loses none; calls it had sent and never saw answered are counted as in flight)
- and the share of the prompt tokens sent that the server served from its prefix cache
(:func:`prefix_cached_share`, from ``cached_prompt_tokens`` per call in the scores file) where the
endpoint reports it. A run made with a spending limit or prices adds what it spent against them
(:func:`spend_report`: paid calls, tokens, prefix-cached tokens, USD, stops at the limit).
Reports are built from the run's files first and then written under the run folder's lock
(:meth:`evolve.runs.RunFolder.exclusive`): a report rebuilt while another process writes the run
is refused, having written nothing.
"""

from typing import TYPE_CHECKING

from evolve.lazy import lazy_members
from evolve.report._figures import (
    archive_heatmap,
    confusion_heatmap,
    drift_flags,
    interval_plot,
    lineage,
    mae_over_attempts,
    quality_vs_tokens,
    stop_reasons_by_round,
    vote_transitions,
)
from evolve.report._judge_file import build_judge_file
from evolve.report._pages import bench_html, calibration_html, otb_html
from evolve.report._report import (
    AGREEMENT_COLUMNS,
    N_BOOT,
    REPORT_VERSION,
    TABLE5_COLUMNS,
    VERDICTS,
    agreement_records,
    apply_holm,
    build_report,
    comparisons_text,
    render_markdown,
    verdict_text,
    verdict_warnings,
    write_report,
)
from evolve.report._scoring import (
    LAMBDA_ZERO,
    build_scoring_report,
    scoring_html,
    scoring_markdown,
    write_scoring_report,
)
from evolve.report._settings import FIGURES_ENV, REPLICATES_ENV, ReportSettings, report_settings
from evolve.report._spend import render_spend, spend_report
from evolve.report._usage import prefix_cached_share, render_prefix_share, render_usage, usage_report

# The benchmark and OpenTumorBoard reports read their engines' records (consilium, otb): they load
# only when one of these is first used, so ``evolve report`` and ``compare`` of calibration runs
# load no engine.
_LAZY = {
    **dict.fromkeys(("BENCH_REPORT_VERSION", "JUDGE_SCORE_COLUMNS", "ROLES_COLUMNS", "TABLE3_COLUMNS", "TABLE4_COLUMNS",
                     "TABLE6_COLUMNS", "TABLE7_COLUMNS", "TABLE8_COLUMNS", "TABLE9_COLUMNS", "build_bench_report",
                     "harmonise_role", "load_bench_run", "render_bench_markdown", "write_bench_report"),
                    "evolve.report._bench"),
    **dict.fromkeys(("DIFFERENCE_COLUMNS", "MIN_SHARED_PAIRS", "build_comparison", "comparison_count_text",
                     "difference_verdict", "render_comparison_markdown", "write_comparison"), "evolve.report._compare"),
    **dict.fromkeys(("OTB_TABLE_COLUMNS", "build_otb_report", "render_otb_markdown", "write_otb_report"),
                    "evolve.report._otb"),
}

if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers and readers
    from evolve.report._bench import (
        BENCH_REPORT_VERSION,
        JUDGE_SCORE_COLUMNS,
        ROLES_COLUMNS,
        TABLE3_COLUMNS,
        TABLE4_COLUMNS,
        TABLE6_COLUMNS,
        TABLE7_COLUMNS,
        TABLE8_COLUMNS,
        TABLE9_COLUMNS,
        build_bench_report,
        harmonise_role,
        load_bench_run,
        render_bench_markdown,
        write_bench_report,
    )
    from evolve.report._compare import (
        DIFFERENCE_COLUMNS,
        MIN_SHARED_PAIRS,
        build_comparison,
        comparison_count_text,
        difference_verdict,
        render_comparison_markdown,
        write_comparison,
    )
    from evolve.report._otb import OTB_TABLE_COLUMNS, build_otb_report, render_otb_markdown, write_otb_report


__getattr__ = lazy_members(__name__, _LAZY, globals())


__all__ = [
    "AGREEMENT_COLUMNS",
    "BENCH_REPORT_VERSION",
    "DIFFERENCE_COLUMNS",
    "MIN_SHARED_PAIRS",
    "JUDGE_SCORE_COLUMNS",
    "FIGURES_ENV",
    "LAMBDA_ZERO",
    "N_BOOT",
    "OTB_TABLE_COLUMNS",
    "REPLICATES_ENV",
    "REPORT_VERSION",
    "ReportSettings",
    "ROLES_COLUMNS",
    "TABLE3_COLUMNS",
    "TABLE4_COLUMNS",
    "TABLE5_COLUMNS",
    "TABLE6_COLUMNS",
    "TABLE7_COLUMNS",
    "TABLE8_COLUMNS",
    "TABLE9_COLUMNS",
    "VERDICTS",
    "agreement_records",
    "apply_holm",
    "archive_heatmap",
    "bench_html",
    "build_comparison",
    "build_judge_file",
    "build_bench_report",
    "build_otb_report",
    "build_report",
    "build_scoring_report",
    "calibration_html",
    "comparison_count_text",
    "comparisons_text",
    "confusion_heatmap",
    "difference_verdict",
    "drift_flags",
    "harmonise_role",
    "interval_plot",
    "lineage",
    "mae_over_attempts",
    "otb_html",
    "load_bench_run",
    "prefix_cached_share",
    "quality_vs_tokens",
    "render_bench_markdown",
    "render_comparison_markdown",
    "render_markdown",
    "render_otb_markdown",
    "render_prefix_share",
    "render_spend",
    "render_usage",
    "report_settings",
    "scoring_html",
    "scoring_markdown",
    "spend_report",
    "stop_reasons_by_round",
    "usage_report",
    "verdict_text",
    "verdict_warnings",
    "vote_transitions",
    "write_scoring_report",
    "write_bench_report",
    "write_comparison",
    "write_otb_report",
    "write_report",
]
