"""OpenTumorBoard aggregation recomputed by hand, and ROUGE-L against hand-computed values."""

from __future__ import annotations

import pytest

from evolve.otb import JudgedItem, rouge_l, summarize


def _turn(i: int, **kw) -> JudgedItem:
    return JudgedItem(task="turn", item_id=f"qa-{i}", case_id=f"case-{i % 2}", model="m", **kw)


def test_malformed_answers_sit_at_the_floor_and_judge_failures_are_left_out():
    items = [
        _turn(1, qa_type="uncertainty", score=5, critical_error=False, unsupported_claim=True),
        _turn(2, qa_type="uncertainty", score=3, critical_error=True, unsupported_claim=False),
        _turn(3, qa_type="treatment_recommendation", score=4, critical_error=False, unsupported_claim=False),
        _turn(4, qa_type="treatment_recommendation", malformed=True),
        _turn(5, qa_type="uncertainty", judge_failed=True),
    ]
    s = summarize(items)
    assert (s["items"], s["scored"], s["format_failures"], s["judge_failures"]) == (5, 3, 1, 1)
    assert s["mean"] == pytest.approx((5 + 3 + 4 + 1) / 4)  # the malformed answer counts 1; the failure nothing
    assert s["critical_error_rate"] == pytest.approx(1 / 3) and s["unsupported_claim_rate"] == pytest.approx(1 / 3)
    assert (s["critical_errors"], s["unsupported_claims"]) == (1, 1)
    by_type = s["by_question_type"]
    # count: the scored items the mean is over (the judge failure is counted apart, not in it)
    assert by_type["uncertainty"] == {"count": 2, "items": 3, "scored": 2, "format_failures": 0, "judge_failures": 1,
                                      "mean": 4.0, "critical_error_rate": 0.5, "unsupported_claim_rate": 0.5}
    assert by_type["treatment_recommendation"]["mean"] == 4.0  # no floor by question type
    assert by_type["treatment_recommendation"]["count"] == 1 and by_type["treatment_recommendation"]["format_failures"] == 1


def test_a_question_type_with_no_scored_item_has_no_mean():
    s = summarize([_turn(1, qa_type="uncertainty", score=4, critical_error=False, unsupported_claim=False),
                   _turn(2, qa_type="evidence_discussion", judge_failed=True),
                   _turn(3, qa_type="evidence_discussion", malformed=True)])
    assert s["by_question_type"]["evidence_discussion"] == {
        "count": 0, "items": 2, "scored": 0, "format_failures": 1, "judge_failures": 1, "mean": None,
        "critical_error_rate": None, "unsupported_claim_rate": None}


def test_a_four_decision_judge_failure_is_counted_not_taken_as_out_of_scope():
    board = [
        JudgedItem(task="board", item_id="s1", case_id="c1", model="m", score=4,
                   decisions={"therapy": 5, "surgery": -1, "next_action": 3, "clinical_trial": -1}),
        JudgedItem(task="board", item_id="s2", case_id="c2", model="m", score=3, decisions_failed=True),
        # the alignment call failed, the four-decision call did not: its decisions count
        JudgedItem(task="board", item_id="s3", case_id="c3", model="m", judge_failed=True,
                   decisions={"therapy": 2, "surgery": 4, "next_action": -1, "clinical_trial": -1}),
        JudgedItem(task="board", item_id="s4", case_id="c4", model="m", malformed=True),
    ]
    s = summarize(board)
    assert (s["items"], s["scored"], s["format_failures"], s["judge_failures"]) == (4, 2, 1, 1)
    assert s["four_decisions"]["therapy"] == {"cases": 2, "mean": 3.5, "items": 4, "scored": 2, "out_of_scope": 0,
                                              "judge_failures": 1, "format_failures": 1}
    assert s["four_decisions"]["clinical_trial"] == {"cases": 0, "mean": None, "items": 4, "scored": 2,
                                                     "out_of_scope": 2, "judge_failures": 1, "format_failures": 1}
    # every four-decision call failed: the block is still there when four decisions were judged, all failures
    failed = summarize([JudgedItem(task="board", item_id="s1", case_id="c1", model="m", score=4, decisions_failed=True)],
                       four_decisions=True)
    assert failed["four_decisions"]["surgery"]["judge_failures"] == 1 and failed["four_decisions"]["surgery"]["mean"] is None


