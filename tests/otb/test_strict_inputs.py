"""OpenTumorBoard inputs read strictly (issue 23, items 3-5), on INVENTED records and answers:

* extraction: JSON inside prose, JSON that is no object, reasoning returned apart by the provider,
  and a declared reasoning model whose output has no answer boundary;
* record files: wrong JSON types, blank required text and unknown enumerations are named errors,
  all of every file together, before anything is written or asked;
* ``--prompts released``: each stored prompt is verified against its ``messages_sha256``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from evolve.errors import DataError
from evolve.llm import ChatRequest, ChatResponse, Client, ResponseCache
from evolve.otb import extract_board, extract_turn, generate_otb, load_board_cases, load_turn_questions, read_responses
from evolve.runs import OtbFolder
from evolve.testing import FakeProvider
from tests.otb.test_records_extract import BOARD, TURN, _write
from tests.otb.test_run_judge import _config

# --- item 3: extraction ---------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "status", "text"), [
    ('Here is my answer: {"answer": "Start FOLFIRINOX."} I hope this helps.', "parsed_after_cleanup", "Start FOLFIRINOX."),
    ('{"answer": "Restage first."}\nLet me know if you need more.', "parsed_after_cleanup", "Restage first."),
    ('Answer:\n```json\n{"answer": "Yes."}\n```\nThat is all.', "parsed_after_cleanup", "Yes."),
    ('Same twice: {"answer": "Yes."} and again {"answer": "Yes."}', "parsed_after_cleanup", "Yes."),
    ('Sure: {"answer": "Yes, start chemo', "parsed_with_warnings", "Yes, start chemo"),  # a truncated wrapper after prose
    ("The dose {per protocol} stays.", "raw_fallback", "The dose {per protocol} stays."),  # braces, no JSON: prose
])
def test_prose_around_a_json_answer_is_not_the_answer(raw, status, text):
    e = extract_turn(raw)
    assert (e.parse_status, e.text, e.error) == (status, text, "")


@pytest.mark.parametrize(("raw", "error"), [
    ('["Yes, start chemotherapy."]', "an array in JSON"),
    ('[{"answer": "Yes."}]', "an array in JSON"),
    ('"Yes, start chemotherapy."', "a string in JSON"),
    ("null", "null in JSON"),
    ('Here it is: {"response": "Yes."}', "without a string 'answer'"),
    ('First {"answer": "Yes."} then {"answer": "No."}', "give different answers"),
    ('{"answer": 3}', "without a string 'answer'"),
    ("{answer: yes", "broken JSON"),
])
def test_json_that_is_no_answer_object_is_a_format_failure(raw, error):
    e = extract_turn(raw)
    assert e.malformed and error in e.error, e


def test_answers_after_the_boundary_in_released_order():
    # a "Final Answer" heading is looked for before </think> (released order); text may follow on its line
    assert extract_turn('<think>x</think> draft\n## Final Answer: {"answer": "B."}').text == "B."
    assert extract_turn('reasoning [/think] {"answer": "C."}').text == "C."
    assert extract_turn("## Final Answer\n").malformed  # an empty final answer


def test_a_conclusion_line_is_read_to_the_end_in_its_released_spellings():
    for label in ("Conclusion:", "**Conclusion:**", "**Conclusion**:", "## Conclusion:"):
        e = extract_board(f"We discussed.\n{label} Chemotherapy first.\n\nRestage after three cycles.")
        assert (e.text, e.parse_status) == ("Chemotherapy first.\n\nRestage after three cycles.", "raw_fallback"), label
    assert extract_board("<discussion>\n<turn 1> Surgeon: x.\n</discussion>\n< conclusion >A. B.< /conclusion >").text == "A. B."


UNFINISHED = "Let me weigh the options. The mass abuts the SMV, so resection would be"


def test_a_declared_reasoning_model_without_an_answer_boundary_is_a_format_failure():
    # an ordinary model's text is its answer; a reasoning model's is unfinished reasoning
    assert extract_turn(UNFINISHED).text == UNFINISHED
    e = extract_turn(UNFINISHED, reasoning_mode=True)
    assert e.malformed and "no answer boundary" in e.error
    assert extract_board(UNFINISHED + "\nConclusion: Resect. Then restage.", reasoning_mode=True).malformed
    # a boundary, or reasoning returned apart, makes the rest the answer
    assert extract_turn(UNFINISHED + '</think>{"answer": "Resect."}', reasoning_mode=True).text == "Resect."
    assert extract_turn('{"answer": "Resect."}', reasoning=UNFINISHED, reasoning_mode=True).text == "Resect."
    assert extract_turn("", reasoning=UNFINISHED, reasoning_mode=True).malformed  # reasoning only: no answer
    # a direct answer in exactly the asked format is taken (the released code does the same)
    assert extract_turn('{"answer": "Resect."}', reasoning_mode=True).text == "Resect."
    assert extract_turn('{"answer": "Resect.", "why": "x"}', reasoning_mode=True).malformed
    direct = "<discussion>\n<turn 1> Surgeon: Resect.\n</discussion>\n<conclusion>Resect. Then restage.</conclusion>"
    assert extract_board(direct, reasoning_mode=True).text == "Resect. Then restage."


def test_the_openai_compatible_provider_carries_separated_reasoning():
    from evolve.llm import OpenAICompatibleProvider
    from evolve.testing import LoopbackChatServer, chat_completion

    def respond(body: dict):
        payload = chat_completion('{"answer": "Yes."}')
        payload["choices"][0]["message"]["reasoning_content"] = "First I compare the staging."
        return 200, payload

    with LoopbackChatServer(respond) as server:
        with Client(OpenAICompatibleProvider(base_url=server.base_url), cache=ResponseCache(":memory:")) as client:
            (res,) = client.map([ChatRequest(model="m", messages=({"role": "user", "content": "q"},))])
    assert isinstance(res, ChatResponse) and res.reasoning == "First I compare the staging." and res.text == '{"answer": "Yes."}'


def test_generation_records_separated_reasoning_and_fails_unfinished_reasoning(tmp_path):
    turns = [TURN, {**TURN, "qa_id": "qa-002", "question": "INVENTED unfinished?"}]
    files = (None, _write(tmp_path / "task2_test.jsonl", turns))

    def answer(request: ChatRequest) -> ChatResponse:
        if "unfinished" in request.messages[-1].content:
            return ChatResponse(text=UNFINISHED)
        return ChatResponse(text='{"answer": "Yes."}', reasoning="The staging suggests chemotherapy.")

    config = _config(tmp_path, files, board=None, models=("model-r",), reasoning_models=("model-r",))
    with Client(FakeProvider(answer), cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        counts = generate_otb(config, client=client)
    rows = {r["qa_id"]: r for r in read_responses(OtbFolder(config.run_dir).responses("turn", "model-r"))}
    assert rows["qa-001"]["raw_reasoning_content"] == "The staging suggests chemotherapy."
    assert rows["qa-001"]["extracted_final_response"] == "Yes." and rows["qa-001"]["response_mode"] == "reasoning_final"
    assert rows["qa-002"]["malformed"] and "no answer boundary" in rows["qa-002"]["error"]
    assert rows["qa-002"]["raw_reasoning_content"] is None and counts[("turn", "model-r")].malformed == 1


def test_reasoning_models_must_be_models_of_the_run(tmp_path):
    from evolve.errors import ConfigError

    with pytest.raises(ConfigError, match="reasoning_models names \\['other'\\]"):
        _config(tmp_path, (tmp_path / "a.jsonl", tmp_path / "b.jsonl"), reasoning_models=("other",))


# --- item 4: record files -------------------------------------------------------------------


def test_wrong_types_blank_text_and_unknown_enumerations_are_named_together(tmp_path):
    bad = [
        {**TURN, "qa_index": "3"},                                            # line 1: a string for an integer
        {**TURN, "qa_id": "qa-2", "reference_answer": "  \n "},               # line 2: whitespace only
        {**TURN, "qa_id": "qa-3", "qa_type": "prognosis"},                    # line 3: unknown question type
        {**TURN, "qa_id": "qa-4", "target_specialist_role": "Medical Oncologist"},  # line 4: not the released spelling
        {**TURN, "qa_id": "qa-5", "target_specialist_role": "moderator"},     # line 5: never a target
        {**TURN, "qa_id": "qa-6", "qa_type_candidates": ["uncertainty", "staging"], "schema_version": True},  # line 6
    ]
    path = _write(tmp_path / "task2_test.jsonl", bad)
    with pytest.raises(DataError) as err:
        load_turn_questions(path)
    msg = str(err.value)
    assert "task2_test.jsonl line 1 field 'qa_index': Input should be a valid integer" in msg
    assert "not '3': values are read as written, never converted" in msg
    assert "line 2 field 'reference_answer': is blank (whitespace only)" in msg
    assert "line 3 field 'qa_type': 'prognosis' is not a released question type. Use one of clarification_question" in msg
    assert "line 4 field 'target_specialist_role': 'Medical Oncologist' is not a released target role" in msg
    assert "line 5 field 'target_specialist_role': 'moderator': the moderator is never a target" in msg
    assert "line 6 field 'qa_type_candidates.1': 'staging'" in msg and "line 6 field 'schema_version'" in msg
    board = _write(tmp_path / "task1_test.jsonl", [{**BOARD, "reference_conclusion": "   "},
                                                   {**BOARD, "simulation_id": "sim-2", "case_start_sec": "12.0"}])
    with pytest.raises(DataError) as err:
        load_board_cases(board)
    assert "line 1 field 'reference_conclusion': is blank" in str(err.value)
    assert "line 2 field 'case_start_sec': Input should be a valid number" in str(err.value)


def test_a_run_lists_the_problems_of_every_file_and_asks_nothing(tmp_path):
    files = (_write(tmp_path / "task1_test.jsonl", [{**BOARD, "case_summary": " "}]),
             _write(tmp_path / "task2_test.jsonl", [{**TURN, "qa_type": "other"}]))
    provider = FakeProvider(lambda r: "never asked")
    config = _config(tmp_path, files)
    with Client(provider, cache=ResponseCache(":memory:")) as client, pytest.raises(DataError) as err:
        generate_otb(config, client=client)
    msg = str(err.value)
    assert "task1_test.jsonl line 1 field 'case_summary'" in msg and "task2_test.jsonl line 1 field 'qa_type'" in msg
    assert provider.calls == 0 and not config.run_dir.exists()


# --- item 5: released prompts verified ------------------------------------------------------

SYSTEM = "INVENTED system prompt: answer as the named specialist, in JSON."


def _canonical(system: str, user: str) -> bytes:
    """The released recipe, spelled out by hand: the two turns as chat messages, keys sorted, no
    spaces, UTF-8 as is (independent of the implementation's json.dumps call)."""
    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return (f'[{{"content":"{esc(system)}","role":"system"}},{{"content":"{esc(user)}","role":"user"}}]').encode()


def _entry(qa_id: str, user: str, *, sha: str | None = None) -> dict:
    return {"schema_version": 1, "format": "sharegpt", "id": qa_id, "prompt_version": "specialist_turn_caption",
            "metadata": {"qa_id": qa_id}, "conversations": [{"from": "system", "value": SYSTEM}, {"from": "human", "value": user}],
            "messages_sha256": sha or hashlib.sha256(_canonical(SYSTEM, user)).hexdigest()}


def test_the_hash_recipe_reproduces_invented_manifests():
    from evolve.otb import messages_sha256

    user = "TARGET SPECIALIST ROLE:\nsurgeon\n\nCASE SUMMARY:\nINVENTED: Müller-type lesion, 3 cm.\n\nQUESTION:\nResect?"
    assert messages_sha256(SYSTEM, user) == hashlib.sha256(_canonical(SYSTEM, user)).hexdigest()
    # the other plausible forms give other hashes: ASCII escapes, ShareGPT keys, spaces
    assert "ü" in _canonical(SYSTEM, user).decode()
    other = json.dumps([{"from": "system", "value": SYSTEM}, {"from": "human", "value": user}], sort_keys=True, separators=(",", ":"))
    assert messages_sha256(SYSTEM, user) != hashlib.sha256(other.encode()).hexdigest()


def test_a_changed_stored_prompt_is_refused_before_any_call(tmp_path):
    turns = [TURN, {**TURN, "qa_id": "qa-002"}, {**TURN, "qa_id": "qa-003"}]
    files = (None, _write(tmp_path / "task2_test.jsonl", turns))
    entries = [_entry("qa-001", "USER 1"), _entry("qa-002", "USER 2 - Ü"), _entry("qa-003", "USER 3")]
    good = _write(tmp_path / "specialist_turn.caption.jsonl", entries)
    provider = FakeProvider(lambda r: json.dumps({"answer": "Yes."}))
    config = _config(tmp_path, files, board=None, prompts="released", turn_manifest=good)
    with Client(provider, cache=ResponseCache(":memory:")) as client:
        generate_otb(config, client=client)
    assert sorted(r.messages[1].content for r in provider.requests) == ["USER 1", "USER 2 - Ü", "USER 3"]
    # a human turn edited by hand after release (its hash kept), and a system turn of another prompt
    edited = [entries[0], {**entries[1], "conversations": [entries[1]["conversations"][0], {"from": "human", "value": "USER 2 - edited"}]},
              {**entries[2], "conversations": [{"from": "system", "value": SYSTEM + " "}, entries[2]["conversations"][1]]}]
    bad = _write(tmp_path / "edited.caption.jsonl", edited)
    provider = FakeProvider(lambda r: json.dumps({"answer": "Yes."}))
    config = _config(tmp_path, files, board=None, prompts="released", turn_manifest=bad, run_id="otb-edited")
    with Client(provider, cache=ResponseCache(":memory:")) as client, pytest.raises(DataError) as err:
        generate_otb(config, client=client)
    msg = str(err.value)
    assert "edited.caption.jsonl line 2 id 'qa-002' field 'messages_sha256'" in msg
    assert "edited.caption.jsonl line 3 id 'qa-003' field 'messages_sha256'" in msg and "line 1 " not in msg
    assert provider.calls == 0 and not config.run_dir.exists()


def test_the_cli_declares_reasoning_models(tmp_path):
    from typer.testing import CliRunner

    from evolve.cli import app
    from evolve.testing import LoopbackChatServer

    example = Path(__file__).resolve().parents[2] / "ratings" / "otb-example" / "task2_example.jsonl"
    args = ["otb", "run", "--turn", str(example), "--model", "thinker", "--reasoning-model", "thinker", "--no-judge",
            "--run-id", "r", "--archives-dir", str(tmp_path / "archives")]
    with LoopbackChatServer(lambda body: UNFINISHED) as server:
        result = CliRunner().invoke(app, [*args, "--base-url", server.base_url], env={"EVOLVE_CACHE_DIR": str(tmp_path / "c")})
        assert result.exit_code == 0, result.output
        assert "turn thinker: 2 answered, 0 reused, 2 malformed" in result.stdout  # unfinished reasoning: not an answer
        stranger = CliRunner().invoke(app, [*args, "--reasoning-model", "other", "--run-id", "r2", "--base-url", server.base_url])
    assert stranger.exit_code == 2 and "reasoning_models names ['other']" in stranger.output
    assert not (tmp_path / "archives" / "r2").exists()
    config = json.loads((tmp_path / "archives" / "r" / "run_config.json").read_text())
    assert config["reasoning_models"] == ["thinker"]
