"""RubricBundle: a rubric, its protocol and initial guidance in memory, written as one folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from evolve.errors import RubricError
from evolve.rubric import Criterion, Rubric, RubricBundle, load_initial_guidance, load_protocol, load_rubric

SHIPPED = ("consilium", "kqa-entailment", "otb", "savage-rationale-errors")


def _criterion(cid: str = "accuracy", **kw) -> Criterion:
    fields = dict(criterion_id=cid, name=f"{cid} name", definition=f"What {cid} measures.",
                  anchors={"0": "worst", "1": "poor", "2": "good", "3": "best"}, components=("answer",))
    fields.update(kw)
    return Criterion(**fields)


def _bundle(**kw) -> RubricBundle:
    rubric = Rubric(id=kw.pop("rid", "mine"), version="1", title="My rubric", components={"answer": "The answer."},
                    criteria=kw.pop("criteria", (_criterion("accuracy"), _criterion("clarity"))))
    guidance = kw.pop("guidance", {"accuracy": (("initial_1", "Check every fact."), ("initial_2", "Be strict.")),
                                   "clarity": (("initial_1", "Is it easy to read?"),)})
    return RubricBundle(rubric=rubric, protocol=kw.pop("protocol", "You grade text."), guidance=guidance)


def test_write_then_load_gives_an_equal_bundle(tmp_path: Path):
    bundle = _bundle()
    folder = bundle.write(tmp_path / "prompts")
    assert folder == tmp_path / "prompts" / "mine"
    assert RubricBundle.load("mine", root=tmp_path / "prompts") == bundle
    assert load_protocol("mine", root=tmp_path / "prompts") == "You grade text."
    assert load_initial_guidance("mine", "accuracy", root=tmp_path / "prompts") == [
        ("initial_1", "Check every fact."), ("initial_2", "Be strict.")]


def test_files_are_what_write_writes_with_every_rubric_field(tmp_path: Path):
    bundle = _bundle()
    folder = bundle.write(tmp_path)
    on_disk = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert on_disk == bundle.files()
    assert sorted(on_disk) == ["guidance/accuracy/initial_1.md", "guidance/accuracy/initial_2.md",
                               "guidance/clarity/initial_1.md", "protocol.md", "rubric.json"]
    doc = json.loads(on_disk["rubric.json"])
    assert set(doc) == set(Rubric.model_fields)
    assert set(doc["criteria"][0]) == set(Criterion.model_fields)  # defaults are written too
    assert doc["criteria"][0]["number"] is None and doc["criteria"][0]["allow_not_evaluable"] is True
    assert on_disk["rubric.json"].startswith(b'{\n  "id": "mine"')  # indent 2


def test_sha256_is_stable_and_matches_the_bytes():
    a, b = _bundle(), _bundle()
    assert a.sha256() == b.sha256()
    assert a.sha256().keys() == a.files().keys()
    for rel, data in a.files().items():
        assert a.sha256()[rel] == hashlib.sha256(data).hexdigest()
    changed = _bundle(protocol="You grade text carefully.")
    assert changed.sha256()["protocol.md"] != a.sha256()["protocol.md"]
    assert changed.sha256()["rubric.json"] == a.sha256()["rubric.json"]


def test_texts_are_stripped_and_guidance_is_in_file_name_order():
    bundle = _bundle(protocol="\n  You grade text.  \n",
                     guidance={"accuracy": [("b", " second "), ("a-b", "third"), ("a", "first")], "clarity": [("x", "y")]})
    assert bundle.protocol == "You grade text."
    # the loader sorts files by name: "a-b.md" < "a.md" < "b.md"
    assert bundle.guidance["accuracy"] == (("a-b", "third"), ("a", "first"), ("b", "second"))


def test_a_criterion_without_guidance_texts_is_left_out(tmp_path: Path):
    rubric = Rubric(id="mine", version="1", components={"answer": "The answer."},
                    criteria=(_criterion("accuracy"), _criterion("overall", evolve=False)))
    bundle = RubricBundle(rubric=rubric, protocol="P.", guidance={"accuracy": [("i", "x")], "overall": []})
    assert list(bundle.guidance) == ["accuracy"]
    bundle.write(tmp_path)
    assert RubricBundle.load("mine", root=tmp_path) == bundle


@pytest.mark.parametrize("rubric_id", SHIPPED)
def test_shipped_rubrics_load_and_round_trip(tmp_path: Path, rubric_id: str):
    bundle = RubricBundle.load(rubric_id)
    assert bundle.rubric == load_rubric(rubric_id)
    evolvable = [c.criterion_id for c in bundle.rubric.criteria if c.evolve]
    assert list(bundle.guidance) == evolvable
    bundle.write(tmp_path)
    assert RubricBundle.load(rubric_id, root=tmp_path) == bundle


@pytest.mark.parametrize(("change", "message"), [
    (dict(protocol="   "), "protocol.md is empty"),
    (dict(guidance={"accuracy": (("initial_1", "x"),)}), "guidance/clarity/: no initial guidance"),
    (dict(guidance={"accuracy": (("i", "x"),), "clarity": (("i", "x"),), "ghost": (("i", "x"),)}), "no criterion 'ghost'"),
    (dict(guidance={"accuracy": (("i", "x" * 801),), "clarity": (("i", "x"),)}), "801 characters"),
    (dict(guidance={"accuracy": (("i", ""),), "clarity": (("i", "x"),)}), "0 characters"),
    (dict(guidance={"accuracy": (("../up", "x"),), "clarity": (("i", "x"),)}), "not a plain file name"),
    (dict(guidance={"accuracy": (("i", "x"), ("i", "y")), "clarity": (("i", "x"),)}), "used twice"),
    (dict(rid="../escape"), "plain folder name"),
    (dict(criteria=(_criterion("accuracy"), _criterion("clarity", evolve=False))), "not evolved"),
])
def test_validate_names_the_defect(tmp_path: Path, change: dict, message: str):
    bundle = _bundle(**change)
    with pytest.raises(RubricError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bundle.validate()
    with pytest.raises(RubricError):
        bundle.write(tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_write_refuses_a_different_folder_unless_overwrite(tmp_path: Path):
    _bundle().write(tmp_path)
    assert _bundle().write(tmp_path) == tmp_path / "mine"  # the same files: left as they are
    other = _bundle(protocol="Another protocol.")
    with pytest.raises(RubricError, match="already there.*--overwrite"):
        other.write(tmp_path)
    assert load_protocol("mine", root=tmp_path) == "You grade text."
    other.write(tmp_path, overwrite=True)
    assert RubricBundle.load("mine", root=tmp_path) == other
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary folder left behind


def test_overwrite_drops_files_the_new_bundle_does_not_have(tmp_path: Path):
    _bundle().write(tmp_path)
    fewer = _bundle(guidance={"accuracy": (("initial_1", "Only one."),), "clarity": (("initial_1", "One."),)})
    fewer.write(tmp_path, overwrite=True)
    assert not (tmp_path / "mine" / "guidance" / "accuracy" / "initial_2.md").exists()


def test_write_refuses_a_file_in_the_way(tmp_path: Path):
    (tmp_path / "mine").write_text("not a folder")
    with pytest.raises(RubricError, match="not a folder"):
        _bundle().write(tmp_path, overwrite=True)
