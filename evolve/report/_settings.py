"""How much work a run's report does: bootstrap replicates and the figures of ``report.html``.

Every report writer (:func:`~evolve.report.write_report`, :func:`~evolve.report.write_bench_report`,
:func:`~evolve.report.write_otb_report`, :func:`~evolve.report.write_scoring_report`) takes a
:class:`ReportSettings`. Without one it reads the environment, so the report a run writes at
its end (``evolve calibrate``, ``bench run``, ``otb run``, ``judge score``) can be made lighter
without any option:

* ``EVOLVE_REPORT_REPLICATES``: bootstrap replicates per interval (default 2,000). Fewer give
  rougher interval bounds, faster; the report states the number it used.
* ``EVOLVE_REPORT_FIGURES``: ``0``/``false``/``off`` leaves the PNG figures out of
  ``report.html`` (the page then says so, and keeps every table); ``1``/``true``/``on`` (the
  default) draws them.

A replicate count passed to a writer (``n_boot=``, the report commands' ``--n-boot``) wins
over both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import Field

from evolve.errors import ConfigError
from evolve.records import Record

__all__ = ["FIGURES_ENV", "FIGURES_OFF_NOTE", "N_BOOT", "REPLICATES_ENV", "ReportSettings", "report_settings"]

N_BOOT = 2000
"""Default bootstrap replicates per interval."""

MAX_REPLICATES = 100_000
"""Most replicates a report accepts."""

REPLICATES_ENV = "EVOLVE_REPORT_REPLICATES"
"""Environment variable with the default replicate count."""

FIGURES_ENV = "EVOLVE_REPORT_FIGURES"
"""Environment variable that turns the figures of ``report.html`` off (``0``) or on (``1``)."""

FIGURES_OFF_NOTE = (f"Figures were turned off for this report ({FIGURES_ENV}=0 or ReportSettings(figures=False)); "
                    f"the tables below are complete. Rebuild the report with {FIGURES_ENV} unset to draw them.")
"""What ``report.html`` says in place of its figures when they are off."""

_SWITCH = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False}


class ReportSettings(Record):
    """What a report computes and draws.

    Attributes:
        replicates: Bootstrap replicates per interval (1..100,000; default 2,000).
        figures: Draw the PNG figures of ``report.html``; False leaves a note in their place.
    """

    replicates: int = Field(default=N_BOOT, ge=1, le=MAX_REPLICATES)
    figures: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReportSettings:
        """The settings named by ``EVOLVE_REPORT_REPLICATES`` and ``EVOLVE_REPORT_FIGURES``
        (unset or empty: the defaults).

        Args:
            environ: Where to look (default: ``os.environ``).

        Raises:
            ConfigError: A value that is not a whole number in range, or not a switch, naming
                the variable and what it accepts.
        """
        env = os.environ if environ is None else environ
        return cls(replicates=_replicates(env.get(REPLICATES_ENV, "").strip()),
                   figures=_switch(env.get(FIGURES_ENV, "").strip()))


def _replicates(raw: str) -> int:
    if not raw:
        return N_BOOT
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_REPLICATES:
        raise ConfigError(f"{REPLICATES_ENV}={raw!r}: expected a whole number of bootstrap replicates from 1 to "
                          f"{MAX_REPLICATES:,}, e.g. {REPLICATES_ENV}=200; unset it for the default {N_BOOT:,}.")
    return int(raw)


def _switch(raw: str) -> bool:
    if not raw:
        return True
    if raw.lower() not in _SWITCH:
        raise ConfigError(f"{FIGURES_ENV}={raw!r}: expected 0 (no figures in report.html) or 1 (figures); "
                          "false/true and off/on also work.")
    return _SWITCH[raw.lower()]


def report_settings(settings: ReportSettings | None = None, n_boot: int | None = None) -> ReportSettings:
    """The settings a report writer uses: ``settings`` if given, else the environment's; an
    explicit ``n_boot`` replaces the replicate count.

    Raises:
        ConfigError: As :meth:`ReportSettings.from_env`, or ``n_boot`` out of range.
    """
    settings = settings if settings is not None else ReportSettings.from_env()
    if n_boot is None:
        return settings
    if isinstance(n_boot, bool) or not 1 <= n_boot <= MAX_REPLICATES:
        raise ConfigError(f"n_boot={n_boot!r}: expected 1 to {MAX_REPLICATES:,} bootstrap replicates.")
    return settings.model_copy(update={"replicates": n_boot})
