"""`evolve rubric new` and `evolve rubric check`: a rubric of one's own from the command line, then used by a pack."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.data import Case, PackManifest, Rating, RatingPack, RubricRef, Target, load_pack, write_pack
from evolve.errors import PackError
from evolve.rubric import RubricBundle, load_rubric

runner = CliRunner()


def _new(tmp_path: Path, *extra: str):
    return runner.invoke(app, ["rubric", "new", "mine", "--criterion", "accuracy", "--scale", "0-3", "--criterion",
                               "errors", "--scale", "0-2", "--lower-is-better", "errors", "--out", str(tmp_path / "jp"),
                               *extra])


def _pack(score: int) -> RatingPack:
    case = Case(case_id="c1", title="Question", text="What is the dose?")
    target = Target(target_id="t1", case_id="c1", component="answer", text="Take 1 g.")
    ratings = (Rating(case_id="c1", target_id="t1", rater_id="r1", criterion="accuracy", score=score),
               Rating(case_id="c1", target_id="t1", rater_id="r1", criterion="errors", score=0))
    return RatingPack(path=None, manifest=PackManifest(name="mine", description="test", rubric=RubricRef(id="mine", version="1")),
                      cases=(case,), targets=(target,), ratings=ratings)


def test_new_then_check_then_a_pack_rated_on_it(tmp_path: Path):
    result = _new(tmp_path, "--title", "Mine", "--name", "Accuracy of facts", "--name", "Errors")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "jp" / "mine"
    assert f"wrote {folder}/" in result.stdout
    assert f"evolve rubric check {folder}" in result.stdout and f"--prompts-root {tmp_path / 'jp'}" in result.stdout
    assert f"export EVOLVE_PROMPTS_ROOT={(tmp_path / 'jp').resolve()}" in result.stdout
    rubric = load_rubric("mine", root=tmp_path / "jp")
    assert rubric.title == "Mine" and rubric.criterion("accuracy").name == "Accuracy of facts"
    assert rubric.criterion("errors").higher_is_better is False

    checked = runner.invoke(app, ["rubric", "check", str(folder)])
    assert checked.exit_code == 0, checked.output
    assert "rubric mine version 1: Mine" in checked.stdout
    assert "accuracy: 0-3, higher is better, on answer; 1 initial guidance" in checked.stdout
    assert "errors: 0-2, lower is better" in checked.stdout
    assert "still hold \"Replace this\"" in checked.stderr and "rubric.json: criteria[accuracy].anchors.3" in checked.stderr
    by_id = runner.invoke(app, ["rubric", "check", "mine", "--prompts-root", str(tmp_path / "jp")])
    assert by_id.exit_code == 0, by_id.output
    assert by_id.stdout.splitlines()[:5] == checked.stdout.splitlines()[:5]

    write_pack(_pack(3), tmp_path / "pack")
    assert len(load_pack(tmp_path / "pack", prompts_root=tmp_path / "jp").ratings) == 2
    write_pack(_pack(4), tmp_path / "bad-pack")  # off the scaffolded 0-3 scale
    with pytest.raises(PackError, match="score"):
        load_pack(tmp_path / "bad-pack", prompts_root=tmp_path / "jp")


def test_new_single_scale_applies_to_every_criterion_and_components(tmp_path: Path):
    result = runner.invoke(app, ["rubric", "new", "two", "--criterion", "a", "--criterion", "b", "--scale", "1-5",
                                 "--component", "summary", "--component", "answer", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rubric = load_rubric("two", root=tmp_path)
    assert [(c.scale_min, c.scale_max, c.components) for c in rubric.criteria] == [(1, 5, ("summary", "answer"))] * 2


@pytest.mark.parametrize(("args", "message"), [
    (["bad id", "--criterion", "a", "--scale", "0-3"], "rubric id 'bad id'"),
    (["mine", "--criterion", "a", "--scale", "3-0"], "lowest score must be below"),
    (["mine", "--criterion", "a", "--scale", "a-b"], "LO-HI with two integers"),
    (["mine", "--criterion", "a", "--scale", "0-3", "--criterion", "a", "--scale", "0-3"], "'a' is given twice"),
    (["mine", "--criterion", "a", "--criterion", "b", "--criterion", "c", "--scale", "0-3", "--scale", "0-3"],
     "3 --criterion but 2 --scale"),
])
def test_new_refuses_bad_input_and_writes_nothing(tmp_path: Path, args: list[str], message: str):
    result = runner.invoke(app, ["rubric", "new", *args, "--out", str(tmp_path / "jp")])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "jp").exists()


def test_new_refuses_to_replace_an_edited_rubric_unless_overwrite(tmp_path: Path):
    assert _new(tmp_path).exit_code == 0
    protocol = tmp_path / "jp" / "mine" / "protocol.md"
    protocol.write_text("You are a physician.\n")
    again = _new(tmp_path)
    assert again.exit_code == 2 and "--overwrite" in again.output
    assert protocol.read_text() == "You are a physician.\n"
    assert _new(tmp_path, "--overwrite").exit_code == 0
    assert "Replace this" in protocol.read_text()


@pytest.mark.parametrize("rubric_id", ["consilium", "kqa-entailment", "otb", "savage-rationale-errors"])
def test_check_shipped_rubrics_by_id(rubric_id: str):
    result = runner.invoke(app, ["rubric", "check", rubric_id])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"rubric {rubric_id} version ")
    assert "Replace this" not in result.output
    bundle = RubricBundle.load(rubric_id)
    assert f"criteria: {len(bundle.rubric.criteria)}" in result.stdout


def test_check_errors_name_the_file(tmp_path: Path):
    assert _new(tmp_path).exit_code == 0
    (tmp_path / "jp" / "mine" / "rubric.json").write_text('{"id": "mine",')
    result = runner.invoke(app, ["rubric", "check", str(tmp_path / "jp" / "mine")])
    assert result.exit_code == 2 and "rubric.json" in result.output and "invalid JSON" in result.output
    empty = runner.invoke(app, ["rubric", "check", str(tmp_path)])
    assert empty.exit_code == 2 and "no rubric.json here" in empty.output
    unknown = runner.invoke(app, ["rubric", "check", "no-such-rubric", "--prompts-root", str(tmp_path / "jp")])
    assert unknown.exit_code == 2 and "no rubric 'no-such-rubric'" in unknown.output and "Traceback" not in unknown.output
