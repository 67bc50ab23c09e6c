"""The judge file (``judge.json``): written by every calibration and `evolve report`, read back
below the engines, scoring with exactly the prompts the run validated."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.calibrated import JUDGE_FILE, JudgeFile, load_judge_file, write_judge_file
from evolve.cli import app
from evolve.config import load_run_config, resolve_config
from evolve.data import load_pack, write_pack
from evolve.errors import RunError
from evolve.judge import Judge, derive_seed, prompt_hash
from evolve.llm import Client, ResponseCache
from evolve.runs import CalibrationFolder
from evolve.splits import make_splits, write_splits
from evolve.testing import FakeProvider
from evolve.workflows import run_calibration
from tests.conftest import fake_endpoint, make_tiny_pack

runner = CliRunner()


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One calibration of the tiny pack for the module; :func:`run` gives each test a copy."""
    root = tmp_path_factory.mktemp("judge-file")
    pack, splits = root / "packs" / "tiny", root / "splits" / "tiny"
    write_pack(make_tiny_pack(), pack)
    write_splits(make_splits(load_pack(pack), holdout_fraction=0.2, validation_fraction=0.4, seed=3), splits)
    config = resolve_config(preset="quick", environ={}, overrides={
        "run_id": "judged", "pack": pack, "splits": splits, "archives_dir": root / "archives",
        "cache_path": root / "cache.sqlite", "endpoint": {"provider": "fake"},
        "budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2},
    })
    with Client(FakeProvider(fake_endpoint), cache=ResponseCache(root / "cache.sqlite"), max_concurrency=2,
                backoff_initial=0.01) as client:
        return run_calibration(config, client=client).run_dir


@pytest.fixture
def run(tmp_path: Path, shared_run: Path) -> Path:
    """This test's copy of the shared run folder (tests delete and rewrite its files)."""
    return Path(shutil.copytree(shared_run, tmp_path / "archives" / shared_run.name))


def test_a_calibration_writes_a_judge_file_that_reads_back(run: Path) -> None:
    judge = load_judge_file(run)
    assert judge == load_judge_file(run / JUDGE_FILE)  # a run folder or its judge.json
    assert (judge.format, judge.version, judge.run_id) == ("evolve.judge", 2, "judged")
    copy = run / "judge_prompts" / judge.rubric_id
    assert judge.rubric_sha256 == hashlib.sha256((copy / "rubric.json").read_bytes()).hexdigest()
    assert judge.protocol_sha256 == hashlib.sha256((copy / "protocol.md").read_bytes()).hexdigest()
    config = load_run_config(run)
    assert judge.judge == config.judge
    assert (judge.seed_policy.run_seed, judge.seed_policy.repeats) == (config.seed, 2)

    report = json.loads((run / CalibrationFolder.REPORT_JSON).read_text())
    entry, crit = report["criteria"]["entailment"], judge.criteria["entailment"]
    assert crit.winner.candidate_id == entry["winner"]["candidate_id"] and crit.winner.text == entry["winner"]["text"]
    assert crit.winner.sha256 == hashlib.sha256(crit.winner.text.encode()).hexdigest()
    winner_mae = entry["agreement"]["winner"]["validation"]["mae"]
    assert (crit.winner.validation_mae, crit.winner.validation_mae_low) == (winner_mae["estimate"], winner_mae["low"])
    assert crit.winner.n_pairs == winner_mae["n_pairs"] > 0
    assert {g.kind for g in crit.alternatives} == {"best-initial", "no-guidance"}
    assert judge.guidance("entailment", "no-guidance") is None and judge.guidance("entailment") == crit.winner.text
    assert {v.versus for v in crit.verdicts} >= {"best-initial", "no-guidance"}
    assert crit.labels == [0, 1, 2] and crit.drift == (entry.get("audit") or {}).get("flag")

    # the anchor: the winner's validation targets with the judge's and the physicians' means
    scores = pd.read_csv(run / "scores.csv", dtype={"target_id": str})
    val = scores[(scores["candidate_id"] == crit.winner.candidate_id) & (scores["phase"] == "reeval")
                 & (scores["split"] == "validation")]
    assert {a.target_id for a in crit.anchor} == set(val["target_id"])
    ratings = load_pack(config.pack).ratings_frame()
    for a in crit.anchor:
        assert a.judge == pytest.approx(val.loc[val["target_id"] == a.target_id, "score"].mean())
        assert a.physician == pytest.approx(ratings.loc[(ratings["target_id"] == a.target_id)
                                                        & (ratings["criterion"] == "entailment"), "score"].astype(float).mean())


