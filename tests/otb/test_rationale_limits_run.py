"""An OpenTumorBoard judge run whose judge writes rationales over the schema's limit: with the
limit sent (``schema_limits`` on) each is a counted judge failure, never cached, so judging
again asks exactly those calls again; with it left out each is scored with the whole rationale
and cached, so judging again pays nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.otb import generate_otb, judge_otb, resolve_otb_config
from evolve.runs import OtbFolder
from evolve.testing import FakeProvider
from tests.otb.test_records_extract import BOARD, TURN, _write

BOARD_ANSWER = ("<discussion>\n<turn 1> Surgeon: Borderline resectable.\n</discussion>\n"
                "<conclusion>Neoadjuvant chemotherapy, then resection after restaging.</conclusion>")
LONG = "z" * 1500  # over every OTB rationale limit (1000 and 1200)


def _endpoint(request: ChatRequest) -> str:
    if request.tag == "otb_board":
        return BOARD_ANSWER
    if request.tag == "otb_turn":
        return json.dumps({"answer": "Yes, chemotherapy first."})
    name = request.response_format["json_schema"]["name"]  # type: ignore[index]
    if name == "conclusion_alignment":
        return json.dumps({"conclusion_alignment": {"score": 4, "rationale": LONG}})
    if name == "four_decisions":
        return json.dumps({"therapy": 5, "surgery": 3, "next_action": -1, "clinical_trial": -1, "rationale": "short"})
    return json.dumps({"clinical_equivalence_score": 5, "critical_error": False, "unsupported_claim": False,
                       "rationale": LONG})


def _judge_calls(provider: FakeProvider) -> int:
    return sum(r.tag == "otb_judge" for r in provider.requests)


@pytest.mark.parametrize("limits", [True, False])
def test_an_over_long_otb_rationale_is_a_failure_only_when_its_limit_was_sent(tmp_path: Path, limits: bool):
    board = _write(tmp_path / "task1_test.jsonl", [BOARD])
    turn = _write(tmp_path / "task2_test.jsonl", [TURN])
    config = resolve_otb_config(preset="quick", environ={}, overrides={
        "run_id": "otb", "archives_dir": tmp_path / "archives", "board": board, "turn": turn, "max_items": 10,
        "models": ("model-a",), "endpoint": {"provider": "fake", "schema_limits": limits},
        "cache_path": tmp_path / "cache.sqlite"})
    provider = FakeProvider(_endpoint)
    provider.schema_limits = limits
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        first = judge_otb(config.run_dir, client=client)
        paid = _judge_calls(provider)
        second = judge_otb(config.run_dir, client=client)
        asked_again = _judge_calls(provider) - paid
    folder = OtbFolder(config.run_dir)
    rows = [json.loads(line) for line in (folder / folder.JUDGE_SCORES).read_text().splitlines()]
    long_rows = [r for r in rows if r["rubric"] in ("conclusion_alignment", "clinical_equivalence")]
    assert first.calls == paid == len(rows) == 3 and len(long_rows) == 2
    if limits:  # outside the schema sent: judge failures, never clipped, never cached
        assert all(r["outcome"] == "judge_failure" and "does not fit" in r["error"] for r in long_rows)
        assert first.failures == second.failures == 2
        assert asked_again == 2 and second.cached == 1  # only the fitting four-decisions reply is replayed
    else:  # never told the limit: scored whole, cached, a rerun pays nothing
        assert all(r["outcome"] == "scored" and r["rationale"] == LONG for r in long_rows)
        assert first.failures == second.failures == 0
        assert asked_again == 0 and second.cached == 3
