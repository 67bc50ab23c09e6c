"""The table of every rubric.json field: generated from the models, complete, and what the README holds."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from evolve.rubric import Criterion, Rubric, rubric_field_reference
from tests.conftest import REPO

MARKERS = ("<!-- rubric-fields:start -->", "<!-- rubric-fields:end -->")


def test_readme_table_is_the_generated_one():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(MARKERS[0], 1)[1].split(MARKERS[1], 1)[0]
    assert section.strip() == rubric_field_reference().strip(), (
        "the README's rubric field table differs from the models: paste the output of "
        "`python -c 'from evolve.rubric import rubric_field_reference as r; print(r())'` between its markers")


@pytest.mark.parametrize("model", [Rubric, Criterion], ids=lambda m: m.__name__)
def test_every_field_has_a_row_with_type_default_and_meaning(model: type[BaseModel]):
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ") for line in rubric_field_reference().splitlines()
            if line.startswith("| `") and " field |" not in line}
    for name, info in model.model_fields.items():
        assert name in rows, name
        _, type_, default, meaning = rows[name]
        assert type_ and meaning.strip(" |"), f"{model.__name__}.{name}: add it to the docstring's Attributes"
        assert (default == "required") == info.is_required()


def test_types_defaults_and_constraints_read_as_json():
    text = rubric_field_reference()
    assert "| `title` | string | `\"\"` |" in text
    assert "| `criteria` | list of `Criterion` (table below) | required |" in text
    assert "| `number` | integer or null, ≥ 1 | `null` |" in text
    assert "| `higher_is_better` | true/false | `true` |" in text
    assert "matching `^[A-Za-z0-9_.\\-]+$`" in text
    assert "``" not in text  # reStructuredText literals become Markdown code
