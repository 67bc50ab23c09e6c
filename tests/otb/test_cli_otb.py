"""`evolve otb run / judge / report` through the CLI against a scripted OpenAI-compatible server
on 127.0.0.1, on the shipped INVENTED example records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.testing import LoopbackChatServer
from tests.report.test_html_reports import decoded_images, parse

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "ratings" / "otb-example"


def respond(body: dict) -> str:
    fmt = body.get("response_format")
    name = fmt["json_schema"]["name"] if fmt else ""
    if name == "conclusion_alignment":
        return json.dumps({"conclusion_alignment": {"score": 3, "rationale": "partly"}})
    if name == "four_decisions":
        return json.dumps({"therapy": 4, "surgery": -1, "next_action": 3, "clinical_trial": -1, "rationale": "r"})
    if name == "clinical_equivalence":
        return json.dumps({"clinical_equivalence_score": 4, "critical_error": False, "unsupported_claim": True,
                           "rationale": "close"})
    system = body["messages"][0]["content"]
    if "tumor board and write down the whole meeting" in system:
        return ("<discussion>\n<turn 1> Surgeon: Operate later.\n<turn 2> Medical oncologist: Treat first.\n</discussion>\n"
                "<conclusion>The board chose systemic treatment first. Surgery is reconsidered at restaging.</conclusion>")
    return json.dumps({"answer": "Treat first, then reassess."})


@pytest.fixture
def endpoint():
    server = LoopbackChatServer(respond)
    yield server
    server.close()


@pytest.mark.full_report  # checks the figures of report.html
def test_otb_run_judge_report_end_to_end_and_a_second_run_is_free(tmp_path, endpoint):
    args = ["otb", "run", "--board", str(EXAMPLE / "task1_example.jsonl"), "--turn", str(EXAMPLE / "task2_example.jsonl"),
            "--base-url", endpoint.base_url, "--model", "scripted", "--max-items", "10", "--run-id", "ex",
            "--archives-dir", str(tmp_path / "archives")]
    env = {"EVOLVE_CACHE_DIR": str(tmp_path / "cache")}
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    run = tmp_path / "archives" / "ex"
    assert "board scripted: 3 answered, 0 reused, 0 malformed" in result.stdout
    assert ("turn scripted: clinical equivalence 4.00 [4.00, 4.00] over 4 of 4 items (0 malformed, scored 1 as released; "
            "0 judge failures left out)") in result.stdout
    md = (run / "otb_report.md").read_text()
    assert "## Board Simulation (Table A3 layout)" in md and "computed with wordllama" in md
    assert "deberta-xlarge-mnli" in md  # nobody mistakes the stand-in for the paper's BERTScore
    assert "| scripted | 4 | 4 | 4.00 [4.00, 4.00] | 0 | 0 | 0.0% [0.0, 0.0] | 100.0% [100.0, 100.0] |" in md
    assert (run / "board" / "scripted" / "responses.jsonl").is_file() and (run / "turn" / "scripted" / "summary.json").is_file()
    page = parse(run / "report.html")  # one figure per task, then the same tables
    assert len(decoded_images(page)) == 2 and page.tables == md.count("\n|---") + md.startswith("|---")
    calls = sum("messages" in b for b in endpoint.bodies)
    assert calls == 3 + 4 + 3 * 2 + 4  # generation, then alignment + decisions per board answer, equivalence per turn
    again = runner.invoke(app, ["otb", "judge", str(run)], env=env)
    assert again.exit_code == 0 and sum("messages" in b for b in endpoint.bodies) == calls
    assert "10 judge calls (10 from the cache, 0 judge failures)" in again.stdout
    report = runner.invoke(app, ["otb", "report", str(run), "--n-boot", "50"])
    assert report.exit_code == 0 and "board scripted: conclusion alignment 3.00" in report.stdout


def test_bad_input_is_one_error_naming_the_file_and_nothing_is_written(tmp_path):
    bad = tmp_path / "task2_bad.jsonl"
    bad.write_text('{"qa_id": "x"}\n')
    result = runner.invoke(app, ["otb", "run", "--turn", str(bad), "--archives-dir", str(tmp_path / "archives")])
    assert result.exit_code == 2 and "task2_bad.jsonl line 1 field 'case_id'" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "archives").exists()
    none = runner.invoke(app, ["otb", "run", "--archives-dir", str(tmp_path / "archives")])
    assert none.exit_code == 2 and "--board task1_*.jsonl" in none.output


def test_a_generating_model_that_also_judges_is_warned_about(tmp_path) -> None:
    """With several --model and no --judge-model the first model judges every model's outputs,
    its own included: said before anything is sent (here a plan, which sends nothing)."""
    args = ["otb", "run", "--board", str(EXAMPLE / "task1_example.jsonl"), "--model", "a", "--model", "c",
            "--base-url", "http://127.0.0.1:9/v1", "--max-items", "1", "--archives-dir", str(tmp_path), "--plan"]
    said = " ".join(CliRunner().invoke(app, args).output.split())
    assert "warning: the judge model 'a' is also one of the generating models (a, c)" in said
    other = CliRunner().invoke(app, [*args, "--judge-model", "j"])
    assert other.exit_code == 0 and "judge model" not in other.output.split("Plan of")[0]
