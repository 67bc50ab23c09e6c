"""`evolve judge`: a calibrated judge file on new targets, with the fake provider and a loopback endpoint."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import evolve
from evolve.cli import app
from evolve.config import resolve_config
from evolve.data import write_pack
from evolve.errors import ConfigError, PackError, RunError
from evolve.llm import Client, ResponseCache
from evolve.report._scoring import holdout_entries
from evolve.scoring import read_targets, score_targets
from evolve.splits import load_splits, make_splits, write_splits
from evolve.testing import FakeProvider, LoopbackChatServer
from evolve.workflows import run_calibration
from evolve.workflows._judge import judge_warnings
from tests.conftest import copy_cached_answers, fake_endpoint, make_tiny_pack, request_of

runner = CliRunner()
N_CASES = 30  # 12 validation cases: enough for a physician-anchored mean (at least 10 rated cases)


def _write_pack_dirs(root: Path) -> tuple[Path, Path]:
    from evolve.data import load_pack

    pack = root / "packs" / "tiny"
    write_pack(make_tiny_pack(N_CASES), pack)
    splits = root / "splits" / "tiny"
    write_splits(make_splits(load_pack(pack), holdout_fraction=0.2, validation_fraction=0.5, seed=3), splits)
    return pack, splits


@pytest.fixture
def pack_dirs(tmp_path: Path) -> tuple[Path, Path]:
    return _write_pack_dirs(tmp_path)


def _config(tmp_path: Path, pack: Path, splits: Path, **extra):
    return resolve_config(preset="quick", overrides={
        "run_id": "cal", "pack": pack, "splits": splits, "archives_dir": tmp_path / "archives",
        "cache_path": tmp_path / "cache.sqlite", "endpoint": {"provider": "fake"}, "audit": False,
        "budget": {"accepted": 4, "max_attempts": 8, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2,
                   "max_train_targets": 1000, "max_validation_targets": 1000}, **extra},
        environ={})


@pytest.fixture
def provider() -> FakeProvider:
    return FakeProvider(fake_endpoint)


@pytest.fixture
def client(tmp_path: Path, provider: FakeProvider):
    c = Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite"), max_concurrency=2, backoff_initial=0.01)
    yield c
    c.close()


@pytest.fixture(scope="module")
def shared_calibration(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One calibration of the tiny pack (its folder holds ``archives/cal`` and ``cache.sqlite``),
    made once for the module; :func:`calibrated` gives each test its own copy."""
    root = tmp_path_factory.mktemp("judge-calibration")
    pack, splits = _write_pack_dirs(root)
    with Client(FakeProvider(fake_endpoint), cache=ResponseCache(root / "cache.sqlite"), max_concurrency=2,
                backoff_initial=0.01) as c:
        result = run_calibration(_config(root, pack, splits), client=c)
    assert (result.run_dir / "judge.json").is_file()
    return root


@pytest.fixture
def calibrated(tmp_path: Path, pack_dirs, client, shared_calibration: Path) -> Path:
    """This test's copy of the shared calibration: its run folder, and its answers in the test's
    cache, as if the test had calibrated with ``client`` itself."""
    run = shutil.copytree(shared_calibration / "archives" / "cal", tmp_path / "archives" / "cal")
    copy_cached_answers(shared_calibration / "cache.sqlite", tmp_path / "cache.sqlite")
    return run


