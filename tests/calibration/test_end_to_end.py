"""End-to-end calibration on a tiny synthetic pack with the fake provider (no network)."""

from __future__ import annotations

import csv
import dataclasses
import json
import threading
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from evolve.calibration import CANDIDATE_COLUMNS, SCORE_COLUMNS, derive_seed
from evolve.config import resolve_config
from evolve.errors import RunError
from evolve.llm import Client, ResponseCache
from evolve.testing import FakeProvider
from evolve.workflows import run_calibration as calibrate
from tests.conftest import HangingEndpoint, fake_endpoint


def _config(tmp_path: Path, pack: Path, splits: Path, **budget):
    b = {"accepted": 4, "max_attempts": 8, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2}
    b.update(budget)
    return resolve_config(
        preset="quick",
        overrides={
            "run_id": "tiny-run",
            "pack": pack,
            "splits": splits,
            "archives_dir": tmp_path / "archives",
            "cache_path": tmp_path / "cache.sqlite",
            "endpoint": {"provider": "fake"},
            "budget": b,
        },
        environ={},
    )


def test_calibrate_writes_complete_run_folder(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir)
    result = calibrate(config, client=fake_client)
    run = result.run_dir
    for name in ("config.json", "journal.jsonl", "candidates.csv", "scores.csv", "report.md", "report.json"):
        assert (run / name).is_file(), name

    cands = pd.read_csv(run / "candidates.csv", keep_default_na=False)
    assert list(cands.columns) == CANDIDATE_COLUMNS
    mutants = cands[cands["origin"] == "mutation"]
    # the fake proposes 900 characters when the mutation seed % 3 == 2, which must be rejected
    too_long = [a for a in range(12) if derive_seed(config.seed, "mutation", "entailment", a) % 3 == 2]
    expected = [a for a in range(4 + len(too_long)) if a not in too_long][:4]
    assert (mutants["status"] == "accepted").sum() == 4
    rejected = [a for a in too_long if a < expected[-1]]
    assert rejected and mutants.loc[mutants["status"] == "too_long", "attempt"].astype(int).tolist() == rejected
    assert len(mutants) == 4 + len(rejected)
    assert (cands.loc[cands["status"] == "accepted", "length"] <= 800).all()

    scores = pd.read_csv(run / "scores.csv")
    assert list(scores.columns) == SCORE_COLUMNS
    assert set(scores["outcome"]) == {"score"}
    # validation ratings never reach evolution
    assert set(scores.loc[scores["phase"] == "evolution", "split"]) == {"train"}

    # the lenient no-guidance judge loses; a 'calibrated' mutant wins with zero error vs rater 1
    assert result.winners["entailment"].startswith("entailment:m")
    rep = json.loads((run / "report.json").read_text())
    rows = {r["kind"]: r for r in rep["criteria"]["entailment"]["rows"]}
    assert set(rows) == {"no-guidance", "initial", "training-median", "winner"}
    assert rows["winner"]["validation"]["mae"] < rows["no-guidance"]["validation"]["mae"]
    assert rows["winner"]["train"]["repeat_sd"] == 0.0
    assert rep["criteria"]["entailment"]["ceiling"]["validation"]["mae"] is not None
    md = (run / "report.md").read_text()
    for label in ("no guidance", "initial initial_1", "training median", "evolved winner", "physician vs physician"):
        assert label in md
    secrets = (run / "config.json").read_text()
    assert "api_key_env" in secrets and "sk-" not in secrets


