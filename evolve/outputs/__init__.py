"""Typed run outputs: what a finished run wrote, read back as versioned records.

A run folder holds files other programs read: ``report.json`` (calibration), ``bench_report.json``
(consilium benchmark), ``otb_report.json`` (OpenTumorBoard), ``judge.json`` (the calibrated
judge). Each is a versioned pydantic model here, built on :class:`evolve.records.Record` (frozen,
unknown fields refused), and published as a JSON Schema (:func:`json_schema`, files under
``evolve/outputs/schemas/``). The writers validate what they write against these models, so a
file on disk always matches its schema; the readers - Markdown, HTML pages, ``evolve compare``,
the CLI - read attributes, never string keys.

:func:`read_run` is the one entry point for readers, as ``read_eval_log`` is in inspect_ai: give
it a run folder (or a judge file) and it returns the typed run - :class:`CalibrationRun`,
:class:`BenchRun`, :class:`OtbRun` - or a :class:`~evolve.calibrated.JudgeFile`. It loads no
engine, no model client and no HTTP stack, so a reader of finished runs starts fast.

This package sits on floor 5, beside :mod:`evolve.calibrated`: below every engine, above the
run infrastructure and the statistics it reuses.
"""

from evolve.outputs._common import (
    CallCounts,
    Comparisons,
    PairedVerdict,
    PriceRecord,
    SpendRecord,
    SpentTokens,
    StatInterval,
    Usage,
)

__all__ = [
    "CallCounts",
    "Comparisons",
    "PairedVerdict",
    "PriceRecord",
    "SpendRecord",
    "SpentTokens",
    "StatInterval",
    "Usage",
]