@pytest.mark.full_report  # checks the figures of report.html
def test_scoring_a_rated_pack_reuses_the_validated_prompts_and_answers(tmp_path, pack_dirs, calibrated, client, provider):
    pack, _ = pack_dirs
    judge = evolve.load_judge(calibrated)
    winner = judge.file.criteria["entailment"].winner
    before = provider.calls
    summary = judge.score(pack, client=client, run_dir=tmp_path / "scored")
    run = summary.run_dir
    for name in ("config.json", "judge.json", "calls.csv", "items.csv", "ratings.csv", "summary.json", "report.md",
                 "report.html", "journal.jsonl"):
        assert (run / name).is_file(), name
    calls = pd.read_csv(run / "calls.csv", dtype={"target_id": str})
    scores = pd.read_csv(calibrated / "scores.csv", dtype={"target_id": str})
    reeval = scores[(scores["phase"] == "reeval") & (scores["candidate_id"] == winner.candidate_id)]
    assert len(reeval) > 0
    mine = calls[calls["guidance"] == "winner"].merge(reeval, on=["target_id", "seed"], suffixes=("", "_cal"))
    # every target the calibration re-scored gets exactly the validated prompt (and seed), so its answer is cached
    assert len(mine) == len(reeval)
    assert (mine["prompt_hash"] == mine["prompt_hash_cal"]).all()
    assert (mine["score"] == mine["score_cal"]).all()
    assert mine["cached"].all()
    # the rated pack is also scored with no guidance, and agreement is reported against its ratings
    assert set(calls["guidance"]) == {"winner", "no-guidance"}
    c = summary.criteria["entailment"]
    assert c.n_items == c.n_scored + c.n_failed + c.n_not_evaluable + c.n_excluded == 2 * N_CASES
    assert c.mean is not None and c.low <= c.mean <= c.high
    assert c.mae is not None and c.no_guidance_mae is not None and c.mae < c.no_guidance_mae
    assert c.physician_mean is not None and c.anchored_refused is None and c.anchored is not None
    assert summary.report.comparisons.alpha == 0.05  # as written, not 0.050000000000000044
    rated = summary.report.criteria["entailment"].rated
    assert rated is not None and rated.training_median.mae is not None and rated.training_median.mae.estimate is not None
    assert rated.verdicts.no_guidance.verdict in ("better", "no distinguishable difference", "too few cases to tell")
    md = (run / "report.md").read_text()
    for words in ("physician-anchored", "training median", "no guidance", "physicians' actual mean", "Items = scored"):
        assert words in md
    assert (run / "report.html").read_text().count("<figure") == 2  # the means, then agreement with intervals
    paid = provider.calls - before
    assert paid > 0  # training and held-out targets were never re-scored with these seeds

    # resume pays nothing: every call comes from the cache
    again = judge.score(pack, client=client, run_dir=tmp_path / "scored", resume=True)
    assert provider.calls - before == paid
    assert again.criteria["entailment"] == c
    # without --resume an existing run folder is refused
    with pytest.raises(RunError, match=r"--resume .*Python: resume=True\), or choose another --run-id \(Python: run_id=\)"):
        judge.score(pack, client=client, run_dir=tmp_path / "scored")


def test_an_unrated_frame_is_scored_and_counts_add_up(tmp_path, calibrated, client):
    frame = pd.DataFrame({
        "case_id": [f"new-{i // 2}" for i in range(24)],
        "case_text": [f"New question {i // 2}?" for i in range(24)],
        "target_text": [f"New answer {i} (truth {i % 3})" for i in range(24)],
        "statement": [f"New statement {i}" for i in range(24)],
    })
    summary = evolve.load_judge(calibrated / "judge.json").score(frame, client=client, run_dir=tmp_path / "new")
    assert not summary.rated
    calls = pd.read_csv(summary.run_dir / "calls.csv")
    assert set(calls["guidance"]) == {"winner"}  # no ratings: no comparison calls
    c = summary.criteria["entailment"]
    assert (c.n_items, c.n_scored) == (24, 24)
    items = summary.items()
    assert len(items) == 24 and set(items["status"]) == {"scored"}
    # the calibrated judge of the fake endpoint returns the planted truth
    assert (items.sort_values("target_id")["judge"].round() >= 0).all()
    assert c.anchored is not None and c.physician_mean is None
    assert "physician-anchored" in summary.describe()


def test_bad_table_cells_are_named_by_file_row_and_column(tmp_path, calibrated, client):
    table = tmp_path / "new.csv"
    table.write_text("question,answer\nQ1?,A1\n,A2\nQ3?,\n", encoding="utf-8")
    with pytest.raises(PackError) as info:
        evolve.load_judge(calibrated).score(table, columns={"case_text": "question", "target_text": "answer"}, client=client,
                                            run_dir=tmp_path / "bad")
    text = str(info.value)
    assert "new.csv, row 3, column 'question'" in text and "empty case text" in text
    assert "new.csv, row 4, column 'answer'" in text and "empty target text" in text
    assert not (tmp_path / "bad").exists()  # nothing was written, nothing paid


