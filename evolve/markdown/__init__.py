"""Markdown that quotes untrusted text: one way to put it in a report, used by every report.

Reports (``report.md``, ``audit.md``, ``bench_report.md``, ``otb_report.md``, comparison
reports) quote text nobody vetted: guidance a model wrote, its rationales and role names, and
names from user files (criteria, raters, models, runs). Markdown viewers render HTML and fetch
images, so a quoted ``<script>``, ``<img src=http://...>`` or ``![x](http://...)`` would run or
reach the network, and a ``|`` or a line break would break a table. Every such text goes
through :func:`md_inline` (a line of text, table-cell safe), :func:`md_code` (an id in a code
span, when one can hold it) or :func:`md_code_block` (a fenced block its text cannot close);
numbers and the reports' own words need none of them. An estimate with its interval is written
by :func:`format_interval`, the same way in every report's tables, and a lone number (a
difference, signed) by :func:`format_number`; neither writes ``-0.000``. A count with its noun
(``1 judge call``, ``2 judge calls``) is :func:`count_noun`'s, in reports and on the command line.
"""

from evolve.markdown._escape import md_code, md_code_block, md_inline
from evolve.markdown._numbers import count_noun, format_interval, format_number

__all__ = ["count_noun", "format_interval", "format_number", "md_code", "md_code_block", "md_inline"]
