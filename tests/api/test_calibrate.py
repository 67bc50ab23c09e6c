"""`evolve.calibrate`: from a pack folder or an in-memory pack and rubric to a typed summary."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import evolve
from evolve.data import RatingPack, load_pack, write_pack
from evolve.errors import ConfigError, EvolveError, PackError, RubricError, RunError
from evolve.llm import Client
from evolve.rubric import RubricBundle
from evolve.splits import load_splits
from evolve.stats import MIN_CASES
from evolve.testing import FakeProvider, LoopbackChatServer
from evolve.workflows import CalibrationSummary, CriterionSummary, calibrate
from tests.conftest import fake_endpoint, make_tiny_pack, request_of

SMALL = {"budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2}}


def _check_against_report(summary: CalibrationSummary) -> None:
    """Every field of the summary is what the run's report.json says."""
    report = json.loads((summary.run_dir / "report.json").read_text("utf-8"))
    assert summary == CalibrationSummary.from_run(summary.run_dir)
    assert summary.run_id == report["run_id"] and summary.pack == report["pack"] and summary.rubric == report["rubric"]["id"]
    assert list(summary.criteria) == [row["criterion"] for row in report["table5"]]
    for row in report["table5"]:
        got, entry = summary.criteria[row["criterion"]], report["criteria"][row["criterion"]]
        assert got.winner == row["evolved"] == entry["winner"]["candidate_id"]
        assert got.guidance == entry["winner"]["text"] and summary.guidance[row["criterion"]] == got.guidance
        assert got.validation_mae == row["evolved_val_mae"] and got.baselines == {
            "no_guidance": row["no_guidance_val_mae"], "best_initial": row["best_initial_val_mae"],
            "training_median": row["median_val_mae"]}
        assert got.n_validation_targets == row["n_val_targets"] and got.drift == row["drift"]
        assert got.no_better_than_constant == row["no_better_than_constant"]
        for name, verdict in entry["verdicts"].items():
            assert got.verdicts[name].model_dump(exclude={"baseline"}) == verdict


def test_pack_folder_rubric_id_and_client(tmp_path: Path, tiny_pack_dir: Path, fake_client) -> None:
    summary = calibrate(tiny_pack_dir, rubric="kqa-entailment", endpoint=fake_client, run_id="folder",
                        archives_dir=tmp_path / "archives", config=SMALL)
    assert summary.run_dir == tmp_path / "archives" / "folder" and summary.rubric == "kqa-entailment"
    _check_against_report(summary)
    entailment = summary.criteria["entailment"]
    # the fake judge finds the truth only under evolved 'calibrated' guidance
    assert entailment.origin == "mutation" and "calibrated" in entailment.guidance
    assert entailment.validation_mae < entailment.baselines["no_guidance"]
    # the tiny pack has fewer validation cases than MIN_CASES: no better/worse verdict, however clear the estimate
    v = entailment.verdicts["no_guidance"]
    assert v.verdict == "too few cases to tell" and v.n_cases < MIN_CASES and v.estimate is not None and v.estimate < 0
    assert "entailment: winner entailment:m" in summary.describe()
    config = json.loads((summary.run_dir / "config.json").read_text("utf-8"))
    assert config["endpoint"]["provider"] == "fake" and config["budget"]["accepted"] == 2
    # the split was made into the run folder, from the pack's cases
    splits = load_splits(summary.run_dir / "splits")
    assert set(splits.train) | set(splits.validation) | set(splits.holdout) == {c.case_id for c in load_pack(tiny_pack_dir).cases}
    assert not (summary.run_dir / "pack").exists()  # a pack folder is read where it is



def test_no_accepted_mutant_is_a_baseline_run_of_the_initial_guidance(tmp_path: Path, tiny_pack_dir: Path) -> None:
    """``--accepted 0 --max-attempts 0`` (README, Calibrate): nothing is mutated; the winner is an
    initial prompt, judged against the baselines on validation like any winner."""
    tags: list[str] = []
    client = Client(FakeProvider(lambda request: tags.append(request.tag) or fake_endpoint(request)))
    with client, pytest.warns(UserWarning, match="budget.accepted is 0: nothing is evolved"):
        summary = calibrate(tiny_pack_dir, rubric="kqa-entailment", endpoint=client, run_id="base",
                            archives_dir=tmp_path / "archives", config={"budget": {"accepted": 0, "max_attempts": 0}})
    entailment = summary.criteria["entailment"]
    assert "mutation" not in tags and tags.count("judge") > 0
    assert entailment.origin == "initial" and {"no_guidance", "training_median"} <= set(entailment.verdicts)
    warnings = json.loads((summary.run_dir / "report.json").read_text("utf-8"))["warnings"]
    assert any("a baseline run" in w for w in warnings) and "too few to find" not in str(warnings)
    _check_against_report(summary)

