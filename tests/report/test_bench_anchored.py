"""Physician-anchored means in the bench report: a bench judged with a judge file (built here,
with a synthetic anchor) shows the raw judge mean and the physician-anchored mean per system,
and an anchored difference between conditions; too small an anchor is refused in words; a
judge.json path judges exactly like its run folder."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evolve.calibrated import AnchorTarget, CriterionJudge, JudgeFile, JudgeGuidance, SeedPolicy, write_judge_file
from evolve.consilium import judge_bench, run_bench
from evolve.judge import JudgeSettings
from evolve.llm import ChatRequest
from evolve.report import build_bench_report, render_bench_markdown, write_bench_report
from evolve.report._bench_anchored import ANCHORED_COLUMNS, ASSUMPTION, DIFFERENCE_COLUMNS
from evolve.rubric import RubricBundle, load_rubric
from evolve.stats import MIN_RATED_CASES
from tests.consilium.bench_support import consilium_endpoint, make_client, make_config, write_cases

RUBRIC = load_rubric("consilium")
GUIDANCE = "calibrated: count only data the case states."


def _endpoint(request: ChatRequest) -> str:
    """The scripted pipeline; the judge scores 1-3 by case (3 with guidance on case 0 mod 3)."""
    if request.tag != "judge":
        return consilium_endpoint(request)
    user = request.messages[-1].content
    found = re.search(r"patient (\d+) ", user)
    i = int(found.group(1)) if found else 0
    guided = "GUIDANCE FOR THIS CRITERION:" in user and "calibrated" in user.split("GUIDANCE FOR THIS CRITERION:", 1)[1]
    return json.dumps({"rationale": "scripted", "score": str(min(3, 1 + i % 2 + int(guided)))})


def _anchor(n_cases: int, per_case: int = 2, seed: int = 3) -> list[AnchorTarget]:
    """A synthetic rated sample: the judge reads 0.5 higher than physicians, with noise."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(n_cases):
        for t in range(per_case):
            judge = float(rng.integers(1, 4))
            out.append(AnchorTarget(case_id=f"calib-{c:02d}", target_id=f"calib-{c:02d}:final:{t}", judge=judge,
                                    physician=float(np.clip(judge - 0.5 + rng.normal(0, 0.3), 0, 3))))
    return out


def _sha(name: str) -> str:
    """sha256 of the consilium rubric's file ``name`` as a run copies it (and a judge file holds it)."""
    return hashlib.sha256(RubricBundle.load("consilium").files()[name]).hexdigest()


def _files(rubric_id: str) -> dict[str, str]:
    """The shipped rubric folder's files as a judge file holds them (relative path -> text)."""
    return {rel: data.decode("utf-8") for rel, data in RubricBundle.load(rubric_id).files().items()}


def _judge_file(folder: Path, *, n_cases: int = 12, judge_model: str = "model-a") -> Path:
    """A calibration run folder holding only a judge file: data_use calibrated, with an anchor."""
    winner = JudgeGuidance(kind="winner", candidate_id="data_use:m3", text=GUIDANCE,
                           sha256=hashlib.sha256(GUIDANCE.encode()).hexdigest(), n_pairs=2 * n_cases, n_cases=n_cases)
    crit = CriterionJudge(criterion_id="data_use", name="Data use", labels=[0, 1, 2, 3], winner=winner,
                          alternatives=[], verdicts=[], training_median=2.0, no_better_than_constant=False,
                          anchor=_anchor(n_cases), drift="none")  # audited: nothing to warn about
    judge = JudgeFile(run_id="calib-test", created_at="2026-01-01T00:00:00Z", source_run=str(folder),
                      rubric_id="consilium", rubric_version=RUBRIC.version, rubric_sha256=_sha("rubric.json"),
                      protocol_sha256=_sha("protocol.md"), rubric_files=_files("consilium"), judge=JudgeSettings(model=judge_model),
                      seed_policy=SeedPolicy(run_seed=0, repeats=1), criteria={"data_use": crit})
    folder.mkdir(parents=True, exist_ok=True)
    return write_judge_file(folder, judge)


@pytest.fixture
def bench_run(tmp_path: Path) -> Path:
    """A finished, unjudged run: 4 cases x 1 model x 2 conditions."""
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=4))
    client, _ = make_client(tmp_path, _endpoint)
    try:
        run_bench(config, client=client)
    finally:
        client.close()
    return config.run_dir


def _judge(tmp_path: Path, run: Path, guidance: Path) -> None:
    client, _ = make_client(tmp_path, _endpoint)
    try:
        judge_bench(run, calibration_run=guidance, client=client)
    finally:
        client.close()


