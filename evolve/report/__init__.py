"""Reports rebuilt from saved run artifacts (no model calls).

:func:`write_report` turns a calibration run folder into:

- ``report.md`` / ``report.json`` - **Table 5** (SPEC §4): per criterion, train and validation
  MAE of no guidance, the best initial prompt, the training median and the evolved winner,
  the winner's repeat SD, numeric coverage and signed error, the physician ceiling and the
  drift flag of the audit, then unweighted **macro means** over criteria; every agreement
  statistic of :mod:`evolve.stats` (MAE, class-balanced MAE, QWK, ordinal Krippendorff's
  alpha, Spearman) with a case-clustered bootstrap 95% interval for each baseline and for
  physician vs physician; the structurally inapplicable (criterion, component) pairs; and
  per-criterion details (every initial prompt, evolution counts, calls, tokens, the winner);
- ``table5.csv`` (:data:`TABLE5_COLUMNS`) and ``agreement.csv`` (:data:`AGREEMENT_COLUMNS`).

Every number comes from ``scores.csv``, ``candidates.csv``, ``exclusions.csv``, ``audit.json``,
the pack and the split, so a report can be rebuilt - and checked - at any time.
"""

from evolve.report._report import (
    AGREEMENT_COLUMNS,
    N_BOOT,
    REPORT_VERSION,
    TABLE5_COLUMNS,
    agreement_records,
    build_report,
    render_markdown,
    write_report,
)

__all__ = [
    "AGREEMENT_COLUMNS",
    "N_BOOT",
    "REPORT_VERSION",
    "TABLE5_COLUMNS",
    "agreement_records",
    "build_report",
    "render_markdown",
    "write_report",
]