def test_targets_without_the_statement_the_judge_was_calibrated_with_are_refused(tmp_path, calibrated, client, provider):
    judge = evolve.load_judge(calibrated)
    assert judge.file.criteria["entailment"].statement == "required"  # every tiny-pack target has one
    frame = pd.DataFrame({"case_id": ["n1", "n1", "n2"], "case_text": ["Q1?", "Q1?", "Q2?"],
                          "target_text": ["A1", "A2", "A3"]})
    before = provider.calls
    with pytest.raises(PackError) as info:
        judge.score(frame, client=client, run_dir=tmp_path / "nostatement")
    text = str(info.value)
    assert "3 target(s) have no statement" in text and "'entailment'" in text and "--column statement=COLUMN" in text
    assert not (tmp_path / "nostatement").exists() and provider.calls == before  # nothing written, nothing paid
    unstated = judge.file.model_copy(update={"criteria": {
        "entailment": judge.file.criteria["entailment"].model_copy(update={"statement": "absent"})}})
    with pytest.raises(PackError, match=r"calibrated on targets without one.*Drop or rename the table's statement "
                                        r"column \(a column named 'statement' is read as one\)"):
        score_targets(unstated, read_targets(frame.assign(statement="S"), unstated),
                                     client=client, run_dir=tmp_path / "stated", config={})
    assert not (tmp_path / "stated").exists()


def test_cases_scores_only_the_held_out_cases_of_a_pack(tmp_path, pack_dirs, calibrated, client):
    pack, splits = pack_dirs
    holdout = load_splits(splits).holdout
    assert holdout
    summary = evolve.load_judge(calibrated).score(pack, cases=splits / "holdout.txt", client=client,
                                                  run_dir=tmp_path / "held")
    items = summary.items()
    assert set(items["case_id"]) == set(holdout)
    assert summary.rated and summary.criteria["entailment"].physician_mean is not None
    bad = tmp_path / "cases.txt"
    bad.write_text(f"{holdout[0]}\nno-such-case\n", encoding="utf-8")
    with pytest.raises(PackError) as info:
        evolve.load_judge(calibrated).score(pack, cases=bad, client=client, run_dir=tmp_path / "bad")
    assert "cases.txt: 1 of its 2 case ids are not in" in str(info.value) and "no-such-case" in str(info.value)
    assert not (tmp_path / "bad").exists()


class _Endpoint(LoopbackChatServer):
    def __init__(self) -> None:
        super().__init__(lambda body: fake_endpoint(request_of(body)))