def test_a_bench_judged_with_a_judge_file_reports_raw_and_anchored_means_and_a_difference(tmp_path, bench_run):
    judge_json = _judge_file(tmp_path / "archives" / "calib")
    _judge(tmp_path, bench_run, judge_json.parent)
    meta = json.loads((bench_run / "judge.json").read_text())
    record = meta["judge_file"]
    assert record["path"] == str(judge_json.absolute()) and record["run_id"] == "calib-test"
    assert record["sha256"] == hashlib.sha256(judge_json.read_bytes()).hexdigest()
    assert (bench_run / "calibrated_judge.json").read_bytes() == judge_json.read_bytes()  # the copy is the file

    report = write_bench_report(bench_run, n_boot=200)
    section = report.anchored
    assert section.available and section.reason is None and section.assumption == ASSUMPTION
    assert [c.criterion for c in section.criteria] == ["data_use"] and section.criteria[0].refused is None
    systems = {(r.model, r.condition, r.topology): r for r in section.systems}
    assert set(systems) == {("model-a", "structured", "single"), ("model-a", "free-form", "single")}
    scores = pd.read_csv(bench_run / "judge_scores.csv")
    for (_, condition, _), row in systems.items():
        assert set(row.model_dump()) == set(ANCHORED_COLUMNS)
        mine = scores[(scores["criterion"] == "data_use") & (scores["condition"] == condition)]
        items = mine.groupby(["case_id", "component", "role"], dropna=False)["score"].mean()
        assert row.n_items == len(items) and row.judge_mean == pytest.approx(items.mean())
        assert row.judge_mean_low <= row.judge_mean <= row.judge_mean_high
        assert row.refused is None and row.anchored_mean_low < row.anchored_mean < row.anchored_mean_high
        assert row.anchored_mean < row.judge_mean  # the anchor says physicians score lower than the judge
        assert row.n_rated == 24 and row.n_rated_cases == 12 and row.effective_n > 0
    diffs = section.differences
    assert len(diffs) == 1 and set(diffs[0].model_dump()) == set(DIFFERENCE_COLUMNS)
    d = diffs[0]
    assert (d.between, d.a_condition, d.b_condition) == ("conditions", "structured", "free-form")
    raw = systems[("model-a", "structured", "single")].judge_mean - systems[("model-a", "free-form", "single")].judge_mean
    assert d.judge_difference == pytest.approx(raw) and d.refused is None
    assert d.anchored_difference_low <= d.anchored_difference <= d.anchored_difference_high

    markdown = (bench_run / "bench_report.md").read_text()
    assert "## Physician-anchored means" in markdown and ASSUMPTION in markdown
    assert "calib-test" in markdown and "structured · " in markdown
    assert section.difference_assumption and section.difference_assumption in markdown  # with the differences
    assert d.anchored_difference == pytest.approx(d.judge_difference)  # one anchor for both: the correction cancels
    anchored_csv = pd.read_csv(bench_run / "anchored.csv")
    assert list(anchored_csv.columns) == ANCHORED_COLUMNS and len(anchored_csv) == 2
    assert list(pd.read_csv(bench_run / "anchored_differences.csv").columns) == DIFFERENCE_COLUMNS
    assert "Physician-anchored means" in (bench_run / "report.html").read_text()


def test_a_judge_json_path_judges_exactly_like_its_run_folder(tmp_path, bench_run):
    judge_json = _judge_file(tmp_path / "archives" / "calib")
    _judge(tmp_path, bench_run, judge_json.parent)
    by_folder = pd.read_csv(bench_run / "judge_scores.csv"), json.loads((bench_run / "judge.json").read_text())
    _judge(tmp_path, bench_run, judge_json)
    by_file = pd.read_csv(bench_run / "judge_scores.csv"), json.loads((bench_run / "judge.json").read_text())
    assert by_file[0]["cached"].all()  # the same requests: every call replayed from the cache
    pd.testing.assert_frame_equal(by_file[0].drop(columns="cached"), by_folder[0].drop(columns="cached"))
    assert by_file[1]["judge_file"] == by_folder[1]["judge_file"]
    assert by_file[1]["guidance"]["data_use"]["candidate_id"] == "data_use:m3"
    assert set(by_folder[0].loc[by_folder[0]["criterion"] == "data_use", "guidance_id"]) == {"data_use:m3"}


def test_too_few_rated_cases_are_refused_in_words(tmp_path, bench_run):
    small = MIN_RATED_CASES - 4
    _judge(tmp_path, bench_run, _judge_file(tmp_path / "calib", n_cases=small))
    report = build_bench_report(bench_run, n_boot=100)
    systems, differences = report.anchored.systems, report.anchored.differences
    assert systems and differences
    assert all(r.refused and str(small) in r.refused for r in [*systems, *differences])
    assert all(r.anchored_mean is None and r.judge_mean is not None for r in systems)  # raw means stay
    assert all(d.anchored_difference is None and d.judge_difference is not None for d in differences)
    markdown = render_bench_markdown(report)
    assert f"refused: {systems[0].refused}" in markdown
    assert "given below" not in markdown  # the criterion's line says every figure below is refused
    assert f"refused in every row below: {systems[0].refused}" in markdown


def test_another_judge_model_is_warned_about_and_refused(tmp_path, bench_run):
    calib = _judge_file(tmp_path / "calib", judge_model="another-judge").parent
    client, _ = make_client(tmp_path, _endpoint)
    try:
        result = judge_bench(bench_run, calibration_run=calib, client=client)
    finally:
        client.close()
    assert len(result.warnings) == 1 and "another-judge" in result.warnings[0]
    report = build_bench_report(bench_run, n_boot=100)
    refusal = report.anchored.criteria[0].refused
    assert "another-judge" in refusal and all(r.refused == refusal for r in report.anchored.systems)