def _independent_mae(run: Path, pack: Path, candidate_id: str, split: str) -> float:
    """MAE recomputed with the csv module only: every (judge call, individual rating) pair."""
    ratings = defaultdict(list)
    with open(pack / "ratings.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["score"] != "":
                ratings[(row["criterion"], row["target_id"])].append(float(row["score"]))
    errors = []
    with open(run / "scores.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            if (row["candidate_id"], row["phase"], row["split"], row["outcome"]) == (candidate_id, "reeval", split, "score"):
                for r in ratings[(row["criterion"], row["target_id"])]:
                    errors.append(abs(float(row["score"]) - r))
    return sum(errors) / len(errors)


def test_every_report_mae_recomputes_from_scores_csv(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    result = calibrate(_config(tmp_path, tiny_pack_dir, tiny_splits_dir), client=fake_client)
    rep = json.loads((result.run_dir / "report.json").read_text())
    checked = 0
    for row in rep["criteria"]["entailment"]["rows"]:
        if not row["candidate_id"]:
            continue
        for split in ("train", "validation"):
            assert row[split]["mae"] == pytest.approx(_independent_mae(result.run_dir, tiny_pack_dir, row["candidate_id"], split))
            checked += 1
    assert checked >= 8


def test_existing_run_needs_resume(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir)
    calibrate(config, client=fake_client)
    with pytest.raises(RunError, match="--resume"):
        calibrate(config, client=fake_client)


class _Crash(Exception):
    pass


def test_resume_after_interruption_repeats_no_finished_call(tmp_path, tiny_pack_dir, tiny_splits_dir):
    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir)

    # reference: an uninterrupted run in its own cache
    ref_provider = FakeProvider(fake_endpoint)
    with Client(ref_provider, cache=ResponseCache(tmp_path / "ref.sqlite"), max_concurrency=1) as ref_client:
        ref = calibrate(config.model_copy(update={"run_id": "reference"}), client=ref_client)

    # interrupted run: the endpoint dies after 40 calls
    def dying(request):
        if dying.count >= 40:
            raise _Crash("endpoint went away")
        dying.count += 1
        return fake_endpoint(request)

    dying.count = 0
    first = FakeProvider(dying)
    with Client(first, cache=ResponseCache(tmp_path / "cache.sqlite"), max_concurrency=1) as client:
        with pytest.raises(BaseException):  # noqa: B017 - the crash may arrive inside an exception group
            calibrate(config, client=client)
    assert not (config.run_dir / "report.json").exists()
    answered = {r.cache_key(first.endpoint_id) for r in first.requests[:40]}

    second = FakeProvider(fake_endpoint)
    with Client(second, cache=ResponseCache(tmp_path / "cache.sqlite"), max_concurrency=1) as client:
        result = calibrate(config, client=client, resume=True)
    repeated = answered & {r.cache_key(second.endpoint_id) for r in second.requests}
    assert repeated == set()
    assert 40 + second.calls == ref_provider.calls
    events = [json.loads(line)["event"] for line in (config.run_dir / "journal.jsonl").read_text().splitlines()]
    assert events.count("run_started") == 1 and "run_interrupted" in events and "run_resumed" in events
    assert result.winners == ref.winners
    ref_scores = pd.read_csv(ref.run_dir / "scores.csv").drop(columns=["cached"])
    new_scores = pd.read_csv(result.run_dir / "scores.csv").drop(columns=["cached"])
    pd.testing.assert_frame_equal(ref_scores, new_scores)


@pytest.mark.timeout(120)  # before the fix this waited for the hanging call (an hour)
def test_ctrl_c_with_a_borrowed_client_does_not_wait_for_calls_in_flight(tmp_path, tiny_pack_dir, tiny_splits_dir,
                                                                          ctrl_c_when):
    """Ctrl-C while criterion threads wait on a slow endpoint reaches the caller at once (the
    client's owner then cancels the calls in flight by closing it), and the run is resumable."""
    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir)
    endpoint = HangingEndpoint(fake_endpoint, after=10)
    client = Client(endpoint, cache=ResponseCache(tmp_path / "cache.sqlite"), max_concurrency=1)
    ctrl_c_when(endpoint.hanging)
    with pytest.raises(KeyboardInterrupt):
        calibrate(config, client=client)
    assert endpoint.hanging.is_set() and not endpoint.answered_late
    client.close(cancel=True)
    for worker in [t for t in threading.enumerate() if t.name.startswith("criterion")]:
        worker.join(timeout=30)
        assert not worker.is_alive()
    events = [json.loads(line)["event"] for line in (config.run_dir / "journal.jsonl").read_text().splitlines()]
    assert "run_interrupted" in events
    with Client(FakeProvider(fake_endpoint), cache=ResponseCache(tmp_path / "cache.sqlite")) as again:
        assert calibrate(config, client=again, resume=True).winners


def test_resume_refuses_a_changed_configuration(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir)
    calibrate(config, client=fake_client)
    changed = config.model_copy(update={"seed": 7})
    with pytest.raises(RunError, match="seed"):
        calibrate(changed, client=fake_client, resume=True)


def test_resume_refuses_a_split_or_pack_changed_in_place(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    """The same paths with other contents would mix two calibrations in one run folder."""
    from evolve.data import load_pack, write_pack
    from evolve.splits import load_splits, make_splits, write_splits

    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir)
    calibrate(config, client=fake_client)
    split, pack = load_splits(tiny_splits_dir), load_pack(tiny_pack_dir)
    moved = make_splits(pack, holdout_fraction=0.2, validation_fraction=0.4, seed=4)  # the fixture's, seed 3
    assert moved.validation != split.validation
    write_splits(moved, tiny_splits_dir, overwrite=True)
    with pytest.raises(RunError, match=r"the split .*tiny changed since the run started"):
        calibrate(config, client=fake_client, resume=True)
    write_splits(split, tiny_splits_dir, overwrite=True)
    first = pack.ratings[0]
    rescored = dataclasses.replace(pack, ratings=(first.model_copy(update={"score": 1 - first.score}), *pack.ratings[1:]))
    write_pack(rescored, tiny_pack_dir, overwrite=True)
    with pytest.raises(RunError, match=r"the rating pack .*tiny changed since the run started.*new --run-id"):
        calibrate(config, client=fake_client, resume=True)
    write_pack(pack, tiny_pack_dir, overwrite=True)
    assert calibrate(config, client=fake_client, resume=True).winners  # put back: it resumes


def test_resuming_a_finished_run_says_what_it_will_do(tmp_path, tiny_pack_dir, tiny_splits_dir, fake_client):
    from evolve.calibration import plan_calibration
    from evolve.workflows import run_calibration

    config = _config(tmp_path, tiny_pack_dir, tiny_splits_dir).model_copy(update={"audit": False})
    assert not any("finished before" in n for n in plan_calibration(config).notes)
    run_calibration(config, client=fake_client)
    [note] = [n for n in plan_calibration(config, resume=True).notes if "finished before" in n]
    assert "replays it from the response cache" in note and "writes its report, tables and audit again" in note


def test_scores_are_written_as_integers_even_beside_failures(tmp_path, tiny_pack_dir, tiny_splits_dir):
    """A column holding scores and empty cells (failures) stays integer: '2', not '2.0'."""
    answers = iter(range(10_000))

    def flaky(request):
        if request.tag == "judge" and next(answers) % 7 == 0:
            return "not json"  # a model_failure row with an empty score
        return fake_endpoint(request)

    with Client(FakeProvider(flaky), cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        run = calibrate(_config(tmp_path, tiny_pack_dir, tiny_splits_dir), client=client).run_dir
    frame = pd.read_csv(run / "scores.csv", dtype=str, keep_default_na=False)
    assert (frame["outcome"] == "model_failure").any() and (frame.loc[frame["outcome"] == "model_failure", "score"] == "").all()
    assert set(frame.loc[frame["outcome"] == "score", "score"]) <= {"0", "1", "2"}  # never "2.0"
    # the report tells failures from declines: coverage, then how many calls failed
    report = json.loads((run / "report.json").read_text())
    rows = [r for c in report["criteria"].values() for r in c["rows"] if r["kind"] != "training-median"]
    failed = sum(r[s]["n_model_failures"] for r in rows for s in ("train", "validation"))
    assert failed > 0 and all(r[s]["n_not_evaluable"] == 0 for r in rows for s in ("train", "validation"))
    assert " failed)" in (run / "report.md").read_text()