def _frame() -> pd.DataFrame:
    pack = make_tiny_pack()
    targets = {t.target_id: t for t in pack.targets}
    cases = {c.case_id: c for c in pack.cases}
    return pd.DataFrame([{"case": r.case_id, "case_text": cases[r.case_id].text, "target": r.target_id,
                          "target_text": targets[r.target_id].text, "statement": targets[r.target_id].statement,
                          "rater": r.rater_id, "criterion": r.criterion, "score": r.score} for r in pack.ratings])


def test_in_memory_pack_and_rubric(tmp_path: Path, fake_client, monkeypatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # nothing is written outside the run folder
    shipped = RubricBundle.load("kqa-entailment")
    bundle = RubricBundle(rubric=shipped.rubric.model_copy(update={"id": "my-entailment"}), protocol=shipped.protocol,
                          guidance=shipped.guidance)
    pack = RatingPack.from_frame(_frame(), rubric=bundle.rubric, name="mine")
    summary = evolve.calibrate(pack, rubric=bundle, endpoint=fake_client, config=SMALL)
    run = summary.run_dir
    assert run.parent == Path("archives") and run.name.startswith("mine-")
    assert sorted(p.name for p in work.iterdir()) == ["archives"]
    assert RubricBundle.load("my-entailment", root=run / "rubric") == bundle
    assert load_pack(run / "pack", prompts_root=run / "rubric") == pack
    config = json.loads((run / "config.json").read_text("utf-8"))
    # (stored relative to the run folder, or as given)
    assert (run / config["prompts_root"]).resolve() == (run / "rubric").resolve() and config["rubric"] == "my-entailment"
    assert summary.rubric == "my-entailment" and summary.pack == "mine"
    _check_against_report(summary)
    v = summary.criteria["entailment"].verdicts["no_guidance"]
    assert v.verdict == "too few cases to tell" and v.n_cases < MIN_CASES and v.estimate is not None and v.estimate < 0
    # the judge of a rubric of our own scores new outputs with that rubric, from its judge file alone
    judge = evolve.load_judge(run)
    assert judge.file.rubric_id == "my-entailment"
    new = pd.DataFrame({"case_text": ["Q?", "Q2?"], "target_text": ["A (truth 2)", "B (truth 0)"], "statement": ["s", "t"]})
    scored = judge.score(new, client=fake_client, run_id="new")
    assert scored.criteria["entailment"].n_scored == 2 and (scored.run_dir / "report.md").is_file()


def test_endpoint_url_means_an_openai_compatible_server(tmp_path: Path, tiny_pack_dir: Path, tiny_splits_dir: Path,
                                                        monkeypatch) -> None:
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))

    def respond(body: dict):
        if "input" in body:  # embeddings: a chat-only server
            return 404, {"error": {"message": "not found"}}
        return fake_endpoint(request_of(body))

    with LoopbackChatServer(respond) as server:
        summary = calibrate(tiny_pack_dir, endpoint=server.base_url, model="scripted", splits=tiny_splits_dir,
                            run_id="url", archives_dir=tmp_path / "archives", config=SMALL)
    config = json.loads((summary.run_dir / "config.json").read_text("utf-8"))
    assert config["endpoint"]["provider"] == "openai_compatible" and config["endpoint"]["base_url"] == server.base_url
    assert config["judge"]["model"] == "scripted"
    assert (summary.run_dir / config["splits"]).resolve() == tiny_splits_dir.resolve()
    assert not (summary.run_dir / "splits").exists()
    _check_against_report(summary)