def test_cli_judge_on_a_rated_pack_and_an_unrated_csv(tmp_path, pack_dirs, monkeypatch):
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack, splits = pack_dirs
    archives = tmp_path / "archives"
    with _Endpoint() as endpoint:
        cal = runner.invoke(app, ["calibrate", "--pack", str(pack), "--splits", str(splits), "--run-id", "cal",
                                  "--archives-dir", str(archives), "--base-url", endpoint.base_url, "--model", "scripted",
                                  "--accepted", "1", "--max-attempts", "2", "--batch-size", "1", "--train-repeats", "1",
                                  "--no-audit", "--max-validation-targets", "1000", "--max-train-targets", "1000",
                                  "--evaluate-holdout"])
        assert cal.exit_code == 0, cal.output
        assert (archives / "cal" / "holdout" / "report.md").is_file()
        assert "Table 5, held-out cases" in cal.stdout
        assert f"evolve judge TARGETS --judge {archives / 'cal'}" in cal.stdout
        args = ["judge", str(pack), "--judge", str(archives / "cal"), "--run-id", "scored", "--archives-dir", str(archives),
                "--base-url", endpoint.base_url]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "entailment: judge mean" in result.stdout and "physician-anchored" in result.stdout
        assert f"{archives / 'scored'}/report.md" in result.stdout.replace("\n", "")
        calls = len(endpoint.bodies)
        resumed = runner.invoke(app, args + ["--resume"])
        assert resumed.exit_code == 0, resumed.output
        assert len(endpoint.bodies) == calls  # resume pays nothing
        planned = runner.invoke(app, [*args, "--resume", "--plan", "--cases", str(splits / "holdout.txt")])
        assert planned.exit_code == 2 and "stored configuration differs" in planned.output  # the plan checks as the run
        assert runner.invoke(app, [*args, "--resume", "--plan"]).exit_code == 0
        moved = runner.invoke(app, [*args[:-1], "http://127.0.0.1:9/v1", "--resume"])  # answers are cached per endpoint
        assert moved.exit_code == 2 and "this run was scored on another endpoint (base_url:" in moved.output
        assert "would pay every finished call again" in " ".join(moved.output.split())

        table = tmp_path / "new.csv"
        pd.DataFrame({"question": ["Q1?", "Q1?", "Q2?"], "answer": ["A (truth 1)", "B (truth 2)", "C (truth 0)"],
                      "claim": ["s1", "s2", "s3"], "sys": ["gpt-x", "gpt-y", "gpt-x"]}).to_csv(table, index=False)
        new = runner.invoke(app, ["judge", str(table), "--judge", str(archives / "cal" / "judge.json"), "--run-id", "new",
                                  "--archives-dir", str(archives), "--base-url", endpoint.base_url,
                                  "--column", "case_text=question", "--column", "target_text=answer",
                                  "--column", "statement=claim", "--column", "model=sys"])
        assert new.exit_code == 0, new.output
        summary = json.loads((archives / "new" / "summary.json").read_text())
        assert summary["rated"] is False
        assert summary["criteria"]["entailment"]["counts"]["n_scored"] == 3
        items = pd.read_csv(archives / "new" / "items.csv")  # each item keeps the system that wrote it
        assert sorted(items["model"]) == ["gpt-x", "gpt-x", "gpt-y"]
        # another model than the one the anchor was scored by: no anchored mean (PPI corrects one judge's errors)
        other = runner.invoke(app, ["judge", str(table), "--judge", str(archives / "cal"), "--run-id", "other",
                                    "--archives-dir", str(archives), "--base-url", endpoint.base_url, "--model", "another",
                                    "--column", "case_text=question", "--column", "target_text=answer",
                                    "--column", "statement=claim"])
        assert other.exit_code == 0, other.output
        anchored = json.loads((archives / "other" / "summary.json").read_text())["criteria"]["entailment"]["anchored"]
        why = "scored with model 'another', but the rated sample was scored by 'scripted'"
        assert anchored["estimate"] is None and anchored["refused"].startswith(why)
        said = " ".join(other.output.split())
        assert f"physician-anchored refused ({why}" in said and "validated with model 'scripted'" in said
        bad = runner.invoke(app, ["judge", str(table), "--judge", str(archives / "cal"), "--archives-dir", str(archives),
                                  "--base-url", endpoint.base_url, "--column", "case_text=nosuch"])
        assert bad.exit_code == 2 and "nosuch" in bad.output and "Traceback" not in bad.output
        held = runner.invoke(app, ["judge", str(pack), "--judge", str(archives / "cal"), "--run-id", "held",
                                   "--archives-dir", str(archives), "--base-url", endpoint.base_url,
                                   "--cases", str(splits / "holdout.txt")])
        assert held.exit_code == 0, held.output
        items = pd.read_csv(archives / "held" / "items.csv", dtype={"case_id": str})
        assert set(items["case_id"]) == set(load_splits(splits).holdout)
        unstated = runner.invoke(app, ["judge", str(table), "--judge", str(archives / "cal"), "--archives-dir", str(archives),
                                       "--base-url", endpoint.base_url, "--column", "case_text=question",
                                       "--column", "target_text=answer"])
        assert unstated.exit_code == 2 and "--column statement=COLUMN" in unstated.output.replace("\n", "")
        assert "Traceback" not in unstated.output
        wide = tmp_path / "rated.csv"
        pd.DataFrame({"question": ["Q1?", "Q1?", "Q2?"], "answer": ["A (truth 1)", "A (truth 1)", "C (truth 0)"],
                      "claim": ["s1", "s1", "s3"], "rater": ["r1", "r2", "r1"], "entailment": ["1", "", "0"]}).to_csv(
            wide, index=False)
        rated = ["judge", str(wide), "--judge", str(archives / "cal"), "--archives-dir", str(archives), "--base-url",
                 endpoint.base_url, "--column", "case_text=question", "--column", "target_text=answer",
                 "--column", "statement=claim", "--layout", "wide"]
        refused = runner.invoke(app, rated + ["--run-id", "refused"])
        assert refused.exit_code == 2 and "row 3, column 'entailment': empty score" in refused.output
        skipped = runner.invoke(app, rated + ["--run-id", "wide", "--skip-empty"])
        assert skipped.exit_code == 0, skipped.output
        summary = json.loads((archives / "wide" / "summary.json").read_text())
        assert summary["rated"] is True and summary["criteria"]["entailment"]["counts"]["n_scored"] == 2
        config = json.loads((archives / "wide" / "config.json").read_text())
        assert (config["layout"], config["skip_empty"]) == ("wide", True)
        assert runner.invoke(app, rated + ["--layout", "tall"]).exit_code == 2
        # the batch export reads the table as the run does (wide, empty cells skipped)
        exported = runner.invoke(app, rated + ["--run-id", "batch", "--skip-empty", "--export-batch",
                                               str(tmp_path / "requests.jsonl")])
        assert exported.exit_code == 0, exported.output


