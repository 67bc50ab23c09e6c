"""Prompt sizes against the endpoint's context, checked per case before any call (issue 13 item 7)."""

from __future__ import annotations

import json
from pathlib import Path

from evolve.consilium import (
    CHARS_PER_TOKEN,
    ConsiliumPipeline,
    resolve_bench_config,
    run_bench,
    stage_bounds,
)
from evolve.data import Case
from evolve.runs import EndpointSettings, context_window
from evolve.workflows import run_and_judge
from tests.consilium.bench_support import make_client, make_config

# an invented case record of about 4,800 tokens, the length of the longest NEJM case records
LONG_TEXT = ("A 50-year-old man presented with fever, a rash on the trunk and progressive dyspnea over three weeks; "
             "his creatinine rose from 1.1 to 2.9 mg/dL. ") * 120


def _case(text: str, case_id: str = "10.0000/long") -> Case:
    return Case(case_id=case_id, title="INVENTED long case", text=text, reference_answer="Invented reference.")


def _write(path: Path, texts: dict[str, str]) -> Path:
    rows = [{"doi": doi, "title": f"INVENTED case {doi}", "case_text": text, "answer": "Invented reference"}
            for doi, text in texts.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_prompts_grow_stage_by_stage_and_only_case_only_stages_are_exact():
    config = resolve_bench_config(preset="quick", overrides={"run_id": "x", "cases": "c.jsonl"}, environ={})
    pipe = ConsiliumPipeline(None, config.pipeline_settings())  # type: ignore[arg-type]
    bounds = {b.stage: b for b in stage_bounds(pipe, _case(LONG_TEXT), model="m", condition="structured",
                                                 topology="single")}
    assert list(bounds) == ["role_assignment", "opinion", "synthesis", "vote", "moderator", "finalizer"]
    case_tokens = len(LONG_TEXT) / CHARS_PER_TOKEN
    assert case_tokens < bounds["role_assignment"].prompt_tokens < case_tokens + 1500
    assert bounds["role_assignment"].exact and bounds["opinion"].exact and not bounds["finalizer"].exact
    # the finalizer sees the case, every opinion, the report and every review: the largest prompt
    assert bounds["finalizer"].prompt_tokens == max(b.prompt_tokens for b in bounds.values())
    assert bounds["finalizer"].total > 8192 > bounds["opinion"].total  # the case of issue 13: fits until the end
    assert {b.output_tokens for b in bounds.values()} == {600, 500, 700}  # the quick preset's limits
    # n+1: worker opinions on the workers, a consolidation on the consolidator
    n1 = stage_bounds(pipe, _case(LONG_TEXT), model="m", condition="free-form", topology="n+1",
                      workers=("w1", "w2", "w3"), consolidator="c")
    assert [(b.stage, b.model) for b in n1] == [
        ("role_worker", "w1"), ("role_worker", "w2"), ("role_worker", "w3"), ("role_consolidation", "c"),
        ("opinion_worker", "w1"), ("opinion_worker", "w2"), ("opinion_worker", "w3"), ("opinion_consolidation", "c"),
        ("synthesis", "c"), ("vote", "c"), ("moderator", "c"), ("finalizer", "c")]  # 3+1 throughout


def test_the_embedded_slot_is_the_default_context_and_other_endpoints_are_unknown_unless_stated():
    assert context_window(EndpointSettings()) == (8192, "the embedded server's slot")
    assert context_window(EndpointSettings(provider="openai_compatible", base_url="http://x/v1"))[0] is None
    assert context_window(EndpointSettings(provider="fake", context_tokens=32768)) == (32768, "endpoint.context_tokens")


def test_a_case_that_cannot_fit_fails_before_any_call_and_the_others_run(tmp_path: Path):
    cases = _write(tmp_path / "cases.jsonl", {"10.0000/short": "A 60-year-old with chest pain.",
                                              "10.0000/long": LONG_TEXT})
    config = make_config(tmp_path, cases, conditions=("structured",),
                         endpoint={"provider": "fake", "context_tokens": 4096})
    warnings: list[str] = []
    client, provider = make_client(tmp_path)
    try:
        result = run_and_judge(config, client=client, judge=False, report=False, on_warning=warnings.append)
    finally:
        client.close()
    by_case = {r.case_id: r for r in result.runs}
    assert by_case["10.0000/short"].ok
    long_run = by_case["10.0000/long"]
    assert not long_run.ok and "role_assignment prompt alone is about" in long_run.error
    assert "4,096-token context (endpoint.context_tokens); not sent" in long_run.error
    assert not any("his creatinine rose from 1.1" in m.content
                   for r in provider.requests for m in r.messages)  # nothing of the long case was sent
    assert any("10.0000/long" in w and "will fail without a call" in w for w in warnings)  # said before the run
    artifact = json.loads(long_run.path.read_text())
    assert artifact["stop_reason"] == "failure" and artifact["calls"] == []


def test_a_case_that_may_not_fit_is_warned_about_and_still_run(tmp_path: Path):
    cases = _write(tmp_path / "cases.jsonl", {"10.0000/long": LONG_TEXT[:12000]})
    config = make_config(tmp_path, cases, conditions=("structured",),
                         endpoint={"provider": "fake", "context_tokens": 6000})
    client, _ = make_client(tmp_path)
    try:
        result = run_bench(config, client=client)
    finally:
        client.close()
    assert result.runs[0].ok  # the scripted answers are short: it fitted after all
    assert result.context is not None and not result.context.blocked
    assert any(w.startswith("finalizer: in 1 pipeline run(s) (cases 10.0000/long)") for w in result.context.warnings)
    events = [json.loads(line) for line in (config.run_dir / "journal.jsonl").read_text().splitlines()]
    assert any(e["event"] == "warning" and e["message"].startswith("context: finalizer") for e in events)


def test_nothing_is_checked_when_the_context_is_unknown(tmp_path: Path):
    cases = _write(tmp_path / "cases.jsonl", {"10.0000/long": LONG_TEXT})
    config = make_config(tmp_path, cases, conditions=("structured",))  # the fake provider states no context
    client, _ = make_client(tmp_path)
    try:
        result = run_bench(config, client=client)
    finally:
        client.close()
    assert result.runs[0].ok and result.context is not None and result.context.context is None
    assert not result.context.warnings and not result.context.blocked
