"""Generating and judging OpenTumorBoard answers on INVENTED records through a scripted endpoint:
the released layout, references kept from generating models, malformed answers never judged,
judge failures counted, the aggregation recomputed by hand, resume paying nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.errors import RunError
from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.otb import generate_otb, judge_otb, read_responses, resolve_otb_config
from evolve.runs import OtbFolder
from evolve.testing import FakeProvider
from tests.otb.test_records_extract import BOARD, TURN, _write

BOARD_OK = ("<discussion>\n<turn 1> Surgeon: Borderline resectable.\n<turn 2> Medical oncologist: Chemotherapy first."
            "\n</discussion>\n<conclusion>The board chose neoadjuvant chemotherapy. Resection after restaging.</conclusion>")


class Endpoint:
    """Board: sim-002 gets an answer without a conclusion (malformed). Turn: qa-002's judge
    reply breaks the schema (a judge failure). Judges score by the candidate's words."""

    def __call__(self, request: ChatRequest) -> str:
        user = request.messages[-1].content
        if request.tag == "otb_board":
            return "<discussion>\n<turn 1> Surgeon: resect.\n</discussion>" if "sim-002 case" in user else BOARD_OK
        if request.tag == "otb_turn":
            return json.dumps({"answer": "Yes, chemotherapy first."})
        assert request.tag == "otb_judge" and request.temperature == 0 and request.top_p == 1 and request.seed == 0
        assert request.response_format is not None and request.response_format["json_schema"]["strict"]
        name = request.response_format["json_schema"]["name"]
        if name == "conclusion_alignment":
            return json.dumps({"conclusion_alignment": {"score": 4, "rationale": "same plan"}})
        if name == "four_decisions":
            return json.dumps({"therapy": 5, "surgery": 3, "next_action": -1, "clinical_trial": -1, "rationale": "r"})
        if "qa-002 question" in user:
            return json.dumps({"clinical_equivalence_score": 9, "rationale": "out of range"})
        flag = "bold" in user
        return json.dumps({"clinical_equivalence_score": 2 if flag else 5, "critical_error": flag,
                           "unsupported_claim": False, "rationale": "compared"})


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    boards = [BOARD, {**BOARD, "simulation_id": "sim-002", "case_id": "case-B", "case_summary": "INVENTED sim-002 case."}]
    turns = [TURN, {**TURN, "qa_id": "qa-002", "question": "INVENTED qa-002 question?"},
             {**TURN, "qa_id": "qa-003", "case_id": "case-B", "question": "A bold claim?", "qa_type": "uncertainty"}]
    return _write(tmp_path / "task1_test.jsonl", boards), _write(tmp_path / "task2_test.jsonl", turns)


def _config(tmp_path: Path, files, **extra):
    return resolve_otb_config(preset="quick", environ={}, overrides={
        "run_id": "otb", "archives_dir": tmp_path / "archives", "board": files[0], "turn": files[1], "max_items": 10,
        "models": ("model-a",), "endpoint": {"provider": "fake"}, "cache_path": tmp_path / "cache.sqlite", **extra})


def test_generation_writes_the_released_layout_and_judging_aggregates_as_released(tmp_path, files):
    config = _config(tmp_path, files)
    provider = FakeProvider(Endpoint())
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        counts = generate_otb(config, client=client)
        result = judge_otb(config.run_dir, client=client)
    folder = OtbFolder(config.run_dir)
    assert counts[("board", "model-a")].malformed == 1 and counts[("turn", "model-a")].answered == 3
    generation = [r for r in provider.requests if r.tag in ("otb_board", "otb_turn")]
    assert not any("INVENTED reference" in m.content or "FOLFIRINOX" in m.content for r in generation for m in r.messages)
    assert "CASE SUMMARY:\n" in generation[0].messages[-1].content and "\n\nSLIDE DESCRIPTIONS:\n" in generation[0].messages[-1].content
    board = read_responses(folder.responses("board", "model-a"))
    assert [r["simulation_id"] for r in board] == ["sim-001", "sim-002"]
    first = board[0]
    assert first["kind"] == "response" and first["parse_status"] == "parsed" and len(first["run_key"]) == 64
    assert first["parsed_output"]["conclusion"].startswith("The board chose") and first["parsed_output"]["discussion"][0]["role"] == "Surgeon"
    assert board[1]["malformed"] and board[1]["extracted_final_response"] == ""
    # the judge saw only extracted answers, never a malformed one or a model name
    judged = [r for r in provider.requests if r.tag == "otb_judge"]
    assert len(judged) == result.calls == 1 * 2 + 3  # one board answer x (alignment, decisions) + 3 turn answers
    assert not any("model-a" in m.content or "<discussion>" in m.content for r in judged for m in r.messages)
    assert any("<CANDIDATE_RESPONSE>\nThe board chose" in r.messages[-1].content for r in judged)
    scores = [json.loads(line) for line in (folder / folder.JUDGE_SCORES).read_text().splitlines()]
    assert {s["rubric_version"] for s in scores} == {"evolve-otb-judge-1"} and result.failures == 1
    board_summary = json.loads(folder.summary("board", "model-a").read_text())
    assert board_summary["format_failures"] == 1 and board_summary["mean"] == pytest.approx((4 + 1) / 2)
    assert (board_summary["four_decisions"]["therapy"]["cases"], board_summary["four_decisions"]["therapy"]["mean"]) == (1, 5.0)
    turn = json.loads(folder.summary("turn", "model-a").read_text())
    assert (turn["scored"], turn["judge_failures"], turn["format_failures"]) == (2, 1, 0)
    assert turn["mean"] == pytest.approx((5 + 2) / 2) and turn["critical_error_rate"] == pytest.approx(0.5)
    assert turn["by_question_type"]["uncertainty"]["mean"] == 2.0
    metrics = (folder / folder.METRICS).read_text()
    assert "rouge_l" in metrics.splitlines()[0] and "wordllama l2_supercat_256" in metrics  # the stand-in, named
    assert "no text to compare" in metrics  # the malformed board answer: no value, and why


