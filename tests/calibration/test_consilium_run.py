"""Nine isolated criterion archives in one run on the consilium rubric (fake provider)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from evolve.config import resolve_config
from evolve.data import load_pack, write_pack
from evolve.errors import RunError
from evolve.llm import Client, ResponseCache
from evolve.rubric import load_rubric
from evolve.splits import make_splits, write_splits
from evolve.testing import FakeProvider
from evolve.workflows import run_calibration as calibrate
from tests.conftest import copy_cached_answers, fake_consilium_endpoint, make_consilium_pack

NINE = [
    "factual_accuracy", "problem_prioritisation", "data_use", "reasoning_coherence", "differential_diagnosis",
    "final_conclusion", "management", "clinical_safety", "panel_adequacy",
]


@pytest.fixture
def consilium_inputs(tmp_path: Path) -> tuple[Path, Path]:
    pack_dir = tmp_path / "packs" / "consilium-tiny"
    write_pack(make_consilium_pack(), pack_dir)
    splits = make_splits(load_pack(pack_dir), holdout_fraction=0.0, validation_fraction=0.34, seed=1)
    split_dir = tmp_path / "splits" / "consilium-tiny"
    write_splits(splits, split_dir)
    return pack_dir, split_dir


def _config(tmp_path: Path, pack: Path, splits: Path, **extra):
    return resolve_config(
        preset="quick",
        overrides={
            "run_id": "nine", "pack": pack, "splits": splits, "rubric": "consilium",
            "archives_dir": tmp_path / "archives", "cache_path": tmp_path / "cache.sqlite",
            "endpoint": {"provider": "fake"},
            "budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2,
                       "max_train_targets": None, "max_validation_targets": None},
            **extra,
        },
        environ={},
    )


def _client(tmp_path: Path) -> tuple[Client, FakeProvider]:
    provider = FakeProvider(fake_consilium_endpoint)
    return Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite"), max_concurrency=4, backoff_initial=0.01), provider


@pytest.fixture(scope="module")
def nine(tmp_path_factory: pytest.TempPathFactory):
    """One nine-criterion run shared by the tests that read it: ``(config, result, provider)``."""
    tmp = tmp_path_factory.mktemp("nine")
    pack_dir, split_dir = tmp / "packs" / "consilium-tiny", tmp / "splits" / "consilium-tiny"
    write_pack(make_consilium_pack(), pack_dir)
    write_splits(make_splits(load_pack(pack_dir), holdout_fraction=0.0, validation_fraction=0.34, seed=1), split_dir)
    config = _config(tmp, pack_dir, split_dir)
    client, provider = _client(tmp)
    with client:
        result = calibrate(config, client=client)
    return config, result, provider


def test_nine_archives_concurrently_with_structural_exclusions(nine):
    config, result, provider = nine
    pack_dir = config.pack
    run = result.run_dir
    assert sorted(result.winners) == sorted(NINE)  # 1-9 evolved; 10 judged-only; 11 physician-only
    events = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    assert sorted(e["criterion"] for e in events if e["event"] == "criterion_started") == sorted(NINE)

    # each archive is isolated: every candidate of a criterion descends from that criterion
    cands = pd.read_csv(run / "candidates.csv", keep_default_na=False)
    for _, row in cands[cands["origin"] == "mutation"].iterrows():
        assert row["parent_id"].split(":")[0] == row["criterion"]
    # guided by 'calibrated' mutants, the fake judge is exact: every winner is a mutant
    assert set(cands.loc[cands["selected"].astype(str) == "True", "origin"]) == {"mutation"}

    # no judge call on a structurally inapplicable pair, and each call saw one target component
    rubric = load_rubric("consilium")
    pack = load_pack(pack_dir)
    scores = pd.read_csv(run / "scores.csv", dtype={"target_id": str})
    components = scores["target_id"].map(lambda t: pack.target(t).component)
    assert all(rubric.applies(c, k) for c, k in zip(scores["criterion"], components))
    judge_requests = [r for r in provider.requests if r.tag == "judge"]
    assert all(r.messages[-1].content.count("<<<TARGET:") == 1 for r in judge_requests)
    # the reference diagnosis is shown for final_conclusion only
    with_ref = {r.messages[-1].content.split("CRITERION: ", 1)[1].split("\n", 1)[0]
                for r in judge_requests if "<<<REFERENCE" in r.messages[-1].content}
    assert with_ref == {rubric.criterion("final_conclusion").name}

    excl = pd.read_csv(run / "exclusions.csv")
    pairs = set(zip(excl["criterion"], excl["component"]))
    assert ("data_use", "opinion") in pairs and ("final_conclusion", "reasoning") in pairs
    assert ("panel_adequacy", "final") in pairs and ("factual_accuracy", "case") in pairs
    assert not any(rubric.applies(c, k) for c, k in pairs)
    assert (excl["n_targets"] > 0).all()

    report = json.loads((run / "report.json").read_text())
    assert sorted(report["criteria"]) == sorted(NINE)

    # every score records the rubric version and the exact prompt's hash
    assert set(scores["rubric_version"].astype(str)) == {rubric.version}
    assert scores["prompt_hash"].str.fullmatch(r"[0-9a-f]{16}").all()


def test_resume_of_concurrent_run_pays_nothing_and_reproduces_scores(tmp_path, nine):
    shared, _, _ = nine  # resumed in a copy (run folder and cache), so the shared run stays as it was
    shutil.copytree(shared.run_dir, tmp_path / "archives" / shared.run_id)
    copy_cached_answers(shared.cache_path, tmp_path / "cache.sqlite")
    config = shared.model_copy(update={"archives_dir": tmp_path / "archives", "cache_path": tmp_path / "cache.sqlite"})
    first = pd.read_csv(config.run_dir / "scores.csv")
    client2, provider2 = _client(tmp_path)
    with client2:
        calibrate(config.model_copy(update={"parallel_criteria": 3}), client=client2, resume=True)
    assert provider2.requests == []  # everything answered by the cache
    second = pd.read_csv(config.run_dir / "scores.csv")
    key = ["criterion", "candidate_id", "target_id", "phase", "repeat"]
    a = first.sort_values(key).reset_index(drop=True).drop(columns=["cached"])
    b = second.sort_values(key).reset_index(drop=True).drop(columns=["cached"])
    pd.testing.assert_frame_equal(a, b)


def test_rubric_mismatch_is_refused(tmp_path, tiny_pack_dir, tiny_splits_dir):
    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir)
    with pytest.raises(RunError, match="rated on rubric 'kqa-entailment'"):
        calibrate(config, client=_client(tmp_path)[0])


def test_physician_only_criterion_cannot_be_calibrated(tmp_path, consilium_inputs):
    pack_dir, split_dir = consilium_inputs
    config = _config(tmp_path, pack_dir, split_dir, criteria=("overall_quality",))
    with pytest.raises(RunError, match="physician-only"):
        calibrate(config, client=_client(tmp_path)[0])


def test_table5_and_agreement_recomputed_from_artifacts(nine):
    """table5.csv and agreement.csv agree with scores.csv + ratings.csv recomputed independently."""
    from sklearn.metrics import cohen_kappa_score

    config, _, _ = nine
    pack_dir, run = config.pack, config.run_dir
    scores = pd.read_csv(run / "scores.csv", dtype={"target_id": str})
    ratings = pd.read_csv(pack_dir / "ratings.csv", dtype={"target_id": str})
    table = pd.read_csv(run / "table5.csv")
    agreement = pd.read_csv(run / "agreement.csv")
    assert table["criterion"].tolist() == [c.criterion_id for c in load_rubric("consilium").criteria if c.criterion_id in NINE] + ["macro"]
    for criterion in ("data_use", "clinical_safety"):
        row = table[table["criterion"] == criterion].iloc[0]
        sel = scores[(scores["criterion"] == criterion) & (scores["phase"] == "reeval") & (scores["split"] == "validation")
                     & (scores["candidate_id"] == row["evolved"]) & (scores["outcome"] == "score")]
        pairs = sel.merge(ratings[ratings["criterion"] == criterion], on="target_id", suffixes=("_judge", "_rater"))
        errors = pairs["score_judge"] - pairs["score_rater"]
        assert row["evolved_val_mae"] == pytest.approx(errors.abs().mean())
        assert row["evolved_val_signed_error"] == pytest.approx(errors.mean())
        got = agreement[(agreement["criterion"] == criterion) & (agreement["row"] == "winner")
                        & (agreement["split"] == "validation")].set_index("statistic")
        assert got.loc["mae", "estimate"] == pytest.approx(errors.abs().mean())
        qwk = cohen_kappa_score(pairs["score_judge"], pairs["score_rater"], weights="quadratic", labels=[0, 1, 2, 3])
        assert got.loc["qwk", "estimate"] == pytest.approx(qwk)
        assert got.loc["mae", "low"] <= got.loc["mae", "estimate"] <= got.loc["mae", "high"]
        assert got.loc["mae", "n_clusters"] == pairs["case_id_judge"].nunique()
    macro = table[table["criterion"] == "macro"].iloc[0]
    for col in ("evolved_val_mae", "no_guidance_val_mae", "best_initial_val_mae", "median_val_mae"):
        assert macro[col] == pytest.approx(table.iloc[:-1][col].mean())


def test_a_criterion_without_a_winner_keeps_the_others_finished_work(tmp_path, consilium_inputs):
    """The judge fails every call on one criterion: that criterion has no winner, the other
    eight finish, the report covers them, and the run says which one failed and why."""
    from evolve.errors import NoWinnerError

    pack_dir, split_dir = consilium_inputs
    config = _config(tmp_path, pack_dir, split_dir, criteria=("management", "clinical_safety", "data_use"))
    management = load_rubric("consilium").criterion("management")

    def judge_fails_on_management(request):
        if request.tag == "judge" and management.name in request.messages[-1].content:
            return "not json"  # a model_failure: coverage 0 for every management candidate
        return fake_consilium_endpoint(request)

    with Client(FakeProvider(judge_fails_on_management), cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        with pytest.raises(NoWinnerError, match="management") as excinfo:
            calibrate(config, client=client)
    run = config.run_dir
    assert "the other 2 finished" in str(excinfo.value)
    report = json.loads((run / "report.json").read_text())
    assert sorted(report["criteria"]) == ["clinical_safety", "data_use"]
    assert report["without_winner"] == ["management"]
    assert "**No winner**" in (run / "report.md").read_text()
    cands = pd.read_csv(run / "candidates.csv", keep_default_na=False)
    assert set(cands["criterion"]) == {"management", "clinical_safety", "data_use"}  # nothing thrown away