def test_a_configs_run_id_archives_and_splits_are_used_unless_arguments_name_others(
        tmp_path: Path, tiny_pack_dir: Path, tiny_splits_dir: Path, fake_client, monkeypatch) -> None:
    from evolve.workflows._api import _placed

    monkeypatch.setenv("EVOLVE_MODEL", "from-environment")
    config = {**SMALL, "run_id": "from-config", "archives_dir": str(tmp_path / "mine"), "splits": str(tiny_splits_dir),
              "endpoint": {"model": "from-config"}}
    summary = calibrate(tiny_pack_dir, endpoint=fake_client, config=config)
    assert summary.run_dir == tmp_path / "mine" / "from-config"
    assert not (summary.run_dir / "splits").exists()  # the configuration's split, not a new one
    stored = json.loads((summary.run_dir / "config.json").read_text("utf-8"))
    assert (summary.run_dir / stored["splits"]).resolve() == tiny_splits_dir.resolve()
    assert stored["endpoint"]["model"] == "from-environment"  # a config is below the environment, as on the command line
    # arguments beat the configuration, a dict or a file alike; without either, the defaults
    file = tmp_path / "config.json"
    file.write_text(json.dumps(config), "utf-8")
    for data, path in ((config, None), (None, file)):
        assert _placed(tiny_pack_dir, "arg", tmp_path / "a", tmp_path / "s", "quick", path, data) == (
            "arg", tmp_path / "a", tmp_path / "s")
        assert _placed(tiny_pack_dir, None, None, None, "quick", path, data) == (
            "from-config", str(tmp_path / "mine"), str(tiny_splits_dir))
    run_id, archives, splits = _placed(tiny_pack_dir, None, None, None, "quick", None, None)
    assert run_id.startswith("tiny-") and archives == "archives" and splits is None


def test_a_judge_shown_reference_answers_refuses_new_cases_without_one(tmp_path: Path, fake_client) -> None:
    """A criterion whose rubric shows the case's reference answer was validated with it in every
    prompt: new cases without one would be judged with prompts never validated."""
    import dataclasses

    from evolve.data import RubricRef

    shipped = RubricBundle.load("kqa-entailment")
    shown = shipped.rubric.criteria[0].model_copy(update={"show_reference": True})
    bundle = RubricBundle(rubric=shipped.rubric.model_copy(update={"id": "kqa-shown", "criteria": (shown,)}),
                          protocol=shipped.protocol, guidance=shipped.guidance)
    tiny = make_tiny_pack()  # every case has a reference answer
    pack = dataclasses.replace(tiny, manifest=tiny.manifest.model_copy(
        update={"rubric": RubricRef(id="kqa-shown", version=bundle.rubric.version)}))
    summary = calibrate(pack, rubric=bundle, endpoint=fake_client, run_id="shown", archives_dir=tmp_path, config=SMALL)
    judge = evolve.load_judge(summary.run_dir)
    assert judge.file.criteria["entailment"].reference == "required"
    new = pd.DataFrame({"case_text": ["Q?"], "target_text": ["A (truth 2)"], "statement": ["s"]})
    with pytest.raises(PackError, match=r"1 case\(s\) have no reference answer .*--column reference=COLUMN"):
        judge.score(new, client=fake_client, run_dir=tmp_path / "unreferenced")
    assert not (tmp_path / "unreferenced").exists()
    scored = judge.score(new.assign(reference="The reference."), client=fake_client, run_dir=tmp_path / "referenced")
    assert scored.criteria["entailment"].n_scored == 1


def test_refusals_write_nothing(tmp_path: Path, tiny_pack_dir: Path, fake_client) -> None:
    archives = tmp_path / "archives"
    with pytest.raises(ConfigError, match="embedded"):
        calibrate(tiny_pack_dir, endpoint={"provider": "embedded", "base_url": "http://127.0.0.1:9/v1"}, run_id="a",
                  archives_dir=archives)
    with pytest.raises(EvolveError, match="endpoint="):
        calibrate(tiny_pack_dir, endpoint=42, run_id="a", archives_dir=archives)  # type: ignore[arg-type]
    with pytest.raises(RubricError, match="not a rubric folder"):
        calibrate(tiny_pack_dir, rubric=tmp_path / "nowhere", endpoint=fake_client, run_id="a", archives_dir=archives)
    with pytest.raises(ConfigError, match="config= takes a dict"):
        calibrate(tiny_pack_dir, endpoint=fake_client, config=["run_id"], archives_dir=archives)  # type: ignore[arg-type]
    # a start that fails before the run begins removes the folders it made, the archives folder too
    with pytest.raises(RunError, match="nope"):
        calibrate(tiny_pack_dir, criteria=["nope"], endpoint=fake_client, run_id="a", archives_dir=archives)
    with pytest.raises(EvolveError, match="nowhere"):
        calibrate(tiny_pack_dir, splits=tmp_path / "nowhere", endpoint=fake_client, run_id="a", archives_dir=archives)
    assert not archives.exists()