def test_load_judge_names_the_fix_when_there_is_no_judge_file(tmp_path):
    with pytest.raises(RunError, match="evolve report"):
        evolve.load_judge(tmp_path)


def test_evaluate_holdout_scores_the_held_out_cases_into_table5_and_the_judge_file(tmp_path, pack_dirs, client, provider):
    pack, splits = pack_dirs
    assert resolve_config(preset="paper", overrides={"run_id": "x", "pack": pack, "splits": splits}, environ={}).evaluate_holdout
    assert not resolve_config(preset="quick", overrides={"run_id": "x", "pack": pack, "splits": splits}, environ={}).evaluate_holdout
    result = run_calibration(_config(tmp_path, pack, splits, evaluate_holdout=True), client=client)
    hold = result.run_dir / "holdout"
    for name in ("calls.csv", "items.csv", "ratings.csv", "summary.json", "report.md", "report.html"):
        assert (hold / name).is_file(), name
    items = pd.read_csv(hold / "items.csv", dtype={"case_id": str})
    held_out = set(load_splits(splits).holdout)
    assert held_out and set(items["case_id"]) == held_out  # exactly the held-out cases, untouched by calibration
    scores = pd.read_csv(result.run_dir / "scores.csv", dtype={"case_id": str})
    assert not held_out & set(scores["case_id"])
    entry = json.loads((result.run_dir / "report.json").read_text())["criteria"]["entailment"]["holdout"]
    assert entry["mae"] is not None and entry["mae_low"] <= entry["mae"] <= entry["mae_high"]
    assert entry["physician_mean"] is not None and entry["n_targets"] == len(items)
    assert entry["anchored"] is not None or entry["anchored_refused"]
    table5 = pd.read_csv(result.run_dir / "table5.csv")
    assert table5.loc[table5["criterion"] == "entailment", "holdout_mae"].iloc[0] == pytest.approx(entry["mae"])
    md = (result.run_dir / "report.md").read_text()
    assert "Table 5, held-out cases" in md and "physicians' actual mean" in md
    judge = evolve.load_judge(result.run_dir)
    assert judge.file.criteria["entailment"].holdout["mae"] == pytest.approx(entry["mae"])

    # scoring the whole pack again pays nothing: training and validation targets were re-scored by the
    # calibration (winner and no guidance), the held-out ones by the held-out evaluation - same prompts, same seeds
    before = provider.calls
    again = judge.score(pack, client=client, run_dir=tmp_path / "again", criteria=["entailment"])
    assert again.criteria["entailment"].n_items == 2 * N_CASES
    calls = pd.read_csv(tmp_path / "again" / "calls.csv", dtype={"case_id": str})
    winner_held = calls[(calls["guidance"] == "winner") & calls["case_id"].isin(held_out)]
    assert len(winner_held) and winner_held["cached"].all() and calls["cached"].all()
    assert provider.calls == before
    with pytest.raises(ConfigError, match=r"--criterion nope, other \(Python: criteria=\): the judge file .* calibrated "
                                          r"\['entailment'\] only"):
        judge.score(pack, client=client, run_dir=tmp_path / "unknown", criteria=["nope", "other"])
    assert not (tmp_path / "unknown").exists()

    # a damaged held-out summary is refused by name, and the resume the error names rewrites it, paying nothing
    (hold / "summary.json").write_text('{"version": 1}', encoding="utf-8")
    with pytest.raises(RunError, match=r"holdout[/\\]summary\.json.*evolve calibrate --resume"):
        holdout_entries(hold)
    run_calibration(_config(tmp_path, pack, splits, evaluate_holdout=True), client=client, resume=True)
    assert holdout_entries(hold)["entailment"]["mae"] == pytest.approx(entry["mae"])
    assert provider.calls == before