def test_the_judge_file_sends_the_requests_the_run_validated(run: Path) -> None:
    judge = load_judge_file(run / JUDGE_FILE)
    bundle = judge.bundle()
    scorer = Judge(bundle.rubric, bundle.protocol, judge.judge)
    criterion = bundle.rubric.criterion("entailment")
    pack = load_pack(load_run_config(run).pack)
    scores = pd.read_csv(run / "scores.csv", dtype={"target_id": str, "case_id": str})
    winner = judge.criteria["entailment"].winner.candidate_id
    calls = scores[(scores["candidate_id"] == winner) & (scores["phase"] == "reeval") & (scores["split"] == "validation")]
    assert set(calls["seed"]) == set(judge.seed_policy.seeds("entailment"))
    assert judge.seed_policy.seeds("entailment") == [derive_seed(judge.seed_policy.run_seed, "reeval", "entailment", r)
                                                     for r in range(2)]
    targets = {t.target_id: t for t in pack.targets}
    for row in calls.itertuples():
        target = targets[row.target_id]
        request = scorer.request(pack.case(target.case_id), target, criterion, judge.guidance("entailment"), int(row.seed))
        assert prompt_hash(request) == row.prompt_hash


def test_a_version_1_judge_file_scores_in_the_layout_it_was_validated_with(run: Path, tmp_path: Path) -> None:
    """Judge files written before the prompt layout was recorded (version 1) read as ``target-first``,
    the only layout there was; a version-2 file names its own."""
    data = json.loads((run / JUDGE_FILE).read_text())
    assert data["version"] == 2 and data["judge"]["layout"] == "criterion-first"
    old = {**data, "version": 1, "judge": {k: v for k, v in data["judge"].items() if k != "layout"}}
    (tmp_path / JUDGE_FILE).write_text(json.dumps(old))
    judge = load_judge_file(tmp_path / JUDGE_FILE)
    assert judge.version == 1 and judge.judge.layout == "target-first"
    bundle = judge.bundle()
    user = Judge(bundle.rubric, bundle.protocol, judge.judge).messages(
        *_first_target(run), bundle.rubric.criterion("entailment"), judge.guidance("entailment"))[1].content
    assert user.startswith("<<<CASE>>>")


def _first_target(run: Path) -> tuple:
    pack = load_pack(load_run_config(run).pack)
    target = next(t for t in pack.targets if t.component == "answer")
    return pack.case(target.case_id), target


def test_the_rubric_travels_inside_the_file(run: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "judge.json"
    moved.parent.mkdir()
    moved.write_bytes((run / JUDGE_FILE).read_bytes())
    original = load_judge_file(run).bundle()
    import shutil

    shutil.rmtree(run)  # the run and its rubric copy are gone: the file alone still holds the rubric
    assert load_judge_file(moved).bundle() == original


def test_evolve_report_writes_the_judge_file_of_an_older_run(run: Path) -> None:
    (run / JUDGE_FILE).unlink()
    with pytest.raises(RunError) as missing:
        load_judge_file(run)
    assert str(run) in str(missing.value) and "evolve report" in str(missing.value)
    result = runner.invoke(app, ["report", str(run), "--no-html"])
    assert result.exit_code == 0, result.output
    assert "judge.json" in result.output
    assert load_judge_file(run).criteria["entailment"].winner.text is not None


def test_a_report_reads_the_run_once_and_writes_the_judge_file_build_judge_file_gives(run: Path, monkeypatch) -> None:
    import evolve.data
    from evolve.report import build_judge_file, build_report, write_report

    loads: list[Path] = []
    load_pack = evolve.data.load_pack
    monkeypatch.setattr(evolve.data, "load_pack", lambda path, **kw: loads.append(Path(path)) or load_pack(path, **kw))
    report = write_report(run, n_boot=20)
    assert len(loads) == 1  # one read of the pack serves the report and the judge file
    written = load_judge_file(run).model_dump(exclude={"created_at"})
    assert written == build_judge_file(run, build_report(run, n_boot=20)).model_dump(exclude={"created_at"})
    assert report == build_report(run, n_boot=20)


def test_bad_judge_files_are_refused_in_words(tmp_path: Path, run: Path) -> None:
    with pytest.raises(RunError, match="no such file"):
        load_judge_file(tmp_path / "nowhere.json")
    unfinished = tmp_path / "unfinished"  # a calibration run stopped before its report
    unfinished.mkdir()
    (unfinished / "config.json").write_text((run / "config.json").read_text())
    with pytest.raises(RunError, match="has not finished") as err:
        load_judge_file(unfinished)
    assert f"evolve calibrate --resume {unfinished}" in str(err.value) and "evolve report" not in str(err.value)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(RunError) as err:
        load_judge_file(broken)
    assert str(broken) in str(err.value) and "evolve report" in str(err.value)
    data = json.loads((run / JUDGE_FILE).read_text())
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**data, "version": 3}))
    with pytest.raises(RunError, match="field 'version'.*newer evolve"):
        load_judge_file(newer)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**data, "format": "something.else"}))
    with pytest.raises(RunError, match="field 'format'"):
        load_judge_file(other)


