"""Consilium judge replies outside their schema (issue 23 item 1, issue 24 item 1): a score off
the 0-3 scale, a number where the schema says a string, an extra key, a missing rationale - each
is a ``model_failure`` row of ``judge_scores.csv`` (never a score), counted in the bench report's
Table 6, never stored in the response cache: judging again against a healthy endpoint asks
exactly those calls again and scores them."""

from __future__ import annotations

import json

import pandas as pd

from evolve.consilium import judge_bench, run_bench
from evolve.llm import ChatRequest
from evolve.report import write_bench_report
from tests.consilium.bench_support import consilium_endpoint, make_client, make_config, write_cases
from tests.consilium.test_judging import _criterion_of

INVALID = {  # criterion -> a reply that is valid JSON but outside the schema sent
    "clinical_safety": {"rationale": "r", "score": "4"},  # off the 0-3 scale
    "data_use": {"rationale": "r", "score": 2},  # a number, the schema says a string
    "management": {"rationale": "r", "score": "2", "confidence": "high"},  # an extra key
    "final_conclusion": {"score": "1"},  # no rationale
}


def test_a_judge_reply_outside_the_schema_is_a_counted_model_failure_asked_again_on_resume(tmp_path):
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=2), conditions=("structured",))
    state = {"healed": False}

    def endpoint(request: ChatRequest) -> str:
        if request.tag == "judge" and not state["healed"] and _criterion_of(request) in INVALID:
            return json.dumps(INVALID[_criterion_of(request)])
        return consilium_endpoint(request)

    client, provider = make_client(tmp_path, endpoint)
    try:
        run_bench(config, client=client)
        first = judge_bench(config.run_dir, client=client)
        frame = pd.read_csv(first.path, keep_default_na=False)
        failed = frame[frame["outcome"] == "model_failure"]
        assert set(failed["criterion"]) == set(INVALID) and (failed["score"] == "").all()
        assert failed["rationale"].str.startswith("invalid output").all()
        assert first.outcomes == {"score": int((frame["outcome"] == "score").sum()), "model_failure": len(failed)}
        assert sum(first.outcomes.values()) == first.rows == len(frame)

        report = write_bench_report(config.run_dir, n_boot=20, html=False)
        table6 = report.tables.table6
        mine = {r.component: r for r in table6 if (r.model, r.condition, r.topology) == ("model-a", "structured", "single")}
        assert set(mine) == {"reasoning", "opinion", "final"}
        for component, row in mine.items():  # each failure of the csv counted in its component's row
            assert row.n_model_failure == int((failed["component"] == component).sum()) > 0
        for r in table6:  # every call counted once: numeric + not evaluable + failures
            assert r.n_calls == r.n_numeric + r.n_not_evaluable + r.n_model_failure
        markdown = (config.run_dir / "bench_report.md").read_text()
        assert "## Table 6" in markdown

        state["healed"] = True
        judge_calls = len([r for r in provider.requests if r.tag == "judge"])
        second = judge_bench(config.run_dir, client=client)
        asked = len([r for r in provider.requests if r.tag == "judge"]) - judge_calls
    finally:
        client.close()
    assert asked == len(failed)  # only the replies outside the schema are asked again; the rest is replayed
    assert second.outcomes == {"score": second.rows} and second.cached == second.rows - len(failed)
