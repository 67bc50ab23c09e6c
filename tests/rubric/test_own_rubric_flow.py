"""A rubric of one's own used end to end from the command line: `rubric new`, its texts edited,
`rubric check`, `ratings import table` against it, `ratings check` and `splits make`, all with --prompts-root."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from evolve.cli import app

runner = CliRunner()


def _invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def _edit(folder: Path) -> None:
    """What a person does after `rubric new`: replace every placeholder text."""
    doc = json.loads((folder / "rubric.json").read_text(encoding="utf-8"))
    doc["title"] = "Accuracy of short answers"
    doc["components"]["answer"] = "A short answer to a question."
    crit = doc["criteria"][0]
    crit["definition"] = "Are the answer's facts right?"
    crit["anchors"] = {"0": "Mostly wrong.", "1": "Some errors.", "2": "Minor slips.", "3": "All facts right."}
    (folder / "rubric.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    (folder / "protocol.md").write_text("You are a physician grading short answers.\n", encoding="utf-8")
    (folder / "guidance" / "accuracy" / "initial_1.md").write_text("Check each number and drug name.\n", encoding="utf-8")


def test_new_rubric_to_pack_to_splits(tmp_path: Path):
    root = tmp_path / "judge_prompts"
    _invoke("rubric", "new", "mine", "--criterion", "accuracy", "--scale", "0-3", "--out", str(root))
    _edit(root / "mine")
    checked = _invoke("rubric", "check", "mine", "--prompts-root", str(root))
    assert "Replace this" not in checked.output and "(with placeholder texts)" not in checked.output

    rows = ["case_id,case_text,target_id,target_text,rater_id,criterion,score"]
    for i in range(12):
        rows += [f"c{i},Question {i}?,t{i},Answer {i}.,r1,accuracy,{i % 4}",
                 f"c{i},Question {i}?,t{i},Answer {i}.,r2,accuracy,{'Unsure' if i == 5 else (i + 1) % 4}"]
    table = tmp_path / "ratings.csv"
    table.write_text("\n".join(rows) + "\n", encoding="utf-8")
    pack = tmp_path / "ratings" / "mine"
    _invoke("ratings", "import", "table", str(table), "--rubric", "mine", "--not-evaluable", "Unsure",
            "--prompts-root", str(root), "--out", str(pack))
    summary = json.loads(_invoke("ratings", "check", str(pack), "--prompts-root", str(root)).stdout)
    assert summary["rubric"] == {"id": "mine", "version": "1"}
    assert (summary["n_cases"], summary["n_ratings"], summary["n_not_evaluable"]) == (12, 24, 1)
    _invoke("splits", "make", str(pack), "--prompts-root", str(root), "--out", str(tmp_path / "splits"))
    assert (tmp_path / "splits").is_dir()

    unknown = runner.invoke(app, ["ratings", "check", str(pack)])  # without the prompts root: the rubric is not found
    assert unknown.exit_code == 2 and "no rubric 'mine'" in unknown.output
