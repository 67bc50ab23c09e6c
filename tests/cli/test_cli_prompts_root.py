"""A rubric of one's own from the command line: --prompts-root, EVOLVE_PROMPTS_ROOT and the config
key prompts_root, known before the pack is read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.rubric import PROMPTS_ROOT_ENV, shipped_prompts_root
from evolve.testing import LoopbackChatServer
from tests.conftest import REPO

runner = CliRunner()
RUBRIC = "my-entailment"


def scripted_reply(body: dict):
    """A loopback endpoint's answer to any call of a calibration: a judge score of 2 (on every
    scale here), a short revised guidance, an on-topic drift verdict; no embeddings (404)."""
    if "input" in body:
        return 404, {"error": {"message": "this endpoint serves no embeddings"}}
    name = body["response_format"]["json_schema"]["name"]
    if name == "guidance_revision":
        return json.dumps({"analysis": "scripted", "guidance": f"Scripted rule {body.get('seed')}: weigh only what the answer says."})
    if name == "drift_verdict":
        return json.dumps({"rationale": "scripted", "about_criterion": True, "contradicts_protocol": False, "drift": "none"})
    return json.dumps({"rationale": "scripted", "score": "2"})


@pytest.fixture
def own(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """(prompts root holding rubric my-entailment, the example pack rated on it)."""
    monkeypatch.delenv(PROMPTS_ROOT_ENV, raising=False)
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "my-prompts"
    shutil.copytree(shipped_prompts_root() / "kqa-entailment", root / RUBRIC)
    rubric = json.loads((root / RUBRIC / "rubric.json").read_text(encoding="utf-8"))
    (root / RUBRIC / "rubric.json").write_text(json.dumps({**rubric, "id": RUBRIC}), encoding="utf-8")
    pack = tmp_path / "pack"
    shutil.copytree(REPO / "ratings" / "example", pack)
    manifest = json.loads((pack / "pack.json").read_text(encoding="utf-8"))
    manifest["rubric"]["id"] = RUBRIC
    (pack / "pack.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root, pack


def test_ratings_check_and_splits_find_the_rubric_by_option_or_environment(own, tmp_path, monkeypatch):
    root, pack = own
    missing = runner.invoke(app, ["ratings", "check", str(pack)])
    assert missing.exit_code != 0
    assert f"no rubric '{RUBRIC}'" in missing.output and "--prompts-root DIR" in missing.output
    checked = runner.invoke(app, ["ratings", "check", str(pack), "--prompts-root", str(root)])
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["rubric"] == {"id": RUBRIC, "version": "1"}
    splits = tmp_path / "splits"
    made = runner.invoke(app, ["splits", "make", str(pack), "--out", str(splits), "--prompts-root", str(root)])
    assert made.exit_code == 0, made.output
    assert runner.invoke(app, ["splits", "check", str(splits), "--pack", str(pack)]).exit_code != 0
    assert runner.invoke(app, ["splits", "check", str(splits), "--pack", str(pack), "--prompts-root", str(root)]).exit_code == 0
    monkeypatch.setenv(PROMPTS_ROOT_ENV, str(root))
    assert runner.invoke(app, ["ratings", "check", str(pack)]).exit_code == 0


def test_calibrate_reads_prompts_root_from_the_config_before_the_pack(own, tmp_path):
    root, pack = own
    splits = tmp_path / "splits"
    assert runner.invoke(app, ["splits", "make", str(pack), "--out", str(splits), "--prompts-root", str(root)]).exit_code == 0
    endpoint = LoopbackChatServer(scripted_reply)
    try:
        args = ["calibrate", "--pack", str(pack), "--splits", str(splits), "--archives-dir", str(tmp_path / "archives"),
                "--base-url", endpoint.base_url, "--accepted", "1", "--max-attempts", "2", "--batch-size", "1",
                "--min-coverage", "0", "--no-audit"]
        without = runner.invoke(app, [*args, "--run-id", "without"])
        assert without.exit_code != 0 and f"no rubric '{RUBRIC}'" in without.output
        assert not endpoint.bodies  # failed before any model call
        config_file = tmp_path / "config.json"
        config_file.write_text(json.dumps({"prompts_root": str(root)}), encoding="utf-8")
        done = runner.invoke(app, [*args, "--run-id", "own", "--config", str(config_file)])
    finally:
        endpoint.close()
    assert done.exit_code == 0, done.output
    run = tmp_path / "archives" / "own"
    assert (run / "report.md").is_file() and endpoint.bodies
    assert (run / "judge_prompts" / RUBRIC / "rubric.json").is_file()  # the run keeps its rubric

    # a run without its own rubric copy (as runs made before copies were kept): --prompts-root finds it
    shutil.rmtree(run / "judge_prompts")
    moved = shutil.move(str(root), tmp_path / "moved-prompts")
    lost = runner.invoke(app, ["report", str(run), "--no-html", "--n-boot", "20"])
    assert lost.exit_code != 0 and "--prompts-root" in lost.output
    found = runner.invoke(app, ["report", str(run), "--no-html", "--n-boot", "20", "--prompts-root", str(moved)])
    assert found.exit_code == 0, found.output


def test_calibrate_option_beats_the_environment(own, tmp_path, monkeypatch):
    root, pack = own
    monkeypatch.setenv(PROMPTS_ROOT_ENV, str(tmp_path / "no-such-folder"))
    result = runner.invoke(app, ["calibrate", "--pack", str(pack), "--prompts-root", str(root), "--splits", str(tmp_path / "none"),
                                 "--archives-dir", str(tmp_path / "archives"), "--base-url", "http://127.0.0.1:9/v1"])
    # the pack was read with the given root (no rubric error); the run then stops at the missing split
    assert result.exit_code != 0
    assert "not a folder" not in result.output and f"no rubric '{RUBRIC}'" not in result.output
    assert "none" in result.output


@pytest.mark.parametrize("command", [
    "ratings check", "ratings import", "ratings import-workbooks", "ratings workbook-template", "splits make", "splits check",
    "calibrate", "report", "audit", "compare", "bench run", "bench judge", "otb run", "otb judge", "otb import-ratings",
    "rubric check",
])
def test_every_command_that_loads_a_rubric_takes_prompts_root(command):
    result = runner.invoke(app, [*command.split(), "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--prompts-root" in result.output
