"""The round trip of issue 14 item 6 on INVENTED data: clinician ratings of a run's answers ->
a rating pack of rubric otb -> evolve calibrate -> the winners guide evolve otb judge."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.calibration import calibrate
from evolve.cli import app
from evolve.config import resolve_config
from evolve.data import load_pack
from evolve.errors import DataError
from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.otb import generate_otb, judge_otb, otb_rating_pack, resolve_otb_config
from evolve.splits import make_splits, write_splits
from evolve.testing import FakeProvider
from tests.otb.test_records_extract import TURN, _write

runner = CliRunner()
N = 12


def endpoint(request: ChatRequest) -> str:
    if request.tag == "otb_turn":
        n = int(request.messages[-1].content.split("INVENTED question ")[1].split("?")[0])
        return json.dumps({"answer": f"Answer {n}: {'chemotherapy first' if n % 2 else 'surgery first'}."})
    if request.tag == "mutation":
        return json.dumps({"analysis": "scripted", "guidance": f"Weigh the sequence of treatments first ({request.seed})."})
    if request.tag == "judge":  # evolve's own judge, during calibration
        return json.dumps({"rationale": "scripted", "score": "4" if "chemotherapy first" in request.messages[-1].content else "2"})
    fmt = request.response_format["json_schema"]["name"]
    assert fmt == "clinical_equivalence"
    return json.dumps({"clinical_equivalence_score": 3, "critical_error": False, "unsupported_claim": False, "rationale": "r"})


@pytest.fixture
def run(tmp_path: Path):
    questions = [{**TURN, "qa_id": f"qa-{n:02d}", "case_id": f"case-{n // 2}", "question": f"INVENTED question {n}?"}
                 for n in range(N)]
    config = resolve_otb_config(preset="quick", environ={}, overrides={
        "run_id": "otb", "archives_dir": tmp_path / "archives", "turn": _write(tmp_path / "task2_x.jsonl", questions),
        "max_items": N, "models": ("model-a",), "endpoint": {"provider": "fake", "model": "judge-m"},
        "judge": {"model": "judge-m"}, "cache_path": tmp_path / "cache.sqlite"})
    provider = FakeProvider(endpoint)
    client = Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite"))
    generate_otb(config, client=client)
    yield config.run_dir, client, provider
    client.close()


def _ratings(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["item_id", "model", "rater_id", "criterion", "score", "comment"])
        w.writeheader()
        w.writerows(rows)
    return path


def test_ratings_calibrate_the_otb_judge_and_its_winners_guide_otb_judge(tmp_path, run):
    run_dir, client, provider = run
    rows = [{"item_id": f"qa-{n:02d}", "model": "model-a", "rater_id": f"oncologist-{r}", "criterion": c,
             "score": str(s), "comment": "INVENTED"}
            for n in range(N) for r in (1, 2)
            for c, s in (("clinical_equivalence", 5 if n % 2 else 2), ("critical_error", 0 if n % 2 else 1))]
    ratings = _ratings(tmp_path / "ratings.csv", rows)
    result = runner.invoke(app, ["otb", "import-ratings", str(run_dir), str(ratings), "--out", str(tmp_path / "pack")])
    assert result.exit_code == 0, result.output
    assert f"{N} items, {N} answers, {len(rows)} ratings (rubric otb)" in result.stdout
    pack = load_pack(tmp_path / "pack")
    target = pack.targets[0]
    assert target.component == "turn_answer" and target.text.startswith("Question to the medical oncologist: INVENTED")
    assert pack.cases[0].reference_answer == TURN["reference_answer"]
    write_splits(make_splits(pack, holdout_fraction=0.0, validation_fraction=0.5, seed=1), tmp_path / "splits")
    cal = resolve_config(preset="quick", environ={}, overrides={
        "run_id": "cal", "pack": tmp_path / "pack", "splits": tmp_path / "splits", "archives_dir": tmp_path / "archives",
        "criteria": ["clinical_equivalence"], "audit": False, "endpoint": {"provider": "fake", "model": "judge-m"},
        "judge": {"model": "judge-m"}, "cache_path": tmp_path / "cache.sqlite", "parallel_criteria": 1})
    calibrated = calibrate(cal, client=client)
    winner = next(w for w in calibrated.winners.values())
    assert winner  # a selected candidate id
    judged = judge_otb(run_dir, client=client, calibration_run=calibrated.run_dir)
    assert set(judged.guidance) == {"clinical_equivalence"} and judged.warnings == []
    guided = [r for r in provider.requests if r.tag == "otb_judge"]
    assert guided and all("<GUIDANCE>\n" in r.messages[-1].content for r in guided)
    scores = [json.loads(line) for line in (run_dir / "judge_scores.jsonl").read_text().splitlines()]
    assert all(s["guided"] for s in scores)
    # a winner that validated worse than no guidance is used as given, with a warning in words
    (calibrated.run_dir / "report.json").write_text(json.dumps(
        {"table5": [{"criterion": "clinical_equivalence", "vs_none_verdict": "worse"}]}))
    warned = judge_otb(run_dir, client=client, calibration_run=calibrated.run_dir)
    assert any("worse than no guidance on validation for clinical_equivalence" in w for w in warned.warnings)


def test_bad_ratings_are_listed_with_their_lines(tmp_path, run):
    run_dir, _, _ = run
    rows = [{"item_id": "qa-99", "model": "model-a", "rater_id": "o1", "criterion": "clinical_equivalence", "score": "3", "comment": ""},
            {"item_id": "qa-01", "model": "model-a", "rater_id": "o1", "criterion": "conclusion_alignment", "score": "3", "comment": ""},
            {"item_id": "qa-01", "model": "model-a", "rater_id": "o1", "criterion": "clinical_equivalence", "score": "7", "comment": ""},
            {"item_id": "qa-01", "model": "model-a", "rater_id": "o1", "criterion": "tone", "score": "3", "comment": ""}]
    with pytest.raises(DataError) as err:
        otb_rating_pack(run_dir, _ratings(tmp_path / "r.csv", rows), name="x")
    msg = str(err.value)
    assert "r.csv line 2: no usable answer of model 'model-a' to item 'qa-99'" in msg
    assert "r.csv line 3: criterion 'conclusion_alignment' does not apply to a turn answer" in msg
    assert "r.csv line 4: score '7' is not an integer 1-5" in msg and "r.csv line 5: criterion 'tone'" in msg


def test_the_shipped_rated_example_is_a_valid_pack_of_rubric_otb():
    root = Path(__file__).resolve().parents[2] / "ratings"
    pack = load_pack(root / "otb-rated-example")
    assert pack.manifest.rubric.id == "otb" and len(pack.cases) == 7 and len(pack.targets) == 14
    assert {t.component for t in pack.targets} == {"turn_answer", "board_conclusion"}
    assert all(r.comment == "INVENTED rating" for r in pack.ratings)
    splits = make_splits(pack, holdout_fraction=0.0, validation_fraction=0.4, seed=1)
    assert splits.train and splits.validation
