"""The calibration run's outputs as typed records: report.json, its published JSON Schema, read_run."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from evolve.calibrated import JudgeFile
from evolve.errors import RunError
from evolve.outputs import (
    SCHEMAS,
    AuditResult,
    CalibrationReport,
    CalibrationRun,
    ScoringReport,
    ScoringRun,
    json_schema,
    read_run,
)
from evolve.report import build_report, render_markdown
from tests.report.conftest import calibrate_tiny, tiny_frame  # noqa: F401  (the fixture is used by name)

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "evolve" / "outputs" / "schemas"


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_frame) -> Path:  # noqa: F811
    pack, splits = tiny_frame
    return calibrate_tiny(tmp_path_factory.mktemp("outputs"), "typed", "judge-guided", pack, splits)


def test_the_written_report_is_the_typed_report_and_round_trips(run: Path) -> None:
    text = (run / "report.json").read_text(encoding="utf-8")
    report = CalibrationReport.model_validate_json(text)
    assert report.version == 3 and report.run_id == "typed"
    assert CalibrationReport.model_validate_json(report.model_dump_json()) == report
    entry = report.criteria["entailment"]
    assert {r.kind for r in entry.rows} == {"no-guidance", "initial", "training-median", "winner"}
    assert entry.row("winner") is not None and entry.row("winner").candidate_id == entry.winner.candidate_id
    assert report.table5[0].evolved == entry.winner.candidate_id
    assert entry.agreement["winner"].validation["mae"].n_boot == report.bootstrap.n_boot


def test_the_report_rebuilt_in_memory_renders_the_markdown_written(run: Path) -> None:
    report = build_report(run, n_boot=CalibrationReport.model_validate_json(
        (run / "report.json").read_text(encoding="utf-8")).bootstrap.n_boot)
    assert render_markdown(report) == (run / "report.md").read_text(encoding="utf-8")
    legend = " ".join((run / "report.md").read_text(encoding="utf-8").split())
    assert "Judge calls = the distinct judge requests the criterion needed (whether answered by the endpoint" in legend


def test_report_json_validates_against_the_published_schema(run: Path) -> None:
    schema = json.loads((SCHEMA_DIR / "report.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(json.loads((run / "report.json").read_text(encoding="utf-8")), schema)
    broken = json.loads((run / "report.json").read_text(encoding="utf-8"))
    broken["criteria"]["entailment"]["winner"].pop("text")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_published_schemas_are_those_of_the_records(name: str) -> None:
    published = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert published == json_schema(name), (
        f"evolve/outputs/schemas/{name}.schema.json is stale: run "
        "`python -c \"from evolve.outputs import write_schemas; write_schemas('evolve/outputs/schemas')\"`")


def test_read_run_returns_the_typed_calibration_run(run: Path) -> None:
    got = read_run(run)
    assert isinstance(got, CalibrationRun) and got.kind == "calibration" and got.path == run
    assert isinstance(got.report, CalibrationReport) and isinstance(got.judge, JudgeFile)
    assert got.judge.criteria["entailment"].winner.candidate_id == got.report.criteria["entailment"].winner.candidate_id
    assert got.audit is None or isinstance(got.audit, AuditResult)
    winners = [c for c in got.candidates if c.selected]
    assert [c.candidate_id for c in winners] == [got.report.criteria["entailment"].winner.candidate_id]
    judge = read_run(run / "judge.json")
    assert isinstance(judge, JudgeFile) and judge.run_id == "typed"


def test_an_unknown_field_or_another_version_is_refused_with_the_command_that_rebuilds(run: Path, tmp_path: Path) -> None:
    data = json.loads((run / "report.json").read_text(encoding="utf-8"))
    with pytest.raises(ValidationError):
        CalibrationReport.model_validate({**data, "surprise": 1})
    copy = tmp_path / "old-run"
    copy.mkdir()
    (copy / "config.json").write_text((run / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    (copy / "report.json").write_text(json.dumps({**data, "version": 2}), encoding="utf-8")
    with pytest.raises(RunError, match=r"report\.json: not a CalibrationReport .*field 'version'.*evolve report "):
        read_run(copy)


def test_read_run_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="no such run folder or judge file"):
        read_run(tmp_path / "nowhere")
    with pytest.raises(RunError, match=r"not a run folder \(it holds no config.json"):
        read_run(tmp_path)  # a pack folder, say
    started = tmp_path / "started"
    started.mkdir()
    (started / "config.json").write_text('{"run_id": "started", "pack": "p"}', encoding="utf-8")
    with pytest.raises(RunError) as err:
        read_run(started)
    said = str(err.value)
    assert "holds a calibration run (evolve calibrate) with no report yet" in said
    assert f"Continue it with `evolve calibrate --resume {started}`; if it finished, rebuild the report with " \
           f"`evolve report {started}`" in said


def test_read_run_given_a_runs_report_file_names_its_folder(run: Path) -> None:
    """A report file is not a judge file: say to pass the folder (not "rebuild the judge file")."""
    for name in ("report.json", "config.json"):
        with pytest.raises(RunError, match=f"not one of its files; pass {re.escape(str(run))}"):
            read_run(run / name)
    assert read_run(run / "judge.json").run_id == read_run(run).judge.run_id  # a judge file is read as one


def test_read_run_returns_a_typed_scoring_run(run: Path, tiny_frame, tmp_path: Path) -> None:  # noqa: F811
    import evolve
    from evolve.llm import Client, ResponseCache
    from evolve.testing import FakeProvider
    from tests.conftest import fake_endpoint

    pack, _ = tiny_frame
    client = Client(FakeProvider(fake_endpoint), cache=ResponseCache(tmp_path / "cache.sqlite"), backoff_initial=0.01)
    try:
        with warnings.catch_warnings():  # the fake judge's winner may draw the audit's 'review' warning: not tested here
            warnings.simplefilter("ignore", UserWarning)
            summary = evolve.load_judge(run).score(pack, client=client, run_dir=tmp_path / "scored")
    finally:
        client.close()
    got = read_run(summary.run_dir)
    assert isinstance(got, ScoringRun) and got.kind == "scoring" and isinstance(got.report, ScoringReport)
    assert got.report == summary.report and got.judge.run_id == "typed"
    c = got.report.criteria["entailment"]
    assert c.counts.n_items == c.counts.n_scored + c.counts.n_failed + c.counts.n_not_evaluable + c.counts.n_excluded
    assert c.rated is not None and c.rated.winner.n_pairs > 0  # the tiny pack is rated
    assert c.anchored.refused is not None and c.anchored.refused.startswith(
        "the judge file's anchor (its validation targets) has only 3 rated cases; at least 10")  # the tiny split's
    assert "(its validation targets) has only 3 rated cases" in " ".join(summary.describe().split())
    schema = json.loads((SCHEMA_DIR / "summary.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(json.loads((summary.run_dir / "summary.json").read_text(encoding="utf-8")), schema)


def test_a_damaged_judge_file_in_a_run_folder_names_the_command_for_that_run(run: Path, tmp_path: Path) -> None:
    import shutil

    copy = Path(shutil.copytree(run, tmp_path / "damaged"))
    data = json.loads((copy / "judge.json").read_text(encoding="utf-8"))
    (copy / "judge.json").write_text(json.dumps({**data, "version": "two"}), encoding="utf-8")
    with pytest.raises(RunError, match=rf"judge\.json: not a judge file this evolve reads \(field 'version'.*"
                                       rf"`evolve report {copy}` writes it again"):
        read_run(copy / "judge.json")
