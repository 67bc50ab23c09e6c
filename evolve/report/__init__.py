"""Reports rebuilt from saved run artifacts (no model calls).

:func:`write_report` turns a calibration run folder into ``report.md`` and ``report.json``:
per criterion, every baseline (no guidance, each initial prompt, the training median), the
evolved winner and the physician-vs-physician ceiling, with train and validation MAE, signed
error, repeat SD, numeric coverage, calls and tokens.
"""

from evolve.report._report import REPORT_VERSION, build_report, render_markdown, write_report

__all__ = ["REPORT_VERSION", "build_report", "render_markdown", "write_report"]
