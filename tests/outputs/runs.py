"""Fixed runs for the typed-output tests: bench runs (unjudged, judged with a judge file, a
synthetic two-model run) and an OpenTumorBoard run judged with a judge file, all through the
fake provider, so their reports are the same on every machine (paths aside)."""

from __future__ import annotations

from pathlib import Path

from evolve.consilium import judge_bench, run_bench
from evolve.llm import Client, ResponseCache
from evolve.otb import generate_otb, judge_otb
from evolve.testing import FakeProvider
from tests.consilium.bench_support import make_client, make_config, write_cases
from tests.otb.test_judge_file_guidance import _judge_file as otb_judge_file
from tests.otb.test_records_extract import BOARD, TURN, _write
from tests.otb.test_run_judge import Endpoint, _config
from tests.report.test_bench_anchored import _endpoint as bench_endpoint
from tests.report.test_bench_anchored import _judge_file as bench_judge_file
from tests.report.test_bench_tables import all_runs, judge_rows, write_folder

__all__ = ["bench_unjudged", "bench_with_judge_file", "bench_synthetic", "otb_with_judge_file"]


def bench_unjudged(root: Path) -> Path:
    """A finished, unjudged bench run: 1 model x 2 conditions on the 3 of 4 cases the quick preset keeps."""
    config = make_config(root, write_cases(root / "cases.jsonl", n=4))
    client, _ = make_client(root, bench_endpoint)
    try:
        run_bench(config, client=client)
    finally:
        client.close()
    return config.run_dir


def bench_with_judge_file(root: Path) -> Path:
    """:func:`bench_unjudged`, then judged with a judge file whose anchor has 12 rated cases
    (the physician-anchored section is available)."""
    run = bench_unjudged(root)
    guidance = bench_judge_file(root / "archives" / "calib").parent
    client, _ = make_client(root, bench_endpoint)
    try:
        judge_bench(run, calibration_run=guidance, client=client)
    finally:
        client.close()
    return run


def bench_synthetic(root: Path) -> Path:
    """The synthetic judged run of ``tests/report/test_bench_tables.py``: two models, both
    conditions, several rounds (vote transitions), orphan and non-primary judge rows."""
    runs = all_runs()
    return write_folder(root / "synthetic", runs, judge_rows(runs))


def otb_with_judge_file(root: Path) -> Path:
    """An OpenTumorBoard run (both tasks, a malformed answer, a judge failure) judged with a
    judge file."""
    boards = [BOARD, {**BOARD, "simulation_id": "sim-002", "case_id": "case-B", "case_summary": "INVENTED sim-002 case."}]
    turns = [TURN, {**TURN, "qa_id": "qa-002", "question": "INVENTED qa-002 question?"},
             {**TURN, "qa_id": "qa-003", "case_id": "case-B", "question": "A bold claim?", "qa_type": "uncertainty"}]
    files = _write(root / "task1_test.jsonl", boards), _write(root / "task2_test.jsonl", turns)
    config = _config(root, files)
    judge_json = otb_judge_file(root / "calib", config.judge.model)
    with Client(FakeProvider(Endpoint()), cache=ResponseCache(root / "cache.sqlite")) as client:
        generate_otb(config, client=client)
        judge_otb(config.run_dir, client=client, calibration_run=judge_json)
    return config.run_dir
