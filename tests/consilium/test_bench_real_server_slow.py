"""The benchmark runner against the real embedded llama-server (slow; CI runs it after `evolve setup`).

One synthetic case, the free-form condition, one review round: role assignment, opinions,
consilium, finalizer, judging and the tables on a real OpenAI-compatible endpoint. The 0.5B
model proves the machinery, not clinical quality: it may even fail the role assignment (it has
repeated a role name on a real vignette), so the test checks that whatever happened is recorded
consistently, and that a second run costs no model call.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evolve.consilium import load_case_runs, resolve_bench_config
from evolve.workflows import run_and_judge

pytestmark = pytest.mark.slow

CASE = {
    "doi": "10.0000/slow-bench-01",
    "title": "SYNTHETIC: breathlessness after a long flight",
    "case_text": (
        "A 54-year-old woman has had sudden breathlessness and right-sided chest pain for six hours, "
        "two days after a 12-hour flight. Heart rate 112/min, oxygen saturation 91% on room air, "
        "blood pressure 128/76 mmHg. The right calf is swollen and tender. ECG: sinus tachycardia."
    ),
    "answer": "Pulmonary embolism from a deep-vein thrombosis",
}


@pytest.mark.full_report  # checks the figures of report.html
def test_bench_on_the_real_local_model(installed_local_model, tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(CASE) + "\n", encoding="utf-8")
    overrides = {
        "run_id": "slow-bench",
        "archives_dir": tmp_path / "archives",
        "cases": cases,
        "cache_path": tmp_path / "cache.sqlite",
        "conditions": ("free-form",),
        "generation": {"max_rounds": 1},
    }
    config = resolve_bench_config(preset="quick", overrides=overrides, environ={})
    result = run_and_judge(config)
    run = result.run_dir

    (case_run,) = load_case_runs(run)
    assert case_run.calls and all(c.prompt_tokens > 0 for c in case_run.calls if not c.error.startswith("endpoint"))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["endpoint"]["provider"] == "embedded" and "api_key" not in json.dumps(manifest["endpoint"])
    events = [json.loads(line)["event"] for line in (run / "journal.jsonl").read_text().splitlines()]
    assert "bench_finished" in events and "judge_finished" in events
    scores = pd.read_csv(run / "judge_scores.csv")
    if case_run.stop_reason == "failure":
        assert case_run.error and result.n_failed == 1 and scores.empty
    else:
        # a finished consilium: 1 round at most, a final report, a record and a pack target set
        assert case_run.rounds_completed <= 1 and case_run.final
        assert result.n_ok == 1 and (run / "records" / "local").is_dir() and (run / "pack" / "local").is_dir()
        # judged on applicable criteria only: a free-form run's final (8) and the panel (2); its
        # role components only on request (the paper judged those of the structured pipeline)
        assert len(scores) == 8 + 2 and set(scores["component"]) == {"final", "case"}
        assert set(scores["outcome"]) <= {"score", "not_evaluable", "model_failure"}
        numeric = scores.loc[scores["outcome"] == "score", "score"]
        assert numeric.between(0, 3).all()
        assert (scores["outcome"] == "score").mean() >= 0.7  # the schema keeps the small model on track
    assert (run / "bench_report.md").is_file() and (run / "table3.csv").is_file()
    from tests.report.test_html_reports import decoded_images, parse

    assert len(decoded_images(parse(run / "report.html"))) == 3  # rounds, transitions, quality vs tokens

    # the same configuration in a new folder is answered by the response cache; only answers
    # that were cut at the output limit are never cached (and so asked again)
    again = run_and_judge(config.model_copy(update={"run_id": "slow-bench-again"}))
    assert sum(u["cache_hits"] for u in again.usage.values()) > 0
    complete = all(c.finish_reason == "stop" for c in case_run.calls) and "model_failure" not in set(scores["outcome"])
    if complete:
        assert sum(u["calls"] for u in again.usage.values()) == 0  # generation and judging
        (replayed,) = load_case_runs(again.run_dir)
        assert replayed.stop_reason == case_run.stop_reason and replayed.final == case_run.final