def test_every_item_is_scored_failed_not_evaluable_or_excluded(tmp_path, calibrated):
    """items = scored + failed + not evaluable + excluded, per criterion; a failure is never a score."""
    judge = evolve.load_judge(calibrated).file
    rubric = json.loads(judge.rubric_files["rubric.json"])
    rubric["components"]["note"] = "A clinician's note (the criterion does not apply to it)."
    text = json.dumps(rubric)  # a judge file made for this test: its recorded sha256 follows the edit
    judge = judge.model_copy(update={"rubric_files": {**judge.rubric_files, "rubric.json": text},
                                     "rubric_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()})
    path = tmp_path / "judge.json"
    path.write_text(judge.model_dump_json(), encoding="utf-8")

    def endpoint(request):
        user = request.messages[-1].content
        if "BROKEN" in user:
            return "this is not JSON"
        if "DECLINE" in user:
            return json.dumps({"rationale": "unreadable", "score": "not_evaluable"})
        return fake_endpoint(request)

    texts = ["fine (truth 2)", "fine (truth 0)", "BROKEN (truth 1)", "DECLINE (truth 1)", "a note (truth 1)"]
    frame = pd.DataFrame({"case_text": ["Q?"] * 5, "target_text": texts, "statement": ["s"] * 5,
                          "component": ["answer"] * 4 + ["note"]})
    provider = FakeProvider(endpoint)
    with Client(provider, cache=ResponseCache(tmp_path / "other.sqlite"), max_concurrency=2, backoff_initial=0.01) as client:
        summary = evolve.load_judge(path).score(frame, client=client, run_dir=tmp_path / "mixed")
    c = summary.criteria["entailment"]
    assert (c.n_items, c.n_scored, c.n_failed, c.n_not_evaluable, c.n_excluded) == (5, 2, 1, 1, 1)
    items = summary.items().set_index("target_id")
    assert items["judge"].dropna().tolist() == [2.0, 0.0]  # the failure and the decline carry no score
    assert provider.calls == 2 * 4  # the excluded note is never judged (two repeats per judged target)
    assert c.mean == pytest.approx(1.0)
    md = (summary.run_dir / "report.md").read_text()
    assert "| 5 | 2 | 1 | 1 | 1 |" in md

    # what the judge file says against a criterion's judge is said in words before it is used
    entry = judge.criteria["entailment"].model_copy(update={"no_better_than_constant": True, "drift": "drift"})
    warned = judge_warnings(judge.model_copy(update={"criteria": {"entailment": entry}}))
    assert len(warned) == 2 and "no better than a constant" in warned[0] and "drift audit" in warned[1]
    assert judge_warnings(judge.model_copy(update={"criteria": {"entailment": entry}}), ["other"]) == []
    unaudited = judge.criteria["entailment"].model_copy(update={"drift": None})
    (said,) = judge_warnings(judge.model_copy(update={"criteria": {"entailment": unaudited}}))
    assert said.startswith(f"the winning guidance of entailment was never audited for semantic drift (calibration "
                           f"{judge.run_id} ran with --no-audit") and "`evolve audit`" in said


def test_nested_jsonl_rows_and_where_as_the_table_importer_reads_them(tmp_path, calibrated, client):
    records = [{"question": f"Q{i}?", "field": "Medicine" if i % 2 == 0 else "Law",
                "answers": [{"text": f"Answer {i}.{j} (truth {(i + j) % 3})",
                             "claims": [{"claim": f"claim {i}.{j}.{k}"} for k in range(2)]} for j in range(2)]}
               for i in range(6)]
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    summary = evolve.load_judge(calibrated).score(
        path, client=client, run_dir=tmp_path / "nested", rows="answers.*.claims.*", where=["field=Medicine"],
        columns={"case_text": "question", "target_text": "answers.*.text", "statement": "answers.*.claims.*.claim"})
    items = summary.items()
    assert len(items) == 3 * 2 * 2  # medicine records x answers x claims
    config = json.loads((summary.run_dir / "config.json").read_text())
    assert config["rows"] == "answers.*.claims.*" and config["where"] == ["field=Medicine"]


def test_a_wide_rated_frame_with_blank_cells_is_read_as_the_importer_reads_it(tmp_path, calibrated, client):
    frame = pd.DataFrame({"case_text": ["Q1?", "Q1?", "Q2?"], "target_text": ["A (truth 1)", "A (truth 1)", "C (truth 0)"],
                          "statement": ["s1", "s1", "s3"], "rater": ["r1", "r2", "r1"], "entailment": ["1", "", "0"]})
    judge = evolve.load_judge(calibrated)
    with pytest.raises(PackError, match="row 3, column 'entailment': empty score"):
        judge.score(frame, client=client, run_dir=tmp_path / "refused", layout="wide")
    summary = judge.score(frame, client=client, run_dir=tmp_path / "wide", layout="wide", skip_empty=True)
    assert summary.rated and summary.criteria["entailment"].n_items == 2


def test_python_users_see_the_judge_files_warnings(tmp_path, calibrated, client):
    """What the CLI prints before scoring (here: the judge was no better than a constant on
    validation) reaches Python as a UserWarning."""
    judge = evolve.load_judge(calibrated).file
    entry = judge.criteria["entailment"].model_copy(update={"no_better_than_constant": True})
    path = tmp_path / "judge.json"
    path.write_text(judge.model_copy(update={"criteria": {"entailment": entry}}).model_dump_json(), encoding="utf-8")
    frame = pd.DataFrame({"case_text": ["Q?"], "target_text": ["An answer (truth 1)"], "statement": ["s"]})
    entry = entry.model_copy(update={"drift": "drift"})
    path.write_text(judge.model_copy(update={"criteria": {"entailment": entry}}).model_dump_json(), encoding="utf-8")
    with pytest.warns(UserWarning, match="no better than a constant"):
        summary = evolve.load_judge(path).score(frame, client=client, run_dir=tmp_path / "warned")
    # and stay with the run, for whoever reads its report later
    stored = json.loads((summary.run_dir / "summary.json").read_text("utf-8"))["warnings"]
    assert len(stored) == 2 and "no better than a constant" in stored[0] and "drift" in stored[1]
    md = (summary.run_dir / "report.md").read_text("utf-8")
    assert md.count("**Warning:**") == 2 and "no better than a constant" in md


def test_an_anchored_mean_with_no_weight_on_the_judge_says_it_is_the_rated_samples_mean() -> None:
    from evolve.outputs import AnchoredMean
    from evolve.report import LAMBDA_ZERO
    from evolve.report._scoring import _anchor_note
    from evolve.workflows._judge import CriterionScore, ScoringSummary

    base = {"criterion_id": "entailment", "name": "E", "n_items": 4, "n_scored": 4, "n_failed": 0, "n_not_evaluable": 0,
            "n_excluded": 0, "coverage": 1.0, "mean": 1.0, "low": 0.5, "high": 1.5, "anchored": 1.316,
            "anchored_low": 1.1, "anchored_high": 1.5}
    for lam, said in ((0.0, True), (0.4, False)):
        score = CriterionScore(**base, anchored_lam=lam)
        line = ScoringSummary.model_construct(criteria={"entailment": score}).describe()
        assert (LAMBDA_ZERO in line) is said, line
        note = " ".join(_anchor_note("entailment", AnchoredMean(estimate=1.316, low=1.1, high=1.5, rated_mean=1.316,
                                                                 lam=lam, n_rated=20, n_rated_cases=10)))
        assert (LAMBDA_ZERO in note) is said and f"lambda {lam:.2f}" in note
    one_case = CriterionScore(**{**base, "low": None, "high": None, "mean": 0.875})
    line = ScoringSummary.model_construct(criteria={"entailment": one_case}).describe()
    assert "judge mean 0.875 (no interval: its scored items come from one case)" in line and "—" not in line.split(";")[0]
