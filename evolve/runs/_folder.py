"""Run folders: where each file of a run lives, and how it is written (whole or not at all)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evolve.errors import ConfigError, RunError
from evolve.runs._files import atomic_write
from evolve.runs._journal import Journal
from evolve.runs._lock import LOCK_FILE, lock_holder, run_lock

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["KINDS", "BenchFolder", "CalibrationFolder", "OtbFolder", "RunFolder", "ScoringFolder", "distinct_slugs", "folder_kind",
           "model_slug"]


def model_slug(model: str) -> str:
    """A model id as a file-name segment: runs of characters other than letters, digits, ``.``,
    ``_`` and ``-`` become ``-`` (``openai/gpt-oss-120b`` -> ``openai-gpt-oss-120b``).

    Raises:
        ConfigError: Nothing usable is left (e.g. ``"//"``).
    """
    slug = re.sub(r"[^A-Za-z0-9._\-]+", "-", model).strip("-.")
    if not slug:
        raise ConfigError(f"model id {model!r} has no letter or digit to name its files by; use a real model id.")
    return slug


def distinct_slugs(models: tuple[str, ...]) -> tuple[str, ...]:
    """``models`` unchanged, after checking that no two share a file-name slug (their files would
    collide); for a pydantic validator.

    Raises:
        ValueError: Naming the two models and their slug.
    """
    slugs: dict[str, str] = {}
    for m in models:
        s = model_slug(m)
        if s in slugs:
            raise ValueError(f"models {slugs[s]!r} and {m!r} share the file-name slug {s!r}; they cannot share a run")
        slugs[s] = m
    return models


class RunFolder:
    """A run's folder under ``archives/``: its files by name, its journal, atomic writes.

    Every file a run writes is named by an attribute of a subclass (never a string elsewhere),
    and written with :meth:`write` (temporary file, fsync, rename).

    Args:
        path: The run folder (it need not exist yet).
    """

    JOURNAL = "journal.jsonl"
    RESUME = "the command that made it, with --resume"
    PROMPTS = "judge_prompts"
    """The run's copy of the rubrics it used, a prompts root (``judge_prompts/<rubric_id>/...``,
    with ``sources.json``: where each was copied from and every file's sha256)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    @property
    def journal_path(self) -> Path:
        """``journal.jsonl``: the append-only event log."""
        return self.path / self.JOURNAL

    def journal(self) -> Journal:
        """The run's :class:`Journal` (creates the folder)."""
        return Journal(self.journal_path)

    LOCK = LOCK_FILE
    """The hidden lock file of a process writing the run (see :meth:`exclusive`)."""

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[RunFolder]:
        """Hold the run folder's exclusive lock for the block: the one process that writes it.

        Every writer of a run (a run and its resumes, an audit, a report rebuilt into the folder)
        takes it; a reader of a finished run does not need it. An operating-system lock
        (``flock``) on :attr:`LOCK`, refused at once when another process holds it and released
        by the kernel when the holder dies (``kill -9`` leaves no stale lock). Re-entrant within
        a process. Creates the folder; removes it again on release when the block wrote nothing.

        Yields:
            This folder.

        Raises:
            RunLockedError: Another process holds it; names it (pid, host, start time) and the fix.
        """
        with run_lock(self.path):
            yield self

    def holder(self) -> dict | None:
        """Who is writing the run now (``pid``, ``host``, ``started``, ``command``), or None."""
        return lock_holder(self.path)

    @property
    def prompts_root(self) -> Path:
        """``judge_prompts/``: the run's copy of its rubric, protocol and initial guidance (a
        prompts root; absent in runs made before runs kept one)."""
        return self.path / self.PROMPTS

    def portable(self, path: Path | str | None) -> str | None:
        """A path as a run's configuration stores it: a relative path (relative to the current
        folder, as typed) becomes relative to this run folder; an absolute one stays absolute.

        The inverse is :meth:`resolve`, so ``evolve report RUN`` works from any folder.
        """
        if path is None:
            return None
        path = Path(path)
        if path.is_absolute():
            return str(path)
        try:
            return os.path.relpath(Path.cwd() / path, self.path.absolute())
        except ValueError:  # another drive (Windows): keep it absolute
            return str(Path.cwd() / path)

    def resolve(self, path: Path | str | None) -> Path | None:
        """A path read from this run's configuration, as a usable (absolute) path.

        A relative path is taken from the run folder (how runs store them, see :meth:`portable`);
        when nothing is there but the path exists from the current folder, that one (runs made
        before paths were stored relative to the run folder kept them as typed).
        """
        if path is None:
            return None
        path = Path(path)
        if path.is_absolute():
            return path
        from_run = Path(os.path.normpath(self.path.absolute() / path))
        if not from_run.exists() and (Path.cwd() / path).exists():
            return Path.cwd() / path
        return from_run

    def portable_fields(self, data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
        """``data`` (a configuration as JSON) with the path ``fields`` made :meth:`portable`."""
        return {**data, **{f: self.portable(data[f]) for f in fields if data.get(f) is not None}}

    def resolved_fields(self, data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
        """``data`` (a configuration as stored) with the path ``fields`` :meth:`resolve`-d."""
        return {**data, **{f: str(self.resolve(data[f])) for f in fields if data.get(f) is not None}}

    def write(self, name: str, data: str | bytes) -> Path:
        """Write the file ``name`` of this run atomically; returns its path."""
        path = self.path / name
        atomic_write(path, data)
        return path

    def _unreadable(self, name: str, why: str) -> RunError:
        return RunError(f"{self.path / name}: {why}. The run did not finish writing it; complete the run with "
                        f"`{self.RESUME.format(path=self.path)}` (finished calls are free from the cache).")

    def require(self, name: str) -> Path:
        """The path of the file ``name``, which must exist.

        Raises:
            RunError: It is missing (the run did not get that far), with the resume command.
        """
        path = self.path / name
        if not path.is_file():
            raise self._unreadable(name, "not found")
        return path

    def read_frame(self, name: str, *, optional: bool = False, **read_csv: Any) -> pd.DataFrame | None:
        """Read the CSV file ``name`` (``pandas.read_csv`` options in ``read_csv``).

        Args:
            name: A file of this run.
            optional: Return ``None`` when the file is absent instead of raising.

        Raises:
            RunError: The file is missing (unless ``optional``), empty or not CSV - named in one line
                with the command that completes the run.
        """
        import pandas as pd

        if optional and not (self.path / name).is_file():
            return None
        path = self.require(name)
        try:
            return pd.read_csv(path, **read_csv)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
            raise self._unreadable(name, f"empty or damaged ({type(exc).__name__}: {str(exc)[:120]})") from exc

    def read_json(self, name: str, *, optional: bool = False) -> Any:
        """Read the JSON file ``name`` (``None`` when ``optional`` and absent).

        Raises:
            RunError: Missing (unless ``optional``), empty or not JSON, in one line.
        """
        if optional and not (self.path / name).is_file():
            return None
        path = self.require(name)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self._unreadable(name, f"empty or damaged ({type(exc).__name__}: {exc})") from exc


class CalibrationFolder(RunFolder):
    """The files of a calibration run (``evolve calibrate``), by name.

    Attributes:
        CONFIG: The resolved configuration (no API key).
        CANDIDATES: Every candidate: origin, parent, text, training MAE, status, selection.
        SCORES: Every judge call: candidate, target, repeat, split, outcome, score, tokens.
        EXCLUSIONS: (criterion, component) pairs the rubric does not apply, never judged.
        REPORT_MD, REPORT_JSON: The report (Table 5 and agreement per criterion).
        REPORT_HTML: The same report with its figures, one self-contained page.
        TABLE5, AGREEMENT: The report's tables as CSV.
        AUDIT_JSON, AUDIT_MD: The semantic-drift audit of the winners.
        JUDGE: The judge file (:class:`evolve.calibrated.JudgeFile`): the calibrated judge,
            self-contained, for scoring new outputs.
        HOLDOUT: The held-out evaluation (``--evaluate-holdout``), a :class:`ScoringFolder`.
    """

    RESUME = "evolve calibrate --resume {path}"
    CONFIG = "config.json"
    CANDIDATES = "candidates.csv"
    SCORES = "scores.csv"
    EXCLUSIONS = "exclusions.csv"
    REPORT_MD = "report.md"
    REPORT_JSON = "report.json"
    REPORT_HTML = "report.html"
    TABLE5 = "table5.csv"
    AGREEMENT = "agreement.csv"
    AUDIT_JSON = "audit.json"
    AUDIT_MD = "audit.md"
    JUDGE = "judge.json"
    HOLDOUT = "holdout"

    def archive_csv(self, criterion: str) -> Path:
        """``archive_<criterion>.csv``: the criterion's final pyribs archive."""
        return self.path / f"archive_{criterion}.csv"


class ScoringFolder(RunFolder):
    """The files of a scoring run (``evolve judge``: a calibrated judge on new targets), by name.

    Attributes:
        CONFIG: The settings (targets, judge file, criteria, endpoint without key).
        JUDGE: A copy of the judge file scored with.
        CALLS: One row per judge call (winner; and no guidance on rated targets).
        ITEMS: One row per (criterion, target): status, mean score over repeats, outcome counts.
        RATINGS: The targets' physician ratings (rated targets only).
        SUMMARY: The report's numbers (per criterion means, agreement, anchored means).
        REPORT_MD, REPORT_HTML: The report.
    """

    RESUME = "evolve judge TARGETS --judge JUDGE --resume --run-id NAME --archives-dir DIR (NAME/DIR: {path})"
    CONFIG = "config.json"
    JUDGE = "judge.json"
    CALLS = "calls.csv"
    ITEMS = "items.csv"
    RATINGS = "ratings.csv"
    SUMMARY = "summary.json"
    REPORT_MD = "report.md"
    REPORT_HTML = "report.html"


class ComparisonFolder(RunFolder):
    """A cross-run report (``evolve compare``) under ``reports/<name>/``, by name.

    Attributes:
        REPORT_MD, REPORT_JSON, REPORT_HTML: The side-by-side report.
        DIFFERENCES: Every paired difference with its interval, as CSV.
    """

    RESUME = "evolve compare RUN_A RUN_B ... --name {path}"
    REPORT_MD = "report.md"
    REPORT_JSON = "report.json"
    REPORT_HTML = "report.html"
    DIFFERENCES = "differences.csv"


class BenchFolder(RunFolder):
    """The files of a benchmark run (``evolve bench run``), by name.

    Attributes:
        MANIFEST: Models, endpoint (no key), prompt templates and hashes, limits, versions.
        CASES: The cases generated on (``cases.jsonl``, evolve's case records).
        JUDGE_SCORES: One row per judge call on the generated material.
        JUDGE: How the material was judged (rubric, judge settings, seeds, guidance).
        REPORT_MD, REPORT_JSON: The bench tables (3-9 and the role table); each table is also
            ``table<N>.csv``, the role table ``roles.csv``.
    """

    RESUME = "evolve bench run --resume {path}"
    MANIFEST = "manifest.json"
    CASES = "cases.jsonl"
    JUDGE_SCORES = "judge_scores.csv"
    JUDGE = "judge.json"
    CALIBRATED_JUDGE = "calibrated_judge.json"
    """The judge file (a calibration's ``judge.json``, byte for byte) whose guidance judged the
    material; absent when judged without one. ``judge.json``'s ``judge_file`` names its source."""
    REPORT_MD = "bench_report.md"
    REPORT_JSON = "bench_report.json"
    REPORT_HTML = "report.html"
    ROLES = "roles.csv"
    DEIDENTIFICATION = "deidentification.csv"
    """What de-identification replaced in each case's text before any model saw it: ``case_id,
    kind, count`` per case and kind (never the identifier itself)."""


class OtbFolder(RunFolder):
    """The files of an OpenTumorBoard run (``evolve otb run``), by name.

    Per task (``board``, ``turn``) and model, in the released layout:
    ``<task>/<model slug>/responses.jsonl`` (one line per answered item), ``errors.jsonl`` (calls
    that failed; asked again on resume) and ``summary.json`` (the released aggregation, after
    judging).

    Attributes:
        CONFIG: The resolved configuration (``run_config.json``; no API key).
        JUDGE_SCORES: One line per judge call (``judge_scores.jsonl``).
        METRICS: ROUGE-L (and BERTScore, or why it is missing) per answered item.
        REPORT_MD, REPORT_JSON: The OpenTumorBoard tables.
        TABLE: The main table (one row per task and model) as CSV.
    """

    RESUME = "evolve otb run --resume {path}"
    CONFIG = "run_config.json"
    JUDGE_SCORES = "judge_scores.jsonl"
    METRICS = "metrics.csv"
    CALIBRATED_JUDGE = "calibrated_judge.json"
    """The judge file (a calibration's ``judge.json``, byte for byte) whose guidance judged the
    answers; absent when judged without one."""
    JUDGE_FILE_RECORD = "judge_file.json"
    """Which judge file that was: its path, sha256, calibration run and judge model."""
    REPORT_MD = "otb_report.md"
    REPORT_JSON = "otb_report.json"
    REPORT_HTML = "report.html"
    TABLE = "otb_table.csv"

    def task_dir(self, task: str, model: str) -> Path:
        """``<task>/<model slug>/``."""
        return self.path / task / model_slug(model)

    def responses(self, task: str, model: str) -> Path:
        """``<task>/<model slug>/responses.jsonl``."""
        return self.task_dir(task, model) / "responses.jsonl"

    def errors(self, task: str, model: str) -> Path:
        """``<task>/<model slug>/errors.jsonl``."""
        return self.task_dir(task, model) / "errors.jsonl"

    def summary(self, task: str, model: str) -> Path:
        """``<task>/<model slug>/summary.json``."""
        return self.task_dir(task, model) / "summary.json"


KINDS = {"calibration": "a calibration run (evolve calibrate)", "scoring": "a scoring run (evolve judge)",
         "bench": "a benchmark run (evolve bench run)", "otb": "an OpenTumorBoard run (evolve otb run)"}
"""The kinds of run folder :func:`folder_kind` tells apart, named for messages."""


def folder_kind(path: Path | str) -> str | None:
    """Which kind of run a folder holds (a key of :data:`KINDS`), by the file each kind writes
    before its first call: ``manifest.json`` (bench), ``run_config.json`` (OpenTumorBoard),
    ``config.json`` naming ``targets`` and a ``judge`` (scoring) or not (calibration).

    Returns:
        The kind, or None when the folder holds none of them (or its ``config.json`` is not
        a JSON object: the kind's own reader then names the problem).
    """
    path = Path(path)
    if (path / BenchFolder.MANIFEST).is_file():
        return "bench"
    if (path / OtbFolder.CONFIG).is_file():
        return "otb"
    try:
        data = json.loads((path / CalibrationFolder.CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return "scoring" if "targets" in data and "judge" in data else "calibration"
