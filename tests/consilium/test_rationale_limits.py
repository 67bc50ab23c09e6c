"""Rationale lengths in the consilium are read as they were sent (evolve.llm.validate_reply).

With ``schema_limits`` on, the schema sent carries ``maxLength``: a longer rationale does not
fit it, so the response cache never keeps it and the reader never clips it - a judge's is a
``model_failure`` row, a role assignment's is re-asked. With ``schema_limits`` off the model was
never told a limit: the whole rationale is read, kept, and a rerun pays nothing.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evolve.consilium import ConsiliumPipeline, PipelineSettings, judge_bench, run_bench
from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.testing import FakeProvider
from tests.consilium.bench_support import consilium_endpoint, make_client, make_config, write_cases
from tests.consilium.test_judging import _criterion_of
from tests.consilium.test_pipeline import CASE, PANEL, Script

LONG = "x" * 200  # the quick preset's judge sends rationale maxLength 120


def _judge_calls(provider: FakeProvider) -> int:
    return sum(r.tag == "judge" for r in provider.requests)


@pytest.mark.parametrize("limits", [True, False])
def test_an_over_long_judge_rationale_fails_when_its_limit_was_sent_and_is_kept_whole_otherwise(tmp_path, limits):
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=1), conditions=("structured",),
                         endpoint={"provider": "fake", "schema_limits": limits})
    assert config.judge.rationale_max_chars == 120

    def endpoint(request: ChatRequest) -> str:
        if request.tag == "judge" and _criterion_of(request) == "management":
            return json.dumps({"rationale": LONG, "score": "2"})
        return consilium_endpoint(request)

    client, provider = make_client(tmp_path, endpoint)
    provider.schema_limits = limits  # what the client checks replies against before caching them
    try:
        run_bench(config, client=client)
        first = judge_bench(config.run_dir, client=client)
        frame = pd.read_csv(first.path, keep_default_na=False)
        paid = _judge_calls(provider)
        second = judge_bench(config.run_dir, client=client)
        asked_again = _judge_calls(provider) - paid
    finally:
        client.close()
    long_rows = frame[frame["criterion"] == "management"]
    assert len(long_rows) > 0 and first.rows == len(frame) == sum(first.outcomes.values())
    if limits:  # outside the schema sent: a counted failure, never clipped, never cached
        assert (long_rows["outcome"] == "model_failure").all() and (long_rows["score"] == "").all()
        assert long_rows["rationale"].str.contains("120").all()
        assert first.outcomes["model_failure"] == len(long_rows)
        assert asked_again == len(long_rows)  # a rerun asks exactly those again, and fails them again
        assert second.outcomes == first.outcomes and second.cached == second.rows - len(long_rows)
    else:  # the model was never told the limit: scored with the whole rationale, and cached
        assert (long_rows["outcome"] == "score").all() and (long_rows["rationale"] == LONG).all()
        assert first.outcomes == {"score": first.rows}
        assert asked_again == 0 and second.cached == second.rows


def _role_calls(provider: FakeProvider) -> int:
    return sum(r.tag == "role_assignment" for r in provider.requests)


@pytest.mark.parametrize("limits", [True, False])
def test_an_over_long_role_rationale_is_reasked_when_its_limit_was_sent_and_kept_whole_otherwise(tmp_path, limits):
    long_panel = {"roles": [{**PANEL[0], "rationale": "y" * 700}, PANEL[1]], "panel_rationale": "p"}  # role limit 600
    provider = FakeProvider(Script(roles=[long_panel, {"roles": PANEL, "panel_rationale": "p"}]))
    provider.schema_limits = limits
    assigned = []
    for _ in range(2):  # a run, then a rerun over the same response cache
        with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite"), backoff_initial=0.01) as client:
            before = _role_calls(provider)
            roles = ConsiliumPipeline(client, PipelineSettings(schema_limits=limits)).assign_roles(CASE, model="m")
            assigned.append((roles, _role_calls(provider) - before))
    (first, paid_first), (again, paid_again) = assigned
    assert first.ok and again.ok
    if limits:  # re-asked with the long answer quoted, never clipped
        assert [c.attempt for c in first.calls] == [1, 2] and "600" in first.calls[0].error
        assert first.roles[0].rationale == PANEL[0]["rationale"]
        quoted = provider.requests[1].messages
        assert json.loads(quoted[2].content) == long_panel and "600" in quoted[3].content
        # the re-ask design: the long answer is not cached (it breaks the schema sent), so a rerun
        # asks for it once more; the re-ask request is the same and its answer was cached
        assert paid_first == 2 and paid_again == 1
        assert [c.cached for c in again.calls] == [False, True]
    else:
        assert [c.attempt for c in first.calls] == [1] and first.roles[0].rationale == "y" * 700
        sent = provider.requests[0].response_format["json_schema"]["schema"]
        assert "maxLength" not in json.dumps(sent)
        assert paid_first == 1 and paid_again == 0 and again.roles == first.roles
