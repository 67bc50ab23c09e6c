"""Every figure of an OpenTumorBoard ``summary.json`` recomputed by hand from ``judge_scores.jsonl``
(issue 23's Done-when), on INVENTED records, two models, through a scripted loopback endpoint whose
judge replies mix valid ones, coerce-prone ones (``"false"`` for a flag, ``"3"`` or ``3.0`` for a
score, ``0`` for a decision, an extra key, ``0`` for a flag), failures (an HTTP error, a cut reply,
prose, a JSON array) and malformed answers. Then: every judge failure is asked again on resume
(none was cached), and the calls table counts every call made, the failed ones included."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from evolve.otb import generate_otb, judge_otb, read_responses, resolve_otb_config
from evolve.report import write_otb_report
from evolve.runs import OtbFolder
from evolve.testing import LoopbackChatServer, chat_completion

MODELS = ("model-a", "model-b")
SIMS = [f"sim-{n}" for n in range(1, 6)]
QAS = {"qa-1": "uncertainty", "qa-2": "uncertainty", "qa-3": "treatment_recommendation",
       "qa-4": "treatment_recommendation", "qa-5": "evidence_discussion", "qa-6": "evidence_discussion"}
MALFORMED = {("sim-2", "model-b"), ("qa-3", "model-a")}
HTTP_ERROR = (400, {"error": {"message": "INVENTED bad request", "type": "invalid_request_error"}})


def _align(score: Any, **extra: Any) -> str:
    return json.dumps({"conclusion_alignment": {"score": score, "rationale": "compared the plans"}, **extra})


def _decide(therapy: Any, surgery: Any, next_action: Any, trial: Any, **extra: Any) -> str:
    return json.dumps({"therapy": therapy, "surgery": surgery, "next_action": next_action, "clinical_trial": trial,
                       "rationale": "decision by decision", **extra})


def _equiv(score: Any, critical: Any, unsupported: Any, **extra: Any) -> str:
    return json.dumps({"clinical_equivalence_score": score, "critical_error": critical, "unsupported_claim": unsupported,
                       "rationale": "same clinical effect?", **extra})


CUT = (200, chat_completion('{"therapy": 4, "surgery"', finish_reason="length"))

# (item, model, judge rubric) -> the judge's reply, and whether it is valid (else a judge failure)
SCRIPT: dict[tuple[str, str, str], tuple[Any, bool]] = {
    ("sim-1", "model-a", "conclusion_alignment"): (_align(4), True),
    ("sim-1", "model-a", "four_decisions"): (_decide(5, -1, 3, -1), True),
    ("sim-2", "model-a", "conclusion_alignment"): (_align("3"), False),  # a string score
    ("sim-2", "model-a", "four_decisions"): (_decide(2, 4, -1, -1), True),  # counts although the alignment failed
    ("sim-3", "model-a", "conclusion_alignment"): (_align(3.0), False),  # a float score
    ("sim-3", "model-a", "four_decisions"): (_decide(0, 3, 3, -1), False),  # 0 is no value of the scale
    ("sim-4", "model-a", "conclusion_alignment"): (_align(2), True),
    ("sim-4", "model-a", "four_decisions"): (_decide(4, 4, 4, 4, confidence="high"), False),  # an extra key
    ("sim-5", "model-a", "conclusion_alignment"): (HTTP_ERROR, False),  # the endpoint refuses
    ("sim-5", "model-a", "four_decisions"): (CUT, False),  # cut by max_tokens
    ("sim-1", "model-b", "conclusion_alignment"): (_align(5), True),
    ("sim-1", "model-b", "four_decisions"): (_decide(1, 1, 1, 1), True),
    ("sim-3", "model-b", "conclusion_alignment"): ("The plans agree; I would give 4.", False),  # prose
    ("sim-3", "model-b", "four_decisions"): (json.dumps([4, 4, -1, -1]), False),  # a JSON array
    ("sim-4", "model-b", "conclusion_alignment"): (_align(1), True),
    ("sim-4", "model-b", "four_decisions"): (_decide(-1, -1, -1, -1), True),  # nothing in scope
    ("sim-5", "model-b", "conclusion_alignment"): (_align(3), True),
    ("sim-5", "model-b", "four_decisions"): (_decide(4, "5", -1, True), False),  # a string and a boolean
    ("qa-1", "model-a", "clinical_equivalence"): (_equiv(5, False, False), True),
    ("qa-2", "model-a", "clinical_equivalence"): (_equiv(4, "false", False), False),  # "false" is no boolean
    ("qa-4", "model-a", "clinical_equivalence"): (_equiv(2, True, True), True),
    ("qa-5", "model-a", "clinical_equivalence"): (_equiv("3", False, False), False),
    ("qa-6", "model-a", "clinical_equivalence"): (_equiv(3.0, False, True), False),
    ("qa-1", "model-b", "clinical_equivalence"): (_equiv(4, False, True), True),
    ("qa-2", "model-b", "clinical_equivalence"): (_equiv(3, False, False), True),
    ("qa-3", "model-b", "clinical_equivalence"): (_equiv(4, False, False, note="extra"), False),
    ("qa-4", "model-b", "clinical_equivalence"): (_equiv(4, False, 0), False),  # 0 is no boolean
    ("qa-5", "model-b", "clinical_equivalence"): (_equiv(1, True, False), True),
    ("qa-6", "model-b", "clinical_equivalence"): (HTTP_ERROR, False),
}
HEALTHY = {"conclusion_alignment": _align(3), "four_decisions": _decide(3, -1, 2, -1),
           "clinical_equivalence": _equiv(3, False, False)}


class Endpoint:
    """Generation: each answer names its item and model (so the judge, which sees neither,
    can be scripted per answer). Judging: :data:`SCRIPT`, or :data:`HEALTHY` once healed."""

    def __init__(self) -> None:
        self.healed = False

    def __call__(self, body: dict) -> Any:
        fmt = body.get("response_format")
        rubric = fmt["json_schema"]["name"] if fmt else ""
        user = body["messages"][-1]["content"]
        if rubric in HEALTHY:
            item, model = re.search(r"(sim-\d|qa-\d) by (model-[ab])", user).groups()  # type: ignore[union-attr]
            return HEALTHY[rubric] if self.healed else SCRIPT[(item, model, rubric)][0]
        model = body["model"]
        if "tumor board and write down the whole meeting" in body["messages"][0]["content"]:
            sim = re.search(r"INVENTED case (sim-\d)", user).group(1)  # type: ignore[union-attr]
            discussion = "<discussion>\n<turn 1> Surgeon: Resect later.\n</discussion>"
            if (sim, model) in MALFORMED:
                return discussion  # no conclusion: a format failure, never judged
            return f"{discussion}\n<conclusion>Neoadjuvant treatment first: plan {sim} by {model}.</conclusion>"
        qa = re.search(r"INVENTED question (qa-\d)", user).group(1)  # type: ignore[union-attr]
        return json.dumps({"answer": "" if (qa, model) in MALFORMED else f"Start treatment: answer {qa} by {model}."})


def _records(tmp_path: Path) -> tuple[Path, Path]:
    summary = "INVENTED case {id}: a 60-year-old with an invented mass."
    boards = [{"schema_version": 1, "benchmark_version": "1.0", "task_name": "tumor_board_simulation",
               "simulation_id": s, "video_uid": "vid-1", "video_dir": "rec_001", "case_id": f"case-{i % 3}",
               "case_start_sec": None, "case_end_sec": None, "case_summary": summary.format(id=s),
               "slides": "<image> CT: an invented lesion", "reference_conclusion": f"INVENTED reference plan for {s}.",
               "source_task": "board"} for i, s in enumerate(SIMS)]
    turns = [{"schema_version": 1, "benchmark_version": "1.0", "qa_id": q, "video_uid": "vid-1", "video_dir": "rec_001",
              "case_id": f"case-{i % 3}", "qa_index": i, "qa_type": t, "qa_type_candidates": [t], "utterance_id": f"u-{i}",
              "target_specialist_role": "medical oncologist", "case_summary": summary.format(id=q), "slides": "",
              "question": f"INVENTED question {q}?", "reference_answer": f"INVENTED reference answer to {q}.",
              "source_task": "turn", "source_aliases": []} for i, (q, t) in enumerate(QAS.items())]
    board, turn = tmp_path / "task1_test.jsonl", tmp_path / "task2_test.jsonl"
    board.write_text("".join(json.dumps(r) + "\n" for r in boards), encoding="utf-8")
    turn.write_text("".join(json.dumps(r) + "\n" for r in turns), encoding="utf-8")
    return board, turn


# -- the aggregate, by hand ---------------------------------------------------------------------


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _hand_summary(folder: OtbFolder, task: str, model: str, scores: list[dict]) -> dict:
    """summary.json of one task and model from responses.jsonl and judge_scores.jsonl alone."""
    answers = read_responses(folder.responses(task, model))
    mine = [s for s in scores if s["task"] == task and s["model"] == model]
    main_rubric = "conclusion_alignment" if task == "board" else "clinical_equivalence"
    rows = []  # per answer: (qa_type, malformed, main score row or None, decisions row or None, judged with decisions)
    for a in answers:
        item = a.get("simulation_id") or a.get("qa_id")
        main = [s for s in mine if s["item_id"] == item and s["rubric"] == main_rubric]
        four = [s for s in mine if s["item_id"] == item and s["rubric"] == "four_decisions"]
        assert len(main) == (0 if a["malformed"] else 1) and len(four) == (0 if a["malformed"] or task == "turn" else 1)
        rows.append((a.get("qa_type", ""), a["malformed"], main[0] if main else None, four[0] if four else None))

    def counts(subset: list) -> dict:
        scored = [m for _, bad, m, _ in subset if m is not None and m["outcome"] == "scored"]
        return {"items": len(subset), "scored": len(scored), "format_failures": sum(bad for _, bad, _, _ in subset),
                "judge_failures": sum(m is not None and m["outcome"] == "judge_failure" for _, _, m, _ in subset)}, scored

    top, scored = counts(rows)
    floor = top["format_failures"]
    flags = {f: [s[f] for s in scored if f in s] for f in ("critical_error", "unsupported_claim")}
    out: dict = {"task": task, "model": model, "rubric_version": "evolve-otb-judge-1", **top,
                 "mean": (sum(s["score"] for s in scored) + floor) / (len(scored) + floor) if scored or floor else None,
                 "critical_error_rate": _mean([float(v) for v in flags["critical_error"]]),
                 "unsupported_claim_rate": _mean([float(v) for v in flags["unsupported_claim"]]),
                 "critical_errors": sum(flags["critical_error"]) if flags["critical_error"] else None,
                 "unsupported_claims": sum(flags["unsupported_claim"]) if flags["unsupported_claim"] else None}
    if task == "turn":
        out["by_question_type"] = {}
        for t in sorted({r[0] for r in rows}):
            c, s = counts([r for r in rows if r[0] == t])
            out["by_question_type"][t] = {
                "count": len(s), **c, "mean": _mean([x["score"] for x in s]),
                "critical_error_rate": _mean([float(x["critical_error"]) for x in s]),
                "unsupported_claim_rate": _mean([float(x["unsupported_claim"]) for x in s])}
    else:
        out["four_decisions"] = {}
        judged = [f for _, _, _, f in rows if f is not None and f["outcome"] == "scored"]
        for d in ("therapy", "surgery", "next_action", "clinical_trial"):
            in_scope = [f[d] for f in judged if f[d] != -1]
            out["four_decisions"][d] = {
                "cases": len(in_scope), "mean": _mean(in_scope), "items": len(rows), "scored": len(judged),
                "out_of_scope": len(judged) - len(in_scope),
                "judge_failures": sum(f is not None and f["outcome"] == "judge_failure" for _, _, _, f in rows),
                "format_failures": floor}
    return out


def _same(written: Any, hand: Any, where: str = "summary") -> None:
    """Equal figure by figure (floats to 1e-12), with the same keys at every level."""
    if isinstance(hand, dict):
        assert isinstance(written, dict) and set(written) == set(hand), f"{where}: {sorted(written)} != {sorted(hand)}"
        for key in hand:
            _same(written[key], hand[key], f"{where}.{key}")
    elif isinstance(hand, float):
        assert isinstance(written, int | float) and math.isclose(written, hand, abs_tol=1e-12), f"{where}: {written} != {hand}"
    else:
        assert written == hand and type(written) is type(hand), f"{where}: {written!r} != {hand!r}"


@pytest.fixture
def judged(tmp_path: Path):
    board, turn = _records(tmp_path)
    endpoint = Endpoint()
    server = LoopbackChatServer(endpoint)
    config = resolve_otb_config(preset="quick", environ={}, overrides={
        "run_id": "otb", "archives_dir": tmp_path / "archives", "board": board, "turn": turn, "max_items": 10,
        "models": MODELS, "cache_path": tmp_path / "cache.sqlite",
        "endpoint": {"provider": "openai_compatible", "base_url": server.base_url, "model": "judge", "max_retries": 0}})
    try:
        generate_otb(config)
        result = judge_otb(config.run_dir)
        yield config, result, endpoint, server
    finally:
        server.close()


def test_every_figure_of_the_summary_equals_the_aggregate_recomputed_by_hand(judged):
    config, result, _, server = judged
    folder = OtbFolder(config.run_dir)
    scores = [json.loads(line) for line in (folder / folder.JUDGE_SCORES).read_text().splitlines()]
    # each reply is what the script says it is: valid ones scored, every other one a judge failure with its reason
    assert len(scores) == len(SCRIPT) == result.calls
    for s in scores:
        valid = SCRIPT[(s["item_id"], s["model"], s["rubric"])][1]
        assert s["outcome"] == ("scored" if valid else "judge_failure") and bool(s["error"]) is not valid, s
    assert result.failures == sum(not valid for _, valid in SCRIPT.values()) == 15
    for task in ("board", "turn"):
        for model in MODELS:
            written = json.loads(folder.summary(task, model).read_text())
            _same(written, _hand_summary(folder, task, model, scores), f"{task}/{model}")
            assert written == result.summaries[(task, model)]

    # and the hand figures are the ones the script implies
    board_a = json.loads(folder.summary("board", "model-a").read_text())
    assert (board_a["items"], board_a["scored"], board_a["format_failures"], board_a["judge_failures"]) == (5, 2, 0, 3)
    assert board_a["mean"] == 3.0  # (4 + 2) / 2
    therapy, trial = board_a["four_decisions"]["therapy"], board_a["four_decisions"]["clinical_trial"]
    assert (therapy["cases"], therapy["mean"], therapy["judge_failures"]) == (2, 3.5, 3)  # sim-1 5, sim-2 2
    assert (trial["cases"], trial["mean"], trial["out_of_scope"]) == (0, None, 2)
    board_b = json.loads(folder.summary("board", "model-b").read_text())
    assert (board_b["scored"], board_b["format_failures"], board_b["judge_failures"], board_b["mean"]) == (3, 1, 1, 2.5)
    assert board_b["four_decisions"]["surgery"] == {"cases": 1, "mean": 1.0, "items": 5, "scored": 2, "out_of_scope": 1,
                                                    "judge_failures": 2, "format_failures": 1}
    turn_a = json.loads(folder.summary("turn", "model-a").read_text())
    assert (turn_a["scored"], turn_a["format_failures"], turn_a["judge_failures"]) == (2, 1, 3)
    assert turn_a["mean"] == pytest.approx((5 + 2 + 1) / 3) and turn_a["critical_error_rate"] == 0.5
    assert turn_a["by_question_type"]["evidence_discussion"]["mean"] is None  # no scored item: no mean
    assert turn_a["by_question_type"]["uncertainty"]["count"] == 1  # the failed qa-2 is not counted as scored
    turn_b = json.loads(folder.summary("turn", "model-b").read_text())
    assert (turn_b["scored"], turn_b["judge_failures"], turn_b["critical_error_rate"]) == (3, 3, pytest.approx(1 / 3))


def test_the_report_shows_the_counts_and_the_calls_table_counts_failed_calls(judged):
    config, result, _, server = judged
    report = write_otb_report(config.run_dir, n_boot=20, html=False)
    judge_usage = report.usage.by_tag["otb_judge"]
    sent = sum(1 for b in server.bodies if (b.get("response_format") or {}).get("json_schema", {}).get("name") in HEALTHY)
    assert sent == result.calls == 29
    # two calls failed at the endpoint (HTTP 400): made, not answered
    assert (judge_usage.calls_made, judge_usage.calls, judge_usage.failures) == (29, 27, 2)
    md = (OtbFolder(config.run_dir) / "otb_report.md").read_text()
    assert "| otb_judge | 29 | 27 | 2 |" in md
    assert "| model-a | turn" not in md and "| model-a | evidence_discussion | 2 | 0 | 0 | 2 | no scored item |" in md
    assert "| model-a | 5 | 3.50 (n=2, 0 out of scope) |" in md and "no case in scope (n=0, 2 out of scope)" in md


def test_a_judge_failure_is_asked_again_on_resume_and_nothing_valid_is_paid_twice(judged):
    config, result, endpoint, server = judged
    endpoint.healed = True
    before = len(server.bodies)
    again = judge_otb(config.run_dir)
    asked = server.bodies[before:]
    assert len(asked) == result.failures == 15 and again.cached == result.calls - result.failures
    assert again.failures == 0
    turn_a = json.loads(OtbFolder(config.run_dir).summary("turn", "model-a").read_text())
    assert (turn_a["scored"], turn_a["judge_failures"], turn_a["format_failures"]) == (5, 0, 1)
