"""An OpenTumorBoard run in which judging scored nothing (every judge reply outside its schema)
still ends normally: every report file written, the counts adding up, a sentence where the
figure would be, and failure reasons that name the field, its value and the rule on one line.
Before: ``ValueError: cannot write empty image`` from the figure grid, as a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.report import write_otb_report
from evolve.testing import LoopbackChatServer
from tests.report.test_html_reports import decoded_images, parse

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "ratings" / "otb-example"
BAD = "NO-SCORE"
"""An answer containing this gets judge replies outside the schema."""


def respond(body: dict) -> str:
    """Generation: a good answer, or (model ``bad``) one the judge then fails on; judging: valid
    replies, except for answers holding :data:`BAD` (alignment 0, therapy 0, a string flag)."""
    fmt = body.get("response_format")
    name = fmt["json_schema"]["name"] if fmt else ""
    bad = BAD in body["messages"][-1]["content"]
    if name == "conclusion_alignment":
        return json.dumps({"conclusion_alignment": {"score": 0 if bad else 3, "rationale": "partly"}})
    if name == "four_decisions":
        return json.dumps({"therapy": 0 if bad else 4, "surgery": -1, "next_action": 3, "clinical_trial": -1, "rationale": "r"})
    if name == "clinical_equivalence":
        return json.dumps({"clinical_equivalence_score": 4, "critical_error": "false" if bad else False,
                           "unsupported_claim": True, "rationale": "close"})
    tag = BAD if body["model"] == "bad" else "fine"
    if "tumor board and write down the whole meeting" in body["messages"][0]["content"]:
        return f"<discussion>\n<turn 1> Surgeon: Operate later.\n</discussion>\n<conclusion>Systemic treatment first ({tag}).</conclusion>"
    return json.dumps({"answer": f"Treat first, then reassess ({tag})."})


@pytest.fixture
def endpoint():
    server = LoopbackChatServer(respond)
    yield server
    server.close()


def _run(tmp_path: Path, endpoint, *models: str, max_items: int = 10):
    args = ["otb", "run", "--board", str(EXAMPLE / "task1_example.jsonl"), "--turn", str(EXAMPLE / "task2_example.jsonl"),
            "--base-url", endpoint.base_url, "--max-items", str(max_items), "--run-id", "r",
            "--archives-dir", str(tmp_path / "archives")]
    for m in models:
        args += ["--model", m]
    return runner.invoke(app, args, env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")}), tmp_path / "archives" / "r"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


@pytest.mark.full_report  # checks the figures of report.html
def test_a_run_whose_every_judge_reply_fails_writes_every_report_file(tmp_path, endpoint):
    result, run = _run(tmp_path, endpoint, "bad")
    assert result.exit_code == 0, result.output
    assert result.exception is None
    for name in ("otb_report.md", "otb_report.json", "otb_table.csv", "report.html", "judge_scores.jsonl", "metrics.csv"):
        assert (run / name).is_file(), name
    assert "board bad: conclusion alignment: no scored item of 3 items (0 malformed, scored 1 as released; 3 judge failures left out)" in result.stdout
    assert "turn bad: clinical equivalence: no scored item of 4 items (0 malformed, scored 1 as released; 4 judge failures left out)" in result.stdout
    assert "turn bad: every judge call failed; the reasons are in" in result.stderr
    for task, n in (("board", 3), ("turn", 4)):
        s = json.loads((run / task / "bad" / "summary.json").read_text("utf-8"))
        assert (s["items"], s["scored"], s["format_failures"], s["judge_failures"]) == (n, 0, 0, n)
        assert s["items"] == s["scored"] + s["format_failures"] + s["judge_failures"] and s["mean"] is None
    page = parse(run / "report.html")
    assert decoded_images(page) == []  # no figure of nothing ...
    text = (run / "report.html").read_text("utf-8")
    assert "board: no figure, no model has a scored item - bad (no scored item: 3 judge failures of 3 items)" in text
    assert "turn: no figure" in text and page.tables > 0  # ... and the tables are all there
    again = runner.invoke(app, ["otb", "report", str(run), "--n-boot", "50"])
    assert again.exit_code == 0 and again.exception is None, again.output


def test_failure_reasons_name_the_field_the_value_and_the_rule_on_one_line(tmp_path, endpoint):
    _, run = _run(tmp_path, endpoint, "bad")
    errors = {(s["rubric"], s["error"]) for s in _lines(run / "judge_scores.jsonl")}
    assert errors == {
        ("conclusion_alignment", "reply does not fit the conclusion_alignment schema: conclusion_alignment.score: 0 is "
                                 "below the minimum 1"),
        ("four_decisions", "reply does not fit the four_decisions schema: therapy: 0 is not one of -1, 1, 2, 3, 4 or 5"),
        ("clinical_equivalence", 'reply does not fit the clinical_equivalence schema: critical_error: "false" is not a '
                                 "boolean (true or false)"),
    }


@pytest.mark.full_report  # checks the figures of report.html
def test_a_model_with_no_scored_item_is_named_beside_the_figure_of_the_others(tmp_path, endpoint):
    result, run = _run(tmp_path, endpoint, "good", "bad")
    assert result.exit_code == 0, result.output
    page = parse(run / "report.html")
    assert len(decoded_images(page)) == 2  # one figure per task, over the model that has scores
    text = (run / "report.html").read_text("utf-8")
    assert "not drawn: bad (no scored item: 4 judge failures of 4 items)" in text
    rows = {(r["task"], r["model"]): r for r in json.loads((run / "otb_report.json").read_text("utf-8"))["tables"]["main"]}
    assert rows[("turn", "good")]["scored"] == 4 and rows[("turn", "bad")]["mean"] is None


def test_counts_of_one_are_singular(tmp_path, endpoint):
    result, run = _run(tmp_path, endpoint, "bad", max_items=1)
    assert result.exit_code == 0, result.output
    assert "turn bad: clinical equivalence: no scored item of 1 item (0 malformed, scored 1 as released; 1 judge failure left out)" in result.stdout
    judged = runner.invoke(app, ["otb", "judge", str(run)], env={"EVOLVE_CACHE_DIR": str(tmp_path / "cache")})
    assert judged.exit_code == 0, judged.output
    assert "3 judge calls (0 from the cache, 3 judge failures)" in judged.stdout  # failures are never cached


def test_the_python_report_writer_needs_no_scored_item(tmp_path, endpoint):
    _, run = _run(tmp_path, endpoint, "bad")
    (run / "report.html").unlink()
    report = write_otb_report(run, n_boot=20)
    assert (run / "report.html").is_file()
    assert all(r.scored == 0 and r.mean is None for r in report.tables.main)
