"""Judging a benchmark run: only applicable pairs, the judge_scores.csv contract, calibrated
guidance from a calibration run, repeats, cache replay, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evolve.calibration import CANDIDATE_COLUMNS
from evolve.consilium import (
    JUDGE_SCORE_COLUMNS,
    judge_bench,
    load_calibrated_guidance,
    run_bench,
)
from evolve.errors import ConfigError, EndpointError, RunError
from evolve.llm import ChatRequest
from evolve.report import write_bench_report
from evolve.rubric import load_rubric
from tests.consilium.bench_support import (
    consilium_endpoint,
    make_client,
    make_config,
    write_cases,
)

RUBRIC = load_rubric("consilium")
PER_RUN = {"reasoning": 7, "opinion": 5, "final": 8}  # applicable criteria per component (consilium paper, rubric)


@pytest.fixture
def bench_run(tmp_path: Path) -> Path:
    """A finished run: 2 cases x 1 model x 2 conditions."""
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=2))
    client, _ = make_client(tmp_path)
    try:
        run_bench(config, client=client)
    finally:
        client.close()
    return config.run_dir


def _criterion_of(request: ChatRequest) -> str:
    name = next(line for line in request.messages[-1].content.splitlines() if line.startswith("CRITERION: "))
    return next(c.criterion_id for c in RUBRIC.criteria if c.name == name.removeprefix("CRITERION: "))


def test_only_applicable_pairs_are_judged_with_the_contract_columns(tmp_path, bench_run):
    client, provider = make_client(tmp_path)
    try:
        result = judge_bench(bench_run, client=client)
    finally:
        client.close()
    frame = pd.read_csv(bench_run / "judge_scores.csv", keep_default_na=False)
    assert list(frame.columns) == JUDGE_SCORE_COLUMNS  # the contract the bench report reads
    # structured runs: every component; free-form runs: the final only (consilium paper, pre-consilium opinions); plus
    # criteria 9-10 once per (case, model)
    expected = 2 * sum(PER_RUN.values()) + 2 * PER_RUN["final"] + 2 * 2
    assert len(frame) == result.rows == expected == len(provider.requests)  # inapplicable pairs never called
    assert all(RUBRIC.applies(c, k) for c, k in zip(frame["criterion"], frame["component"]))
    assert "overall_quality" not in set(frame["criterion"])
    counts = frame.groupby(["case_id", "condition", "component"]).size()
    for (_case_id, _condition, component), n in counts.items():
        assert n == (2 if component == "case" else PER_RUN[component])
    assert set(frame.loc[frame["condition"] == "free-form", "component"]) == {"final"}
    # the role-level targets are the primary role's; the panel is judged once per case and model
    roles = frame[frame["component"].isin(["reasoning", "opinion"])]
    assert set(roles["role"]) == {"Cardiology"}
    case_rows = frame[frame["component"] == "case"]
    assert sorted(case_rows["number"]) == [9, 9, 10, 10]
    assert set(case_rows["condition"]) == {""} and set(case_rows["topology"]) == {""}
    assert set(frame.loc[frame["component"] != "case", "topology"]) == {"single"}
    assert set(frame["outcome"]) == {"score"} and set(frame["score"]) == {2}
    assert set(frame["guidance_id"]) == {"none"} and set(frame["seed"]) == {42} and set(frame["repeat"]) == {0}
    assert set(frame["rubric_version"].astype(str)) == {RUBRIC.version}
    assert frame["prompt_hash"].str.len().eq(16).all() and set(frame["model"]) == {"model-a"}
    # the reference answer reaches the judge only for the conclusion criterion (consilium paper, judge calls)
    with_reference = {_criterion_of(r) for r in provider.requests
                      if any("Synthetic reference diagnosis" in m.content for m in r.messages)}
    assert with_reference == {"final_conclusion"}
    # judge decoding: temperature 0, top_p 1, the quick preset's output limit
    assert {(r.temperature, r.top_p, r.max_tokens, r.model) for r in provider.requests} == {(0.0, 1.0, 160, "model-a")}
    info = json.loads((bench_run / "judge.json").read_text())
    assert info["repeats"] == 1 and info["seeds"] == [42] and info["guidance"] == {} and info["calibration_run"] is None
    assert info["free_form_roles"] is False and info["split_fallbacks"] == 0 and result.free_form_opinions == 2
    events = [json.loads(line)["event"] for line in (bench_run / "journal.jsonl").read_text().splitlines()]
    assert events[-2:] == ["judge_started", "judge_finished"]


def _calibration_run(path: Path, *, judge_model: str = "model-a", extra: list[dict] | None = None) -> Path:
    """A hand-made calibration run folder: candidates.csv with selected winners, config.json."""
    path.mkdir(parents=True)
    rows = [
        {"candidate_id": "data_use:none", "criterion": "data_use", "origin": "none", "text": "", "selected": False},
        {"candidate_id": "data_use:m3", "criterion": "data_use", "origin": "mutation",
         "text": "calibrated: count only data the case states.", "selected": True},
        {"candidate_id": "panel_adequacy:initial-1", "criterion": "panel_adequacy", "origin": "initial",
         "text": "calibrated: is every organ system of the case covered?", "selected": True},
        {"candidate_id": "management:initial-2", "criterion": "management", "origin": "initial",
         "text": "calibrated but not the winner", "selected": False},
        *(extra or []),
    ]
    frame = pd.DataFrame(rows).reindex(columns=CANDIDATE_COLUMNS)
    frame.to_csv(path / "candidates.csv", index=False)
    (path / "config.json").write_text(json.dumps({"judge": {"model": judge_model}}))
    return path


def test_calibrated_guidance_is_used_per_criterion(tmp_path, bench_run):
    calib = _calibration_run(tmp_path / "archives" / "calib")
    client, provider = make_client(tmp_path)
    try:
        result = judge_bench(bench_run, calibration_run=calib, client=client)
    finally:
        client.close()
    assert set(result.guidance) == {"data_use", "panel_adequacy"} and result.warnings == []
    frame = pd.read_csv(result.path, keep_default_na=False)
    guided = frame["criterion"].isin(["data_use", "panel_adequacy"])
    assert set(frame.loc[frame["criterion"] == "data_use", "guidance_id"]) == {"data_use:m3"}
    assert set(frame.loc[frame["criterion"] == "panel_adequacy", "guidance_id"]) == {"panel_adequacy:initial-1"}
    assert set(frame.loc[~guided, "guidance_id"]) == {"none"}
    assert set(frame.loc[guided, "score"]) == {3} and set(frame.loc[~guided, "score"]) == {2}  # the scripted judge follows guidance
    prompts = [r.messages[-1].content for r in provider.requests]
    assert sum("count only data the case states" in p for p in prompts) == 2 * 2 + 2  # reasoning + final of 2 structured runs, final of 2 free-form
    assert not any("not the winner" in p for p in prompts)
    info = json.loads((bench_run / "judge.json").read_text())
    assert info["calibration_run"] == str(calib)
    assert info["guidance"]["data_use"]["candidate_id"] == "data_use:m3"
    assert len(info["guidance"]["data_use"]["sha256"]) == 64


def test_guidance_from_another_judge_model_is_warned_about(tmp_path, bench_run):
    calib = _calibration_run(tmp_path / "calib", judge_model="another-judge")
    client, _ = make_client(tmp_path)
    try:
        result = judge_bench(bench_run, calibration_run=calib, client=client)
    finally:
        client.close()
    assert len(result.warnings) == 1 and "another-judge" in result.warnings[0]


def test_bad_calibration_runs_are_refused(tmp_path):
    with pytest.raises(RunError, match="candidates.csv: not found"):
        load_calibrated_guidance(tmp_path, RUBRIC)
    other = _calibration_run(tmp_path / "kqa", extra=[
        {"candidate_id": "entailment:m1", "criterion": "entailment", "text": "x", "selected": True}])
    with pytest.raises(RunError, match="'entailment'.*does not judge"):
        load_calibrated_guidance(other, RUBRIC)
    twice = _calibration_run(tmp_path / "twice", extra=[
        {"candidate_id": "data_use:m9", "criterion": "data_use", "text": "y", "selected": True}])
    with pytest.raises(RunError, match="two selected winners"):
        load_calibrated_guidance(twice, RUBRIC)
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    pd.DataFrame([{"candidate_id": "data_use:none", "criterion": "data_use", "text": "", "selected": False}]).reindex(
        columns=CANDIDATE_COLUMNS).to_csv(unfinished / "candidates.csv", index=False)
    with pytest.raises(RunError, match="no candidate is selected"):
        load_calibrated_guidance(unfinished, RUBRIC)


def test_repeats_use_fresh_seeds_and_a_second_judging_is_free(tmp_path, bench_run):
    client, provider = make_client(tmp_path)
    try:
        result = judge_bench(bench_run, client=client, repeats=2)
        n = provider.calls
        again = judge_bench(bench_run, client=client, repeats=2)
        with pytest.raises(ConfigError):
            judge_bench(bench_run, client=client, repeats=0)
    finally:
        client.close()
    frame = pd.read_csv(result.path, keep_default_na=False)
    assert result.rows == 2 * (2 * 20 + 2 * 8 + 4) and n == result.rows  # free-form runs: the final only
    assert sorted(set(zip(frame["repeat"], frame["seed"]))) == [(0, 42), (1, 43)]
    assert provider.calls == n and again.cached == again.rows  # replayed from the cache


def test_failed_pipeline_runs_are_not_judged_and_judge_failures_are_recorded(tmp_path):
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=2), conditions=("structured",))

    def endpoint(request: ChatRequest):
        if request.tag == "finalizer" and any("patient 1 with" in m.content for m in request.messages):
            raise EndpointError("HTTP 400: refused")  # the second case fails at the finalizer
        if request.tag == "judge" and _criterion_of(request) == "clinical_safety":
            return "not json"  # an invalid judge answer: model_failure, never a score
        return consilium_endpoint(request)

    client, _ = make_client(tmp_path, endpoint)
    try:
        run_bench(config, client=client)
        result = judge_bench(config.run_dir, client=client)
    finally:
        client.close()
    assert result.skipped_runs == 1
    frame = pd.read_csv(result.path, keep_default_na=False)
    assert set(frame["case_id"]) == {"10.0000/bench-00"} and len(frame) == 20 + 2
    failures = frame[frame["outcome"] == "model_failure"]
    assert set(failures["criterion"]) == {"clinical_safety"} and len(failures) == 3
    assert set(failures["score"]) == {""} and failures["rationale"].str.startswith("invalid output").all()
    assert result.outcomes == {"score": 19, "model_failure": 3}


def test_judging_a_folder_that_is_no_bench_run_fails_with_the_fix(tmp_path):
    with pytest.raises(RunError, match="evolve bench run"):
        judge_bench(tmp_path)


def _no_marker(request: ChatRequest) -> str:
    """The consilium endpoint, but free-form opinions close without a 'FINAL OPINION:' line."""
    answer = consilium_endpoint(request)
    return answer.replace("FINAL OPINION:", "")


def test_free_form_role_components_are_judged_only_on_request_and_fallback_splits_are_reported(tmp_path):
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=2))
    client, provider = make_client(tmp_path, _no_marker)
    try:
        run_bench(config, client=client)
        default = judge_bench(config.run_dir, client=client)
        assert default.split_fallbacks == 2 and default.free_form_opinions == 2 and default.warnings == []
        write_bench_report(config.run_dir)
        report = (config.run_dir / "bench_report.md").read_text()
        assert "4 of 4 free-form role opinions (2 of 2 primary-role ones) have no 'FINAL OPINION:' line" in report
        assert "free-form role components were not judged" in report
        asked = judge_bench(config.run_dir, client=client, free_form_roles=True)
    finally:
        client.close()
    frame = pd.read_csv(asked.path, keep_default_na=False)
    free = frame[frame["condition"] == "free-form"]
    assert set(free["component"]) == {"reasoning", "opinion", "final"}
    assert asked.rows == 4 * sum(PER_RUN.values()) + 2 * 2
    assert len(asked.warnings) == 1 and "2 of 2 free-form primary-role opinions have no 'FINAL OPINION:'" in asked.warnings[0]
    info = json.loads((config.run_dir / "judge.json").read_text())
    assert info["free_form_roles"] is True and info["split_fallbacks"] == 2
    write_bench_report(config.run_dir)
    assert "judged as overlapping components" in (config.run_dir / "bench_report.md").read_text()


def test_the_n_plus_one_panel_is_its_own_and_judged_as_such(tmp_path):
    """3+1 throughout: the workers propose panels, the consolidator merges them (its own role
    file) and runs the consilium; the judge scores each panel once, the n+1 one marked n+1."""
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=1), conditions=("structured",),
                         topologies=("single", "n+1"), workers=("w1", "w2"), consolidator="boss")
    client, provider = make_client(tmp_path)
    try:
        run_bench(config, client=client)
        judge_bench(config.run_dir, client=client)
    finally:
        client.close()
    roles = sorted(p.name for p in (config.run_dir / "roles").iterdir())
    assert roles == ["10.0000_bench-00.model-a.json", "10.0000_bench-00.model-a.n+1.json"]
    by_tag = {}
    for r in provider.requests:
        by_tag.setdefault(r.tag, set()).add(r.model)
    assert by_tag["role_worker"] == {"w1", "w2"} and by_tag["role_consolidation"] == {"boss"}
    assert by_tag["role_assignment"] == {"model-a"}  # the single pipeline's own panel
    assert by_tag["finalizer"] == {"model-a", "boss"}  # the n+1 consilium runs on the consolidator
    frame = pd.read_csv(config.run_dir / "judge_scores.csv", keep_default_na=False)
    panel = frame[frame["component"] == "case"]
    assert sorted(zip(panel["topology"], panel["number"])) == [("", 9), ("", 10), ("n+1", 9), ("n+1", 10)]
    assert set(panel["condition"]) == {""}
    report = write_bench_report(config.run_dir)
    assert report.counts.topologies == ["n+1", "single"] and report.tables.table9
