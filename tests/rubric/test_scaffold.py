"""scaffold_rubric, criterion_specs and check_rubric_folder: a rubric of one's own, from nothing to checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.errors import RubricError
from evolve.rubric import (
    MAX_GUIDANCE_CHARS,
    PLACEHOLDER,
    CriterionSpec,
    RubricBundle,
    check_rubric_folder,
    criterion_specs,
    load_rubric,
    parse_scale,
    rubric_summary,
    scaffold_rubric,
    unedited_placeholders,
)


def _specs() -> list[CriterionSpec]:
    return [CriterionSpec("accuracy", 0, 3), CriterionSpec("errors", 0, 2, higher_is_better=False, name="Error count")]


def test_scaffold_is_valid_and_loads_back_equal(tmp_path: Path):
    bundle = scaffold_rubric("mine", _specs(), title="Mine")
    folder = bundle.write(tmp_path)
    assert RubricBundle.load("mine", root=tmp_path) == bundle
    rubric = load_rubric("mine", root=tmp_path)
    assert [(c.criterion_id, c.scale_min, c.scale_max, c.higher_is_better) for c in rubric.criteria] == [
        ("accuracy", 0, 3, True), ("errors", 0, 2, False)]
    assert rubric.title == "Mine" and list(rubric.components) == ["answer"]
    assert rubric.criterion("errors").name == "Error count" and rubric.criterion("accuracy").name == "Accuracy"
    assert check_rubric_folder(folder) == bundle
    assert sorted(bundle.files()) == ["guidance/accuracy/initial_1.md", "guidance/errors/initial_1.md",
                                      "protocol.md", "rubric.json"]


def test_scaffold_placeholders_say_what_to_replace():
    bundle = scaffold_rubric("mine", _specs())
    errors = bundle.rubric.criterion("errors")
    assert errors.anchors["0"] == f"{PLACEHOLDER}: describe what a score of 0 (the best score) means for 'errors'."
    assert "(the worst score)" in errors.anchors["2"]
    assert "(the best score)" in bundle.rubric.criterion("accuracy").anchors["3"]
    assert all(len(text) <= MAX_GUIDANCE_CHARS for pairs in bundle.guidance.values() for _, text in pairs)
    places = unedited_placeholders(bundle)
    assert places[0] == "rubric.json: title"
    assert "rubric.json: criteria[accuracy].anchors.3" in places and "rubric.json: components.answer" in places
    assert places[-3:] == ["protocol.md", "guidance/accuracy/initial_1.md", "guidance/errors/initial_1.md"]
    # 1 title + 1 component + per criterion a definition and one anchor per score (4 + 3), protocol, 2 guidance
    assert len(places) == 1 + 1 + (1 + 4) + (1 + 3) + 1 + 2


def test_edited_rubric_has_no_placeholders_left(tmp_path: Path):
    bundle = scaffold_rubric("mine", [CriterionSpec("accuracy", 0, 1, definition="Are the facts right?")],
                             title="Facts", components=["answer"])
    folder = bundle.write(tmp_path)
    doc = json.loads((folder / "rubric.json").read_text())
    doc["components"]["answer"] = "An answer to a patient question."
    doc["criteria"][0]["anchors"] = {"0": "A wrong fact.", "1": "All facts right."}
    (folder / "rubric.json").write_text(json.dumps(doc, indent=2))
    (folder / "protocol.md").write_text("You are a physician grading answers.\n")
    (folder / "guidance" / "accuracy" / "initial_1.md").write_text("Check each number and drug name.\n")
    edited = check_rubric_folder(folder)
    assert unedited_placeholders(edited) == []
    assert edited.rubric.criterion("accuracy").definition == "Are the facts right?"


def test_summary_names_scales_components_and_guidance():
    lines = rubric_summary(scaffold_rubric("mine", _specs(), title="Mine", components=["answer", "summary"]))
    assert lines[0] == "rubric mine version 1: Mine"
    assert lines[1] == "components: answer, summary"
    assert lines[3].startswith("  accuracy: 0-3, higher is better, on answer, summary; 1 initial guidance (")
    assert lines[4].startswith("  errors: 0-2, lower is better")


@pytest.mark.parametrize(("text", "expected"), [("0-3", (0, 3)), ("1-5", (1, 5)), (" 1 .. 10 ", (1, 10)), ("-2-2", (-2, 2))])
def test_parse_scale(text: str, expected: tuple[int, int]):
    assert parse_scale(text) == expected


@pytest.mark.parametrize(("text", "message"), [("3-0", "lowest score must be below"), ("2-2", "lowest score must be below"),
                                               ("a-b", "LO-HI with two integers"), ("0-3-5", "LO-HI"), ("", "LO-HI"),
                                               ("0-100", "101 scores")])
def test_parse_scale_refuses(text: str, message: str):
    with pytest.raises(RubricError, match=message):
        parse_scale(text)


def test_criterion_specs_pairs_options_in_order():
    specs = criterion_specs(["a", "b"], ["0-3", "1-5"], names=["A", "B"], lower_is_better=["b"])
    assert specs == [CriterionSpec("a", 0, 3, name="A"), CriterionSpec("b", 1, 5, name="B", higher_is_better=False)]
    assert [(s.scale_min, s.scale_max) for s in criterion_specs(["a", "b"], ["1-4"])] == [(1, 4), (1, 4)]


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(criteria=["a", "b", "c"], scales=["0-3", "0-3"]), "3 --criterion but 2 --scale"),
    (dict(criteria=["a", "b"], scales=["0-3"], names=["A"]), "2 --criterion but 1 --name"),
    (dict(criteria=["a"], scales=["0-3"], definitions=["x", "y"]), "1 --criterion but 2 --definition"),
    (dict(criteria=["a"], scales=["0-3"], lower_is_better=["z"]), "--lower-is-better z"),
])
def test_criterion_specs_refuses_what_does_not_pair(kwargs: dict, message: str):
    with pytest.raises(RubricError, match=message):
        criterion_specs(**kwargs)


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (("my rubric", [CriterionSpec("a", 0, 3)]), {}, "rubric id 'my rubric'"),
    (("../up", [CriterionSpec("a", 0, 3)]), {}, "rubric id '../up'"),
    (("mine", [CriterionSpec("a", 0, 3), CriterionSpec("a", 1, 5)]), {}, "'a' is given twice"),
    (("mine", [CriterionSpec("bad id", 0, 3)]), {}, "criterion id 'bad id'"),
    (("mine", [CriterionSpec("..", 0, 3)]), {}, "criterion id '..'"),
    (("mine", [CriterionSpec("a", 3, 0)]), {}, "lowest score must be below"),
    (("mine", []), {}, "at least one criterion"),
    (("mine", [CriterionSpec("a", 0, 3, components=("summary",))]), {}, r"components \['summary'\]"),
    (("mine", [CriterionSpec("a", 0, 3)]), dict(components=["answer", "answer"]), "given once"),
    (("mine", [CriterionSpec("a", 0, 3)]), dict(components=["the answer"]), "component 'the answer'"),
])
def test_scaffold_refuses_bad_input(args: tuple, kwargs: dict, message: str):
    with pytest.raises(RubricError, match=message):
        scaffold_rubric(*args, **kwargs)


def test_check_names_the_defective_file_and_field(tmp_path: Path):
    folder = scaffold_rubric("mine", _specs()).write(tmp_path)
    doc = json.loads((folder / "rubric.json").read_text())
    del doc["criteria"][0]["anchors"]["3"]
    (folder / "rubric.json").write_text(json.dumps(doc))
    with pytest.raises(RubricError, match=r"rubric\.json: field 'criteria\.0'.*anchors must have exactly"):
        check_rubric_folder(folder)


def test_check_refuses_guidance_of_an_unknown_criterion(tmp_path: Path):
    folder = scaffold_rubric("mine", _specs()).write(tmp_path)
    (folder / "guidance" / "acuracy").mkdir()
    (folder / "guidance" / "acuracy" / "initial_1.md").write_text("Misspelt criterion folder.")
    with pytest.raises(RubricError, match=r"guidance/acuracy: no evolved criterion 'acuracy'"):
        check_rubric_folder(folder)


def test_check_refuses_missing_guidance_protocol_and_folder(tmp_path: Path):
    folder = scaffold_rubric("mine", _specs()).write(tmp_path)
    (folder / "guidance" / "errors" / "initial_1.md").unlink()
    with pytest.raises(RubricError, match=r"guidance/errors: no initial guidance"):
        check_rubric_folder(folder)
    folder = scaffold_rubric("other", _specs()).write(tmp_path)
    (folder / "protocol.md").write_text("  \n")
    with pytest.raises(RubricError, match=r"other/protocol\.md: missing or empty"):
        check_rubric_folder(folder)
    with pytest.raises(RubricError, match=r"nothing/rubric\.json: no such file"):
        check_rubric_folder(tmp_path / "nothing")


def test_check_refuses_a_folder_named_unlike_its_id(tmp_path: Path):
    folder = scaffold_rubric("mine", _specs()).write(tmp_path)
    folder.rename(tmp_path / "renamed")
    with pytest.raises(RubricError, match="'id' is 'mine' but the folder is 'renamed'"):
        check_rubric_folder(tmp_path / "renamed")
