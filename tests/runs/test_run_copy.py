"""Self-contained run folders: a calibration keeps a copy of its rubric (with the sha256 of every
file and where it came from) and relative paths, so report, audit, compare and resume work after
the rubric folder is gone and from any current folder."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.calibration import load_run_config
from evolve.cli import app
from evolve.config import resolve_config
from evolve.data import RatingPack, RubricRef, load_pack, write_pack
from evolve.errors import RubricError
from evolve.rubric import (
    SNAPSHOT_SOURCES,
    RubricBundle,
    default_prompts_root,
    read_prompts_snapshot,
    run_prompts_root,
    snapshot_changes,
    write_prompts_snapshot,
)
from evolve.runs import CalibrationFolder
from evolve.splits import make_splits, write_splits
from evolve.workflows import run_calibration
from tests.cli.test_cli_calibrate import _Endpoint
from tests.conftest import make_tiny_pack

runner = CliRunner()
RUBRIC = "my-kqa"


def _own_rubric(prompts: Path) -> Path:
    """The shipped K-QA rubric copied under ``prompts`` as a rubric of one's own, ``my-kqa``."""
    folder = prompts / RUBRIC
    shutil.copytree(default_prompts_root() / "kqa-entailment", folder)
    rubric = json.loads((folder / "rubric.json").read_text(encoding="utf-8"))
    (folder / "rubric.json").write_text(json.dumps({**rubric, "id": RUBRIC}, indent=2), encoding="utf-8")
    return folder


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder: its own rubric under ``my_prompts/``, a pack rated on it, its split."""
    root = tmp_path / "project"
    _own_rubric(root / "my_prompts")
    tiny = make_tiny_pack()
    version = tiny.manifest.rubric.version
    pack = RatingPack(path=None, manifest=tiny.manifest.model_copy(update={"rubric": RubricRef(id=RUBRIC, version=version)}),
                      cases=tiny.cases, targets=tiny.targets, ratings=tiny.ratings)
    write_pack(pack, root / "ratings" / "tiny")
    splits = make_splits(load_pack(root / "ratings" / "tiny", prompts_root=root / "my_prompts"),
                         holdout_fraction=0.2, validation_fraction=0.4, seed=3)
    write_splits(splits, root / "splits" / "tiny")
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def endpoint():
    ep = _Endpoint()
    yield ep
    ep.close()


def _run(run_id: str, endpoint: _Endpoint) -> Path:
    """A finished calibration started in the project folder with relative paths; its folder."""
    config = resolve_config(preset="quick", environ={}, overrides={
        "run_id": run_id, "pack": Path("ratings/tiny"), "splits": Path("splits/tiny"), "prompts_root": Path("my_prompts"),
        "archives_dir": Path("archives"),
        "endpoint": {"provider": "openai_compatible", "base_url": endpoint.base_url, "model": "scripted"},
        "budget": {"accepted": 1, "max_attempts": 2, "batch_size": 1, "train_repeats": 1, "reeval_repeats": 2},
    })
    run_calibration(config)
    return (Path("archives") / run_id).absolute()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_keeps_its_rubric_and_its_paths_relative_to_itself(project, endpoint):
    run = _run("a", endpoint)
    copy = CalibrationFolder(run).prompts_root
    record = read_prompts_snapshot(copy)
    assert record is not None and list(record.rubrics) == [RUBRIC]
    entry = record.rubrics[RUBRIC]
    source = project / "my_prompts" / RUBRIC
    assert entry.source == str(source) and entry.version == json.loads((source / "rubric.json").read_text())["version"]
    copied = sorted(p.relative_to(copy / RUBRIC).as_posix() for p in (copy / RUBRIC).rglob("*") if p.is_file())
    assert copied == sorted(entry.files) and {"rubric.json", "protocol.md"} <= set(copied)
    assert any(name.startswith("guidance/entailment/") for name in copied)
    assert entry.files == RubricBundle.load(RUBRIC, root=project / "my_prompts").sha256()  # what the original holds
    for name, sha in entry.files.items():  # the record matches the copy
        assert sha == _sha(copy / RUBRIC / name), name
    assert RubricBundle.load(RUBRIC, root=copy) == RubricBundle.load(RUBRIC, root=project / "my_prompts")
    stored = json.loads((run / CalibrationFolder.CONFIG).read_text())
    assert stored["pack"] == "../../ratings/tiny" and stored["splits"] == "../../splits/tiny"
    assert stored["prompts_root"] == "../../my_prompts" and stored["archives_dir"] == ".."
    assert Path(stored["cache_path"]).is_absolute()  # an absolute path stays absolute
    assert snapshot_changes(copy) == []


def test_a_run_reports_audits_compares_and_resumes_after_its_rubric_is_deleted(project, endpoint, monkeypatch):
    a, b = _run("a", endpoint), _run("b", endpoint)
    shutil.rmtree(project / "my_prompts")
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_run_config(a)
    assert config.pack == project / "ratings" / "tiny" and config.archives_dir == project / "archives"

    report = runner.invoke(app, ["report", str(a), "--no-html"])
    assert report.exit_code == 0, report.output
    data = json.loads((a / CalibrationFolder.REPORT_JSON).read_text())
    assert data["rubric"] == {"id": RUBRIC, "version": data["rubric"]["version"], "run_copy": True, "notes": []}
    assert "note:" not in report.output  # the original is gone, not changed: nothing to say

    audit = runner.invoke(app, ["audit", str(a), "--no-llm", "--no-embeddings"])
    assert audit.exit_code == 0, audit.output
    assert json.loads((a / CalibrationFolder.AUDIT_JSON).read_text())["rubric_id"] == RUBRIC

    compared = runner.invoke(app, ["compare", str(a), str(b), "--reports-dir", str(elsewhere / "reports"), "--no-html"])
    assert compared.exit_code == 0, compared.output
    assert (elsewhere / "reports" / "a-vs-b" / "report.json").is_file()

    calls = endpoint.calls
    resumed = runner.invoke(app, ["calibrate", "--resume", str(a)])
    assert resumed.exit_code == 0, resumed.output
    assert endpoint.calls == calls  # every call of the resumed run came from the cache
    events = [json.loads(line)["event"] for line in (a / "journal.jsonl").read_text().splitlines()]
    assert events.count("run_resumed") == 1

    monkeypatch.chdir(project.parent)  # a relative run path, from yet another folder
    assert runner.invoke(app, ["report", "project/archives/a", "--no-html"]).exit_code == 0


def test_a_changed_rubric_is_named_and_the_runs_copy_used(project, endpoint, monkeypatch):
    run = _run("a", endpoint)
    rubric_file = project / "my_prompts" / RUBRIC / "rubric.json"
    # another version: loading the original for the run's pack would now fail
    rubric_file.write_text(json.dumps({**json.loads(rubric_file.read_text()), "version": "99"}), encoding="utf-8")
    (project / "my_prompts" / RUBRIC / "protocol.md").write_text("A rewritten protocol.\n", encoding="utf-8")
    monkeypatch.chdir(project.parent)

    report = runner.invoke(app, ["report", str(run), "--no-html"])
    assert report.exit_code == 0, report.output
    assert f"note: the rubric '{RUBRIC}' at {project / 'my_prompts' / RUBRIC} has changed since this run" in report.output
    assert "protocol.md, rubric.json" in report.output and "the run's copy" in report.output
    audit = runner.invoke(app, ["audit", str(run), "--no-llm", "--no-embeddings"])
    assert audit.exit_code == 0, audit.output
    assert "Note: the rubric 'my-kqa'" in (run / CalibrationFolder.AUDIT_MD).read_text()
    resumed = runner.invoke(app, ["calibrate", "--resume", str(run)])
    assert resumed.exit_code == 0, resumed.output
    assert "has changed since this run" in resumed.output
    # the copy itself is never rewritten
    assert read_prompts_snapshot(CalibrationFolder(run).prompts_root).rubrics[RUBRIC].files["rubric.json"] != _sha(rubric_file)


def test_a_run_made_before_runs_kept_a_copy_reads_the_original_from_the_current_folder(project, endpoint):
    run = _run("a", endpoint)
    shutil.rmtree(CalibrationFolder(run).prompts_root)
    stored = json.loads((run / CalibrationFolder.CONFIG).read_text())
    stored.update(pack="ratings/tiny", splits="splits/tiny", prompts_root="my_prompts", archives_dir="archives")
    (run / CalibrationFolder.CONFIG).write_text(json.dumps(stored))  # paths as typed, as earlier versions wrote them
    assert load_run_config(run).pack == project / "ratings" / "tiny"
    assert run_prompts_root(CalibrationFolder(run).prompts_root, Path("my_prompts")) == Path("my_prompts")
    report = runner.invoke(app, ["report", str(run), "--no-html"])
    assert report.exit_code == 0, report.output
    assert json.loads((run / CalibrationFolder.REPORT_JSON).read_text())["rubric"]["run_copy"] is False


def test_the_copy_is_whole_or_absent_and_replaces_a_leftover(tmp_path):
    prompts = tmp_path / "prompts"
    _own_rubric(prompts)
    dest = tmp_path / "run" / "judge_prompts"
    with pytest.raises(RubricError, match="no-such-rubric"):
        write_prompts_snapshot(dest, [RUBRIC, "no-such-rubric"], root=prompts)
    assert not (tmp_path / "run").exists()  # checked before anything is written
    (dest / "stale").mkdir(parents=True)  # a start interrupted before the run began
    record = write_prompts_snapshot(dest, [RUBRIC], root=prompts)
    assert not (dest / "stale").exists() and (dest / SNAPSHOT_SOURCES).is_file()
    assert read_prompts_snapshot(dest) == record
    assert sorted(p.name for p in dest.parent.iterdir()) == ["judge_prompts"]  # no temporary folder left
    (prompts / RUBRIC / "guidance" / "entailment" / "extra.md").write_text("Another candidate.\n", encoding="utf-8")
    (notes,) = snapshot_changes(dest)
    assert "guidance/entailment/extra.md" in notes


def test_an_unreadable_record_is_named(tmp_path):
    dest = tmp_path / "judge_prompts"
    dest.mkdir()
    (dest / SNAPSHOT_SOURCES).write_text("{", encoding="utf-8")
    with pytest.raises(RubricError, match="sources.json"):
        read_prompts_snapshot(dest)


# -- bench and OpenTumorBoard runs keep their copy too ------------------------------------------


def _mine(prompts: Path, rubric_id: str) -> None:
    """The shipped rubric ``rubric_id`` copied under ``prompts`` with its own version ("mine"),
    so a loader that fell back on the shipped one would be seen."""
    folder = prompts / rubric_id
    shutil.copytree(default_prompts_root() / rubric_id, folder)
    data = json.loads((folder / "rubric.json").read_text(encoding="utf-8"))
    (folder / "rubric.json").write_text(json.dumps({**data, "version": "mine"}, indent=2), encoding="utf-8")


def test_a_bench_run_keeps_its_rubric_and_resumes_on_it_from_anywhere(tmp_path, monkeypatch):
    from evolve.consilium import load_bench_config, run_bench
    from tests.consilium.bench_support import make_client, make_config, standin_backend, write_cases

    project = tmp_path / "project"
    _mine(project / "my_prompts", "consilium")
    write_cases(project / "cases.jsonl", n=2)
    monkeypatch.chdir(project)
    config = make_config(tmp_path, Path("cases.jsonl"), archives_dir=Path("archives"), prompts_root=Path("my_prompts"))
    backend, _ = standin_backend()
    client, provider = make_client(tmp_path)
    try:
        run_bench(config, client=client, backend=backend)
        run = (project / "archives" / "b").absolute()
        record = read_prompts_snapshot(run / "judge_prompts")
        assert record is not None and record.rubrics["consilium"].source == str(project / "my_prompts" / "consilium")
        assert record.rubrics["consilium"].version == "mine"
        stored = json.loads((run / "manifest.json").read_text())["config"]
        assert stored["cases"] == "../../cases.jsonl" and stored["prompts_root"] == "../../my_prompts"

        shutil.rmtree(project / "my_prompts")
        monkeypatch.chdir(tmp_path)
        resumed_config = load_bench_config(run)
        assert resumed_config.prompts_root == run / "judge_prompts" and resumed_config.cases == project / "cases.jsonl"
        calls = provider.calls
        again = run_bench(resumed_config, client=client, backend=backend, resume=True)
    finally:
        client.close()
    assert provider.calls == calls and again.n_ok == 4
    assert load_pack(run / "pack" / "model-a", check_rubric=False).manifest.rubric.version == "mine"  # from the copy


def test_an_otb_run_keeps_its_rubric_and_judges_and_resumes_from_anywhere(tmp_path, monkeypatch):
    from evolve.llm import Client, ResponseCache
    from evolve.otb import generate_otb, judge_otb, load_otb_config, resolve_otb_config
    from evolve.rubric import load_rubric
    from evolve.testing import FakeProvider
    from tests.otb.test_records_extract import BOARD, TURN, _write
    from tests.otb.test_run_judge import Endpoint

    project = tmp_path / "project"
    _mine(project / "my_prompts", "otb")
    _write(project / "task1_test.jsonl", [BOARD])
    _write(project / "task2_test.jsonl", [TURN])
    monkeypatch.chdir(project)
    config = resolve_otb_config(preset="quick", environ={}, overrides={
        "run_id": "otb", "archives_dir": Path("archives"), "board": Path("task1_test.jsonl"),
        "turn": Path("task2_test.jsonl"), "models": ("model-a",), "endpoint": {"provider": "fake"},
        "cache_path": tmp_path / "cache.sqlite", "prompts_root": Path("my_prompts")})
    provider = FakeProvider(Endpoint())
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        run = (project / "archives" / "otb").absolute()
        record = read_prompts_snapshot(run / "judge_prompts")
        assert record is not None and list(record.rubrics) == ["otb"] and record.rubrics["otb"].version == "mine"
        stored = json.loads((run / "run_config.json").read_text())
        assert stored["board"] == "../../task1_test.jsonl" and stored["archives_dir"] == ".."

        shutil.rmtree(project / "my_prompts")
        monkeypatch.chdir(tmp_path)
        loaded = load_otb_config(run)
        assert loaded.prompts_root == run / "judge_prompts" and loaded.board == project / "task1_test.jsonl"
        assert load_rubric("otb", root=loaded.prompts_root).version == "mine"
        calls = provider.calls
        again = generate_otb(loaded, client=client, resume=True)
        assert provider.calls == calls and again[("turn", "model-a")].reused == 1
        assert judge_otb(run, client=client).calls > 0
