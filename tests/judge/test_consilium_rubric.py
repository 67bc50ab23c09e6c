"""The shipped consilium rubric matches consilium paper, rubric exactly (applicability, references, roles of 9-11)."""

from __future__ import annotations

import pytest

from evolve.data import Case, Target
from evolve.judge import Judge, verdict_model
from evolve.rubric import load_initial_guidance, load_protocol, load_rubric

# consilium paper, rubric: criterion number -> components it is judged on
SPEC_MATRIX = {
    1: {"reasoning", "opinion", "final"},
    2: {"reasoning", "opinion", "final"},
    3: {"reasoning", "final"},
    4: {"reasoning", "opinion", "final"},
    5: {"reasoning", "final"},
    6: {"opinion", "final"},
    7: {"reasoning", "final"},
    8: {"reasoning", "opinion", "final"},
    9: {"case"},
    10: {"case"},
    11: set(),  # physician only, never judged
}


@pytest.fixture(scope="module")
def rubric():
    return load_rubric("consilium")


def test_applicability_matrix_is_exactly_spec(rubric):
    assert set(rubric.components) == {"reasoning", "opinion", "final", "case"}
    assert sorted(c.number for c in rubric.criteria) == list(range(1, 12))
    for c in rubric.criteria:
        judged = {k for k in rubric.components if rubric.applies(c.criterion_id, k)}
        assert judged == SPEC_MATRIX[c.number], c.criterion_id
    # per component, as the paper lists it: reasoning 1-5,7,8; opinion 1,2,4,6,8; final 1-8
    by_component = {k: sorted(c.number for c in rubric.criteria if rubric.applies(c.criterion_id, k)) for k in rubric.components}
    assert by_component == {"reasoning": [1, 2, 3, 4, 5, 7, 8], "opinion": [1, 2, 4, 6, 8],
                            "final": [1, 2, 3, 4, 5, 6, 7, 8], "case": [9, 10]}


def test_scale_evolution_reference_and_judging_flags(rubric):
    for c in rubric.criteria:
        assert (c.scale_min, c.scale_max, c.higher_is_better) == (0, 3, True)
        assert c.evolve == (c.number <= 9)
        assert c.judged == (c.number != 11)
        assert c.show_reference == (c.number == 6)


def test_protocol_encodes_the_fabricated_fact_and_lower_score_rules():
    protocol = load_protocol("consilium").lower()
    assert "factual accuracy 0" in protocol
    assert "at most 1" in protocol and "clinical safety gets at most 1" in protocol
    assert "choose the lower one" in protocol
    assert "never evidence about the patient" in protocol  # the reference diagnosis
    assert "exactly one target component" in protocol


def test_two_initial_candidates_for_each_evolved_criterion(rubric):
    for c in rubric.criteria:
        if c.evolve:
            cands = load_initial_guidance("consilium", c.criterion_id)
            assert [name for name, _ in cands] == ["initial_1", "initial_2"]
            assert all(0 < len(text) <= 800 for _, text in cands)


def test_case_level_criteria_offer_no_not_evaluable(rubric):
    schema = verdict_model(rubric.criterion("panel_adequacy"), 200).model_json_schema()
    assert "not_evaluable" not in str(schema["properties"]["score"])
    schema = verdict_model(rubric.criterion("factual_accuracy"), 200).model_json_schema()
    assert "not_evaluable" in str(schema["properties"]["score"])


def test_judge_refuses_inapplicable_pairs_and_physician_only_criteria(rubric):
    judge = Judge(rubric, load_protocol("consilium"))
    case = Case(case_id="10.0/x", text="A synthetic case.", reference_answer="Synthetic diagnosis")
    opinion = Target(target_id="t", case_id="10.0/x", component="opinion", role="Cardiology", text="Opinion.")
    with pytest.raises(ValueError, match="does not apply"):
        judge.messages(case, opinion, rubric.criterion("data_use"), None)
    with pytest.raises(ValueError, match="physician-only"):
        judge.messages(case, opinion, rubric.criterion("overall_quality"), None)
    # the reference diagnosis appears for criterion 6 only
    text6 = judge.messages(case, opinion, rubric.criterion("final_conclusion"), None)[1].content
    text1 = judge.messages(case, opinion, rubric.criterion("factual_accuracy"), None)[1].content
    assert "Synthetic diagnosis" in text6 and "Synthetic diagnosis" not in text1