def test_an_existing_run_is_never_overwritten(tmp_path: Path, tiny_pack_dir: Path, fake_client) -> None:
    first = calibrate(tiny_pack_dir, endpoint=fake_client, run_id="once", archives_dir=tmp_path, config=SMALL)
    before = {p: p.read_bytes() for p in first.run_dir.rglob("*") if p.is_file()}
    with pytest.raises(RunError, match="already holds a run"):
        calibrate(make_tiny_pack(), endpoint=fake_client, run_id="once", archives_dir=tmp_path, config=SMALL)
    assert {p: p.read_bytes() for p in first.run_dir.rglob("*") if p.is_file()} == before


def test_import_evolve_stays_light() -> None:
    import subprocess
    import sys

    code = ("import sys, evolve; heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'numpy', 'ribs', 'pydantic') or m.startswith(('evolve.calibration', 'evolve.workflows')));"
            "print(heavy); assert not heavy; assert 'calibrate' in dir(evolve)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _own_rubric_and_pack(tmp_path: Path) -> tuple[RubricBundle, Path, Path]:
    """A rubric of one's own written under ``tmp_path/roots`` and a pack folder rated on it."""
    shipped = RubricBundle.load("kqa-entailment")
    bundle = RubricBundle(rubric=shipped.rubric.model_copy(update={"id": "own"}), protocol=shipped.protocol,
                          guidance=shipped.guidance)
    folder = bundle.write(tmp_path / "roots")
    pack_dir = tmp_path / "packs" / "own"
    write_pack(RatingPack.from_frame(_frame(), rubric=bundle.rubric, name="own"), pack_dir)
    return bundle, folder, pack_dir


@pytest.mark.parametrize("how", ["rubric folder", "config prompts_root"])
def test_rubric_of_ones_own_by_folder_or_prompts_root(tmp_path: Path, fake_client, how: str) -> None:
    bundle, folder, pack_dir = _own_rubric_and_pack(tmp_path)
    where = {"rubric": folder} if how == "rubric folder" else {"config": {**SMALL, "prompts_root": str(folder.parent)}}
    summary = calibrate(pack_dir, endpoint=fake_client, run_id="own", archives_dir=tmp_path / "archives",
                        **{"config": SMALL, **where})
    assert summary.rubric == "own" and not (summary.run_dir / "rubric").exists()  # read where it is
    config = json.loads((summary.run_dir / "config.json").read_text("utf-8"))
    assert (summary.run_dir / config["prompts_root"]).resolve() == folder.parent.resolve()
    _check_against_report(summary)


@pytest.mark.parametrize(("drift", "warned"), [("drift", True), ("review", True), ("ok", False), (None, False)])
def test_describe_warns_of_a_winner_the_drift_audit_flagged(drift, warned) -> None:
    summary = CriterionSummary(criterion="entailment", name="Entailment", winner="entailment:m003", origin="mutation",
                               guidance="Read the statement literally.", train_mae=0.4, validation_mae=0.5,
                               baselines={"no_guidance": 0.9}, ceiling_mae=None, verdicts={},
                               n_validation_targets=6, drift=drift)
    line = summary.describe()
    assert line.startswith("entailment: winner entailment:m003 (mutation), validation MAE 0.500 (no_guidance 0.900)")
    assert ("WARNING: the drift audit flagged this guidance" in line) is warned
    if warned:
        assert f"'{drift}'" in line and "audit.md" in line


@pytest.mark.parametrize(("flag", "warned"), [(True, True), (False, False), (None, False)])
def test_describe_warns_of_a_winner_no_better_than_a_constant(flag, warned) -> None:
    summary = CriterionSummary(criterion="clarity", name="Clarity", winner="clarity:i01", origin="initial",
                               guidance="Judge clarity.", train_mae=0.8, validation_mae=0.875,
                               baselines={"training_median": 0.875}, ceiling_mae=None, verdicts={},
                               n_validation_targets=4, drift="ok", no_better_than_constant=flag)
    assert ("WARNING: no better than a constant" in summary.describe()) is warned
    assert "drift audit" not in summary.describe()
