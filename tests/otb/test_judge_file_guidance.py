"""`otb judge --guidance` with a judge file: a run folder and its judge.json judge alike, the run
keeps the file's copy and record (path, sha256), and the report says in words why it gives no
physician-anchored mean for the file's anchors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evolve.calibrated import AnchorTarget, CriterionJudge, JudgeFile, JudgeGuidance, SeedPolicy, write_judge_file
from evolve.judge import JudgeSettings
from evolve.llm import Client, ResponseCache
from evolve.otb import generate_otb, judge_otb
from evolve.report import write_otb_report
from evolve.report._otb import NOT_ANCHORED
from evolve.rubric import RubricBundle, load_rubric
from evolve.runs import OtbFolder
from evolve.testing import FakeProvider
from tests.otb.test_run_judge import Endpoint, _config, files  # noqa: F401 - the fixture


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


GUIDANCE = "Weigh the sequence of treatments first."


def _judge_file(folder: Path, judge_model: str) -> Path:
    winner = JudgeGuidance(kind="winner", candidate_id="clinical_equivalence:m2", text=GUIDANCE,
                           sha256=hashlib.sha256(GUIDANCE.encode()).hexdigest())
    anchor = [AnchorTarget(case_id=f"c{i}", target_id=f"c{i}:t", judge=4.0, physician=3.0 + i % 2) for i in range(12)]
    crit = CriterionJudge(criterion_id="clinical_equivalence", name="Clinical equivalence", labels=[1, 2, 3, 4, 5],
                          winner=winner, alternatives=[], verdicts=[], training_median=4.0,
                          no_better_than_constant=False, anchor=anchor)
    files_ = {rel: data.decode("utf-8") for rel, data in RubricBundle.load("otb").files().items()}
    judge = JudgeFile(run_id="otb-calib", created_at="2026-01-01T00:00:00Z", source_run=str(folder), rubric_id="otb",
                      rubric_version=load_rubric("otb").version, rubric_sha256=_sha(files_["rubric.json"]),
                      protocol_sha256=_sha(files_["protocol.md"]), rubric_files=files_,
                      judge=JudgeSettings(model=judge_model), seed_policy=SeedPolicy(run_seed=0, repeats=1), criteria={"clinical_equivalence": crit})
    folder.mkdir(parents=True)
    return write_judge_file(folder, judge)


def test_a_judge_file_guides_the_otb_judge_and_the_report_says_why_no_anchored_mean(tmp_path, files):  # noqa: F811
    config = _config(tmp_path, files)
    judge_json = _judge_file(tmp_path / "calib", config.judge.model)
    provider = FakeProvider(Endpoint())
    folder = OtbFolder(config.run_dir)
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        by_folder = judge_otb(config.run_dir, client=client, calibration_run=judge_json.parent)
        scores_by_folder = (folder / folder.JUDGE_SCORES).read_text()
        by_file = judge_otb(config.run_dir, client=client, calibration_run=judge_json)
    assert by_file.guidance == by_folder.guidance and GUIDANCE in by_file.guidance["clinical_equivalence"]
    # the same requests, replayed - but the reply outside its schema (a judge failure) is asked again, never cached
    assert by_file.warnings == [] and by_file.failures == 1 and by_file.cached == by_file.calls - 1
    strip = [{k: v for k, v in json.loads(line).items() if k != "cached"} for line in scores_by_folder.splitlines()]
    assert strip == [{k: v for k, v in json.loads(line).items() if k != "cached"}
                     for line in (folder / folder.JUDGE_SCORES).read_text().splitlines()]
    record = json.loads((folder / folder.JUDGE_FILE_RECORD).read_text())
    assert record["path"] == str(judge_json.absolute()) and record["run_id"] == "otb-calib"
    assert record["sha256"] == hashlib.sha256(judge_json.read_bytes()).hexdigest() == by_file.judge_file.sha256
    assert (folder / folder.CALIBRATED_JUDGE).read_bytes() == judge_json.read_bytes()

    report = write_otb_report(config.run_dir, n_boot=50)
    anchored = report.anchored
    assert anchored.available is False and anchored.reason == NOT_ANCHORED
    assert [c.model_dump() for c in anchored.criteria] == [{"criterion": "clinical_equivalence", "n_rated": 12, "n_rated_cases": 12}]
    markdown = (folder / folder.REPORT_MD).read_text()
    assert "## Physician-anchored means" in markdown and NOT_ANCHORED in markdown and "otb-calib" in markdown


def test_another_judge_model_is_warned_about_and_judging_without_guidance_drops_the_copy(tmp_path, files):  # noqa: F811
    config = _config(tmp_path, files)
    judge_json = _judge_file(tmp_path / "calib", "another-judge")
    folder = OtbFolder(config.run_dir)
    with Client(FakeProvider(Endpoint()), cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        guided = judge_otb(config.run_dir, client=client, calibration_run=judge_json)
        assert any("another-judge" in w for w in guided.warnings)
        plain = judge_otb(config.run_dir, client=client)
    assert plain.judge_file is None and not (folder / folder.CALIBRATED_JUDGE).exists()
    assert not (folder / folder.JUDGE_FILE_RECORD).exists()
    assert write_otb_report(config.run_dir, n_boot=20).anchored is None
