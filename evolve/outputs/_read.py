"""Read a finished run back as typed records (:func:`read_run`), and publish their JSON Schemas."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from evolve.calibrated import CandidateRecord, JudgeFile, load_judge_file, read_candidates
from evolve.errors import RunError
from evolve.outputs._audit import AuditResult
from evolve.outputs._bench import BenchReport
from evolve.outputs._calibration import CalibrationReport
from evolve.outputs._comparison import ComparisonReport
from evolve.outputs._otb import OtbReport
from evolve.outputs._scoring import ScoringReport
from evolve.runs import KINDS, BenchFolder, CalibrationFolder, ComparisonFolder, OtbFolder, ScoringFolder, folder_kind

__all__ = ["SCHEMAS", "BenchRun", "CalibrationRun", "ComparisonRun", "OtbRun", "ScoringRun", "json_schema", "read_model",
           "read_run", "write_schemas"]

_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True)
class CalibrationRun:
    """A finished calibration run.

    Attributes:
        path: The run folder.
        report: Its ``report.json``.
        candidates: Every candidate of ``candidates.csv``, in file order.
        judge: Its judge file (``judge.json``); None for a run reported before judge files existed.
        audit: Its drift audit (``audit.json``); None when the run was not audited.
    """

    path: Path
    report: CalibrationReport
    candidates: list[CandidateRecord]
    judge: JudgeFile | None = None
    audit: AuditResult | None = None

    kind = "calibration"


@dataclass(frozen=True)
class BenchRun:
    """A finished consilium benchmark run (``evolve bench run``).

    Attributes:
        path: The run folder.
        report: Its ``bench_report.json``.
    """

    path: Path
    report: BenchReport

    kind = "bench"


@dataclass(frozen=True)
class OtbRun:
    """A finished OpenTumorBoard run (``evolve otb run``).

    Attributes:
        path: The run folder.
        report: Its ``otb_report.json``.
    """

    path: Path
    report: OtbReport

    kind = "otb"


@dataclass(frozen=True)
class ScoringRun:
    """A finished scoring run (``evolve judge``; a calibration's ``holdout/``).

    Attributes:
        path: The run folder.
        report: Its ``summary.json``.
        judge: The judge file it scored with (its copy, ``judge.json``).
    """

    path: Path
    report: ScoringReport
    judge: JudgeFile

    kind = "scoring"


@dataclass(frozen=True)
class ComparisonRun:
    """A cross-run report of ``evolve compare`` (``reports/<name>/``).

    Attributes:
        path: The report folder.
        report: Its ``report.json``.
    """

    path: Path
    report: ComparisonReport

    kind = "comparison"


def read_model(path: Path | str, model: type[_M], *, rebuild: str) -> _M:
    """Read one JSON run output as ``model``.

    Args:
        path: The file.
        model: Its record class (e.g. :class:`CalibrationReport`).
        rebuild: The command that writes the file again (quoted in the error's fix).

    Returns:
        The validated record.

    Raises:
        RunError: Missing or unreadable file, invalid JSON, or a file that does not match the
            model (an older or newer format version, a field missing or unknown); the message
            names the file, the first field at fault, and ``rebuild``.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"{path}: cannot read it ({exc}); write it with `{rebuild}`.") from exc
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise RunError(f"{path}: not a {model.__name__} this evolve reads (field '{where}': {first['msg']}). "
                       f"Write it again with `{rebuild}` (reports are rebuilt from the run's files, nothing "
                       "is paid again).") from exc


_RUN_FILES = frozenset({"report.json", "bench_report.json", "otb_report.json", "summary.json", "config.json",
                        "run_config.json", "manifest.json", "journal.jsonl", "audit.json", "comparison.json"})
"""Files a run folder holds that are not judge files: given one, :func:`read_run` names the folder."""


def read_run(path: Path | str) -> CalibrationRun | BenchRun | OtbRun | ScoringRun | ComparisonRun | JudgeFile:
    """A finished run, typed: what a reader of runs needs, with no engine and no model client.

    Args:
        path: A calibration run folder (``report.json``), a benchmark run folder
            (``bench_report.json``), an OpenTumorBoard run folder (``otb_report.json``), a
            scoring run folder (``summary.json``, ``evolve judge``), a comparison folder
            (``reports/<name>/``, ``evolve compare``), or a judge file (``judge.json``).

    Returns:
        :class:`CalibrationRun`, :class:`BenchRun`, :class:`OtbRun`, :class:`ScoringRun`,
        :class:`ComparisonRun`, or :class:`~evolve.calibrated.JudgeFile` for a judge file.

    Raises:
        RunError: No such folder or file, a run without a report yet (the message gives the
            command that writes it), or a file that does not match its schema.
    """
    path = Path(path)
    if path.is_file() and path.name in _RUN_FILES:  # a run's own file: the run is its folder
        raise RunError(f"{path}: read_run takes the run's folder (or a judge.json), not one of its files; pass "
                       f"{path.parent}.")
    if path.is_file():
        return load_judge_file(path)
    if not path.is_dir():
        raise RunError(f"{path}: no such run folder or judge file; pass archives/<run_id> or a judge.json.")
    for reader in _READERS:
        if (run := reader(path)) is not None:
            return run
    raise RunError(_no_report(path))


_CONTINUE = {"calibration": ("`evolve calibrate --resume {path}`", "evolve report {path}"),
             "bench": ("`evolve bench run --resume {path}`", "evolve bench report {path}"),
             "otb": ("`evolve otb run --resume {path}`", "evolve otb report {path}"),
             "scoring": ("the same `evolve judge` command with --resume", None)}
"""Per kind of run: the command that continues it, and the one that rebuilds its report."""


def _no_report(path: Path) -> str:
    """Why a folder gives no run: a run that has not written its report yet (with the commands
    that continue it or rebuild its report), or a folder that holds no run at all."""
    kind = folder_kind(path)
    if kind is None:
        return (f"{path}: not a run folder (it holds no config.json, manifest.json or run_config.json of a run). Pass "
                "a run folder (archives/<run_id>), a comparison folder (reports/<name>) or a judge.json.")
    resume, rebuild = _CONTINUE[kind]
    text = (f"{path} holds {KINDS[kind]} with no report yet: it stopped before its end, or its report was not written. "
            f"Continue it with {resume.format(path=path)}")
    if rebuild is not None:
        text += f"; if it finished, rebuild the report with `{rebuild.format(path=path)}`"
    return text + " (finished calls come from the cache)."


def _calibration(path: Path) -> CalibrationRun | None:
    folder = CalibrationFolder(path)
    if not (path / folder.REPORT_JSON).is_file() or not (path / "config.json").is_file():
        return None
    report = read_model(path / folder.REPORT_JSON, CalibrationReport, rebuild=f"evolve report {path}")
    judge = load_judge_file(path) if (path / folder.JUDGE).is_file() else None
    audit = (read_model(path / folder.AUDIT_JSON, AuditResult, rebuild=f"evolve audit {path}")
             if (path / folder.AUDIT_JSON).is_file() else None)
    return CalibrationRun(path=path, report=report, candidates=read_candidates(path), judge=judge, audit=audit)


def _bench(path: Path) -> BenchRun | None:
    if not (path / BenchFolder.REPORT_JSON).is_file():
        return None
    return BenchRun(path=path, report=read_model(path / BenchFolder.REPORT_JSON, BenchReport,
                                                 rebuild=f"evolve bench report {path}"))


def _otb(path: Path) -> OtbRun | None:
    if not (path / OtbFolder.REPORT_JSON).is_file():
        return None
    return OtbRun(path=path, report=read_model(path / OtbFolder.REPORT_JSON, OtbReport, rebuild=f"evolve otb report {path}"))


def _scoring(path: Path) -> ScoringRun | None:
    if not (path / ScoringFolder.SUMMARY).is_file() or not (path / ScoringFolder.ITEMS).is_file():
        return None
    report = read_model(path / ScoringFolder.SUMMARY, ScoringReport, rebuild=ScoringFolder.RESUME.format(path=path))
    return ScoringRun(path=path, report=report, judge=load_judge_file(path / ScoringFolder.JUDGE))


def _comparison(path: Path) -> ComparisonRun | None:
    if not (path / ComparisonFolder.REPORT_JSON).is_file() or not (path / ComparisonFolder.DIFFERENCES).is_file():
        return None
    return ComparisonRun(path=path, report=read_model(path / ComparisonFolder.REPORT_JSON, ComparisonReport,
                                                      rebuild="evolve compare RUN_A RUN_B ... (the runs it compared)"))


_READERS: list[Any] = [_calibration, _bench, _otb, _scoring, _comparison]
"""One reader per run kind; each returns None for a folder that is not of its kind."""

SCHEMAS: dict[str, type[BaseModel]] = {
    "report": CalibrationReport,
    "audit": AuditResult,
    "judge": JudgeFile,
    "bench_report": BenchReport,
    "otb_report": OtbReport,
    "summary": ScoringReport,
    "candidate": CandidateRecord,
    "comparison": ComparisonReport,
}
"""Published JSON Schemas: name -> record class (``evolve/outputs/schemas/<name>.schema.json``)."""


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one run output (a key of :data:`SCHEMAS`: ``report``, ``audit``, ``judge``,
    ``bench_report``, ``otb_report``, ``summary``, ``candidate``, ``comparison``).

    Raises:
        KeyError: An unknown name (the message lists the known ones).
    """
    if name not in SCHEMAS:
        raise KeyError(f"no schema named {name!r}; known: {', '.join(sorted(SCHEMAS))}")
    schema = SCHEMAS[name].model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def write_schemas(folder: Path | str) -> list[Path]:
    """Write every published schema as ``<folder>/<name>.schema.json`` (sorted keys); returns the paths."""
    from evolve.runs import atomic_write

    out = []
    for name in sorted(SCHEMAS):
        path = Path(folder) / f"{name}.schema.json"
        atomic_write(path, json.dumps(json_schema(name), indent=2, sort_keys=True) + "\n")
        out.append(path)
    return out
