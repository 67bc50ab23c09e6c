"""Run folders the HTML and comparison tests share: two calibration runs of different judge
models on one pack and split (fake provider), and a judged synthetic bench run."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from evolve.config import resolve_config
from evolve.data import load_pack, write_pack
from evolve.llm import ChatRequest, Client, ResponseCache
from evolve.splits import make_splits, write_splits
from evolve.testing import FakeProvider
from evolve.workflows import run_calibration
from tests.conftest import fake_endpoint, light_report_settings, make_tiny_pack
from tests.report.test_bench_tables import all_runs, judge_rows, write_folder

LENIENT_MODEL = "judge-lenient"
"""The judge model the fake endpoint answers 2 for whatever the guidance (a worse judge)."""


def two_model_endpoint(request: ChatRequest) -> str:
    """:func:`fake_endpoint`, except that :data:`LENIENT_MODEL` ignores its guidance, and that
    every other mutation is a plain rule that misleads the judge by one point (a worse mutant
    for racing to stop)."""
    if request.tag == "judge" and request.model == LENIENT_MODEL:
        return json.dumps({"rationale": "synthetic", "score": "2"})
    user = request.messages[-1].content
    if request.tag == "judge" and "plain rule" in user.split("GUIDANCE FOR THIS CRITERION:", 1)[-1]:
        truth = int(re.search(r"truth (\d)", user).group(1))
        return json.dumps({"rationale": "synthetic", "score": str((truth + 1) % 3)})
    if request.tag == "mutation" and request.seed % 2 == 1:
        return json.dumps({"analysis": "synthetic", "guidance": f"plain rule {request.seed}: read the statement."})
    return fake_endpoint(request)


def calibrate_tiny(root: Path, run_id: str, judge_model: str, pack: Path, splits: Path) -> Path:
    config = resolve_config(preset="quick", overrides={
        "run_id": run_id, "pack": pack, "splits": splits, "archives_dir": root / "archives",
        "cache_path": root / f"{run_id}.sqlite", "endpoint": {"provider": "fake"}, "judge": {"model": judge_model},
        "budget": {"accepted": 4, "max_attempts": 8, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2},
    }, environ={})
    client = Client(FakeProvider(two_model_endpoint), cache=ResponseCache(root / f"{run_id}.sqlite"), max_concurrency=2,
                    backoff_initial=0.01)
    try:
        return run_calibration(config, client=client).run_dir
    finally:
        client.close()


@pytest.fixture(scope="session")
def tiny_frame(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("frame")
    pack = root / "packs" / "tiny"
    write_pack(make_tiny_pack(), pack)
    splits = root / "splits" / "tiny"
    write_splits(make_splits(load_pack(pack), holdout_fraction=0.2, validation_fraction=0.4, seed=3), splits)
    return pack, splits


@pytest.fixture(scope="session")
def calibration_runs(tmp_path_factory, tiny_frame) -> tuple[Path, Path]:
    """(a run whose judge follows its guidance, a run whose judge is lenient whatever it is told),
    with light reports; a test that checks figures writes its own report of them with the full
    settings (it is marked ``full_report``)."""
    root = tmp_path_factory.mktemp("calibrations")
    pack, splits = tiny_frame
    with light_report_settings():  # a session fixture is set up before the module's light_reports
        return (calibrate_tiny(root, "guided", "judge-guided", pack, splits),
                calibrate_tiny(root, "lenient", LENIENT_MODEL, pack, splits))


def bench_folder(root: Path, cases_text: str = "synthetic cases\n") -> Path:
    """The judged synthetic bench run of the bench-table tests, with the manifest a run writes
    (only the case file's path and sha256 matter here)."""
    runs = all_runs()
    folder = write_folder(root, runs, judge_rows(runs))
    cases = root / "cases.jsonl"
    cases.write_text(cases_text, "utf-8")
    (folder / "manifest.json").write_text(json.dumps({
        "cases_path": str(cases), "cases_sha256": hashlib.sha256(cases_text.encode()).hexdigest()}), "utf-8")
    return folder


@pytest.fixture(scope="session")
def bench_run(tmp_path_factory) -> Path:
    return bench_folder(tmp_path_factory.mktemp("bench-html"))