def test_counts_that_do_not_add_up_are_an_internal_error():
    from evolve.errors import RunError

    # judged with four decisions, but an answered item has no four-decision outcome at all
    board = [JudgedItem(task="board", item_id="s1", case_id="c1", model="m", score=4)]
    with pytest.raises(RunError, match="internal error.*decision 'therapy'.*do not add up"):
        summarize(board, four_decisions=True)


def test_four_decisions_count_only_decisions_in_scope():
    board = [
        JudgedItem(task="board", item_id="s1", case_id="c1", model="m", score=4,
                   decisions={"therapy": 5, "surgery": -1, "next_action": 3, "clinical_trial": -1}),
        JudgedItem(task="board", item_id="s2", case_id="c2", model="m", score=2,
                   decisions={"therapy": 3, "surgery": 2, "next_action": -1, "clinical_trial": -1}),
        JudgedItem(task="board", item_id="s3", case_id="c3", model="m", malformed=True),
    ]
    s = summarize(board)
    assert s["mean"] == pytest.approx((4 + 2 + 1) / 3)
    d = s["four_decisions"]
    assert (d["therapy"]["cases"], d["therapy"]["mean"]) == (2, 4.0) and (d["surgery"]["cases"], d["surgery"]["mean"]) == (1, 2.0)
    assert (d["clinical_trial"]["cases"], d["clinical_trial"]["mean"], d["clinical_trial"]["out_of_scope"]) == (0, None, 2)
    assert d["therapy"]["format_failures"] == 1  # the malformed answer: counted, never scored (the released code skips it)
    assert s["critical_error_rate"] is None  # no flags on the board task


def test_nothing_scored_gives_no_mean_rather_than_zero():
    s = summarize([_turn(1, judge_failed=True)])
    assert s["mean"] is None and s["scored"] == 0 and s["judge_failures"] == 1


@pytest.mark.parametrize(("candidate", "reference", "expected"), [
    # tokens: the cat sat on the mat / the cat is on a mat -> LCS "the cat on mat" = 4; P = R = 4/6
    ("The cat sat on the mat.", "the cat is on a mat", 4 / 6),
    # punctuation splits tokens and case is ignored: "5-FU" -> [5, fu]; LCS 4 of 4 and 5 tokens
    ("Give 5-FU now", "give 5 fu now please", 2 * (4 / 4) * (4 / 5) / (4 / 4 + 4 / 5)),
    # no stemming: "treated" and "treatment" differ
    ("treated", "treatment", 0.0),
    ("", "anything", 0.0),
    ("!!!", "...", 0.0),
])
def test_rouge_l_uses_the_released_tokenisation(candidate, reference, expected):
    assert rouge_l(candidate, reference) == pytest.approx(expected)


def test_the_offline_bertscore_stand_in_is_greedy_matching_f1_and_never_a_silent_zero():
    from evolve.otb._similarity import ENCODER, token_f1

    assert token_f1("neoadjuvant chemotherapy first", "neoadjuvant chemotherapy first") == pytest.approx(1.0, abs=1e-5)
    close = token_f1("Neoadjuvant FOLFIRINOX, then restaging.", "neoadjuvant FOLFIRINOX followed by restaging CT")
    far = token_f1("Surgery first.", "Neoadjuvant FOLFIRINOX followed by restaging CT")
    assert close is not None and far is not None and 0 < far < close < 1
    assert token_f1("", "anything") is None and token_f1("...", "") is None
    assert "not the paper" in ENCODER