def test_a_bench_judged_with_other_prompts_is_refused(tmp_path, bench_run):
    _judge(tmp_path, bench_run, _judge_file(tmp_path / "calib"))
    protocol = bench_run / "judge_prompts" / "consilium" / "protocol.md"
    protocol.write_text(protocol.read_text() + "\nAn edit after judging.\n")
    section = build_bench_report(bench_run, n_boot=50).anchored
    refusal = section.criteria[0].refused
    assert "protocol.md" in refusal and "not the validated ones" in refusal
    assert all(r.refused == refusal and r.anchored_mean is None for r in section.systems)


def test_an_edited_copy_and_a_bench_without_judge_file_say_why_not(tmp_path, bench_run):
    _judge(tmp_path, bench_run, None)
    section = build_bench_report(bench_run, n_boot=50).anchored
    assert not section.available and "without a judge file" in section.reason
    assert "Raw judge means only" in render_bench_markdown(build_bench_report(bench_run, n_boot=50))
    _judge(tmp_path, bench_run, _judge_file(tmp_path / "calib"))
    copy = bench_run / "calibrated_judge.json"
    copy.write_text(copy.read_text().replace("calib-test", "calib-edit"))
    section = build_bench_report(bench_run, n_boot=50).anchored
    assert not section.available and "sha256 differs" in section.reason


def test_bench_judge_cli_takes_a_judge_json_and_the_report_prints_both_means(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from evolve.cli import app
    from evolve.testing import LoopbackChatServer
    from tests.cli.test_cli_bench import respond

    runner = CliRunner()
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    server = LoopbackChatServer(respond)
    try:
        made = runner.invoke(app, ["bench", "run", "--cases", str(write_cases(tmp_path / "cases.jsonl", n=2)), "--run-id", "cli",
                                   "--archives-dir", str(tmp_path / "archives"), "--base-url", server.base_url,
                                   "--model", "scripted", "--no-judge"])
        assert made.exit_code == 0, made.output
        run = tmp_path / "archives" / "cli"
        judge_json = _judge_file(tmp_path / "calib", judge_model="scripted")
        missing = runner.invoke(app, ["bench", "judge", str(run), "--guidance", str(tmp_path / "nowhere")])
        assert missing.exit_code != 0 and "judge.json" in missing.output and "Traceback" not in missing.output
        judged = runner.invoke(app, ["bench", "judge", str(run), "--guidance", str(judge_json)])
        assert judged.exit_code == 0, judged.output
        assert f"judge file: {judge_json.absolute()}" in judged.stdout and "warning" not in judged.output
        reported = runner.invoke(app, ["bench", "report", str(run), "--n-boot", "50"])
        assert reported.exit_code == 0, reported.output
        assert "## Physician-anchored means" in reported.stdout and ASSUMPTION in reported.stdout
        assert "| 3 | data_use | scripted · structured · single |" in reported.stdout
    finally:
        server.close()
    help_text = runner.invoke(app, ["bench", "judge", "--help"]).stdout
    assert "judge.json" in help_text


def test_a_difference_compares_the_components_both_systems_have() -> None:
    """A structured pipeline's role components have no free-form counterpart: differencing the
    pooled items would mix the condition with the component mix (a new-user check found the
    anchored structured − free-form difference of opposite sign to the final reports' one)."""
    from evolve.report._bench_anchored import _same_components

    structured = pd.DataFrame({"component": ["final", "reasoning", "opinion", "final"], "score": [1.0, 3.0, 3.0, 2.0]})
    free_form = pd.DataFrame({"component": ["final", "final"], "score": [3.0, 2.0]})
    a, b, dropped = _same_components(structured, free_form)
    assert list(a["component"]) == ["final", "final"] and list(b["component"]) == ["final", "final"]
    assert dropped == ["opinion", "reasoning"]
    assert a["score"].mean() - b["score"].mean() == -1.0  # the final reports' difference, not +0.33 over the mix


def test_judging_with_guidance_its_judge_file_flags_is_warned_about(tmp_path, bench_run):
    """As ``evolve judge`` does: a criterion no better than a constant on validation is said
    before anything is judged (here a plan, which calls nothing)."""
    from typer.testing import CliRunner

    from evolve.calibrated import load_judge_file
    from evolve.cli import app

    judge_json = _judge_file(tmp_path / "calib")
    flagged = load_judge_file(judge_json)
    crit = flagged.criteria["data_use"].model_copy(update={"no_better_than_constant": True})
    write_judge_file(judge_json.parent, flagged.model_copy(update={"criteria": {"data_use": crit}}))
    result = CliRunner().invoke(app, ["bench", "judge", str(bench_run), "--guidance", str(judge_json), "--plan"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"warning: --guidance {judge_json}: criterion data_use: on validation this judge was no better than a constant" in said