def test_a_resumed_run_pays_no_finished_call_twice_and_refuses_other_settings(tmp_path, files):
    config = _config(tmp_path, files)
    provider = FakeProvider(Endpoint())
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        paid = provider.calls
        with pytest.raises(RunError, match="already holds an OpenTumorBoard run"):
            generate_otb(config, client=client)
        again = generate_otb(config, client=client, resume=True)
        assert provider.calls == paid and again[("turn", "model-a")].reused == 3
        other = _config(tmp_path, files, decoding={"temperature": 0.5})
        with pytest.raises(RunError, match=r"differs from this one in \[.decoding.\] \(decoding.temperature: 0.0 then, 0.5 now\)"):
            generate_otb(other, client=client, resume=True)
        # parallelism, patience and prices change no answer: a resume may change them
        faster = _config(tmp_path, files, endpoint={"provider": "fake", "max_concurrency": 4, "price_in": 1.0, "price_out": 2.0})
        assert generate_otb(faster, client=client, resume=True)[("turn", "model-a")].reused == 3
        with pytest.raises(RunError, match="differs from this one in \\['endpoint', 'judge'\\]"):  # the judge follows the model
            generate_otb(_config(tmp_path, files, endpoint={"provider": "fake", "model": "other"}), client=client, resume=True)
        # an answer lost from responses.jsonl is asked again from the cache: no new call
        folder = OtbFolder(config.run_dir)
        path = folder.responses("turn", "model-a")
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:1]))
        redone = generate_otb(config, client=client, resume=True)
    assert redone[("turn", "model-a")].answered == 2 and provider.calls == paid
    assert [r["qa_id"] for r in read_responses(path)] == ["qa-001", "qa-002", "qa-003"]


def _manifest(path: Path, entries: list[tuple[str, str, str]]) -> Path:
    """An INVENTED test manifest in the released ShareGPT layout: (id, system, user) per entry."""
    path.write_text("".join(json.dumps({
        "schema_version": 1, "format": "sharegpt", "id": i, "prompt_version": "released_caption_v1",
        "metadata": {"qa_id": i}, "conversations": [{"from": "system", "value": s}, {"from": "human", "value": u}],
    }) + "\n" for i, s, u in entries))
    return path


def test_released_prompts_come_from_the_test_manifest_verbatim(tmp_path, files):
    stored = [(f"qa-00{n}", "STORED SYSTEM PROMPT", f"STORED USER TURN {n}") for n in (1, 2, 3)]
    manifest = _manifest(tmp_path / "specialist_turn.caption.jsonl", stored)
    config = _config(tmp_path, files, board=None, prompts="released", turn_manifest=manifest)
    provider = FakeProvider(lambda r: json.dumps({"answer": "Yes."}))
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        generate_otb(config, client=client)
    sent = sorted((r.messages[0].content, r.messages[1].content) for r in provider.requests)
    assert sent == sorted((s, u) for _, s, u in stored)
    rows = read_responses(OtbFolder(config.run_dir).responses("turn", "model-a"))
    assert {r["prompt_version"] for r in rows} == {"released_caption_v1"}


def test_released_prompts_need_a_manifest_holding_every_item(tmp_path, files):
    from evolve.errors import ConfigError, DataError

    with pytest.raises(ConfigError, match="give --turn-manifest"):
        _config(tmp_path, files, board=None, prompts="released")
    partial = _manifest(tmp_path / "m.jsonl", [("qa-001", "S", "U")])
    config = _config(tmp_path, files, board=None, prompts="released", turn_manifest=partial)
    with Client(FakeProvider(lambda r: "{}"), cache=ResponseCache(":memory:")) as client:
        with pytest.raises(DataError, match=r"no stored prompt for 2 turn item\(s\) of the run, e.g. \['qa-002', 'qa-003'\]"):
            generate_otb(config, client=client)
    assert not config.run_dir.exists()  # refused before anything was written
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"format": "sharegpt", "id": "x", "conversations": [
        {"from": "human", "value": "u"}, {"from": "system", "value": "s"}]}) + "\n")
    with pytest.raises(DataError, match="bad.jsonl line 1: the conversation does not open with a system turn"):
        from evolve.otb import load_manifest

        load_manifest(bad)