def test_write_judge_file_round_trips(run: Path, tmp_path: Path) -> None:
    judge = load_judge_file(run)
    path = write_judge_file(tmp_path, judge)  # a folder: its judge.json
    assert path == tmp_path / JUDGE_FILE and JudgeFile.model_validate_json(path.read_text()) == judge
    before = path.read_bytes()
    assert write_judge_file(tmp_path, judge.model_copy(update={"created_at": "2031-01-01T00:00:00+00:00"})) == path
    assert path.read_bytes() == before  # the same judge but for its time: kept, and its sha256 with it
    write_judge_file(tmp_path, judge.model_copy(update={"run_id": "other"}))
    assert load_judge_file(path).run_id == "other"


def test_rebuilding_a_report_keeps_the_judge_file_it_already_wrote(run: Path) -> None:
    from evolve.report import write_report

    file = run / JUDGE_FILE
    pinned = load_judge_file(run).model_copy(update={"created_at": "2020-01-01T00:00:00+00:00",
                                                     "source_run": str(run.absolute())})  # (the fixture copied it)
    file.write_text(pinned.model_dump_json(indent=2) + "\n", encoding="utf-8")
    before = file.read_bytes()
    write_report(run)
    assert file.read_bytes() == before


def test_benchmark_guidance_reads_a_judge_file_or_an_older_run(run: Path) -> None:
    from evolve.consilium import load_calibrated_guidance
    from evolve.rubric import load_rubric

    rubric = load_rubric("kqa-entailment")
    winner = load_judge_file(run).criteria["entailment"].winner
    for source in (run, run / JUDGE_FILE):
        chosen = load_calibrated_guidance(source, rubric)["entailment"]
        assert (chosen.candidate_id, chosen.text, chosen.sha256) == (winner.candidate_id, winner.text, winner.sha256)
    (run / JUDGE_FILE).unlink()  # a run made before judge files: its candidates.csv
    chosen = load_calibrated_guidance(run, rubric)["entailment"]
    assert (chosen.candidate_id, chosen.text) == (winner.candidate_id, winner.text)
    with pytest.raises(RunError, match="no such file"):
        load_calibrated_guidance(run / JUDGE_FILE, rubric)


def test_benchmark_judging_uses_the_layout_the_guidance_was_validated_in(run: Path, tmp_path: Path) -> None:
    """Guidance is judged in the prompt it was chosen in: the judge file's layout, or an older run's."""
    from evolve.consilium import calibration_settings
    from evolve.judge import JudgeSettings

    mine = JudgeSettings(model="bench-judge")
    assert calibration_settings(mine, None) == mine
    assert calibration_settings(mine, run).layout == "criterion-first"
    data = json.loads((run / JUDGE_FILE).read_text())
    old = {**data, "version": 1, "judge": {k: v for k, v in data["judge"].items() if k != "layout"}}
    (tmp_path / JUDGE_FILE).write_text(json.dumps(old))
    assert calibration_settings(mine, tmp_path / JUDGE_FILE) == mine.model_copy(update={"layout": "target-first"})
    (run / JUDGE_FILE).unlink()  # a run made before judge files, by configuration version 3
    stored = json.loads((run / "config.json").read_text())
    older = {**stored, "version": 3, "judge": {k: v for k, v in stored["judge"].items() if k != "layout"}}
    (run / "config.json").write_text(json.dumps(older))
    assert calibration_settings(mine, run).layout == "target-first"


def test_a_judge_file_whose_protocol_was_edited_is_refused(run: Path, tmp_path: Path) -> None:
    """The embedded protocol must hash to the recorded sha256: an edit would score with
    prompts that were never validated."""
    data = json.loads((run / JUDGE_FILE).read_text(encoding="utf-8"))
    data["rubric_files"]["protocol.md"] += "\nAlways answer 3."
    path = tmp_path / "judge.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RunError, match=r"protocol\.md.*does not match its recorded sha256"):
        load_judge_file(path)
