"""Text in Arrow or in Python strings, the same files.

pandas 3 backs text columns with Arrow when pyarrow is installed (the ``parquet`` extra) and
with Python strings otherwise (a core install). The suite runs on Python strings (see
``tests/conftest.py``), so these tests run the engines and report writers on fixed runs under
each storage and check that they write the same files, and that the Markdown written under
Arrow is the golden Markdown of ``data/*.md``."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

import evolve
from evolve.llm import Client, ResponseCache
from evolve.report import build_bench_report, build_otb_report, render_bench_markdown, render_otb_markdown, write_bench_report, write_otb_report
from evolve.testing import FakeProvider
from tests.conftest import fake_endpoint
from tests.outputs.runs import bench_synthetic, bench_with_judge_file, otb_with_judge_file
from tests.outputs.test_bench_otb_models import DATA, N_BOOT, SEED, _normalised
from tests.report.conftest import calibrate_tiny, tiny_frame  # noqa: F401  (the fixture is used by name)

pytest.importorskip("pyarrow", reason="Arrow storage needs pyarrow (the parquet extra)")

STORAGES = ("python", "pyarrow")
VOLATILE = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<TIME>"),
    (re.compile(r'"(t|started_at|finished_at|seconds|wall_s|latency_s)": [0-9.e+-]+'), r'"\1": <T>'),
    (re.compile(r'"session": "[0-9a-f]+"'), '"session": <S>'),
    (re.compile(r"\b[0-9a-f]{16,64}\b"), "<SHA>"),
)
"""Times, client sessions, and digests of files that hold the run's folder: they differ
between any two runs."""


@contextmanager
def _storage(storage: str) -> Iterator[None]:
    with pd.option_context("mode.string_storage", storage):
        yield


def _runs(root: Path, pack: Path, splits: Path) -> None:
    """Every run the checks compare, written under ``root``: a calibration and a scoring of its
    judge, a judged bench run and a synthetic one, an OpenTumorBoard run, each with its report."""
    run = calibrate_tiny(root, "parity", "judge-guided", pack, splits)
    client = Client(FakeProvider(fake_endpoint), cache=ResponseCache(root / "score.sqlite"), backoff_initial=0.01)
    try:
        with warnings.catch_warnings():  # the fake judge's winner may draw the audit's 'review' warning
            warnings.simplefilter("ignore", UserWarning)
            evolve.load_judge(run).score(pack, client=client, run_dir=root / "scored")
    finally:
        client.close()
    for name, make in (("bench_judge_file", bench_with_judge_file), ("bench_synthetic", bench_synthetic)):
        (root / name).mkdir()
        write_bench_report(make(root / name), n_boot=N_BOOT, seed=SEED, html=False)
    (root / "otb_judge_file").mkdir()
    write_otb_report(otb_with_judge_file(root / "otb_judge_file"), n_boot=N_BOOT, seed=SEED, html=False)


@pytest.fixture(scope="module")
def trees(tmp_path_factory, tiny_frame) -> dict[str, Path]:  # noqa: F811
    """The runs of :func:`_runs`, made once under each storage."""
    pack, splits = tiny_frame
    made = {}
    for storage in STORAGES:
        root = tmp_path_factory.mktemp(storage)
        with _storage(storage):
            assert pd.Series(["text"]).dtype.storage == storage
            _runs(root, pack, splits)
        made[storage] = root
    return made


def _text(path: Path, root: Path) -> str:
    text = path.read_text(encoding="utf-8").replace(str(root.resolve()), "<ROOT>").replace(str(root), "<ROOT>")
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def test_the_storages_write_the_same_files(trees: dict[str, Path]) -> None:
    python, arrow = trees["python"], trees["pyarrow"]
    names = sorted(p.relative_to(python) for p in python.rglob("*") if p.suffix in {".csv", ".json", ".md", ".jsonl"})
    assert {p.relative_to(arrow) for p in arrow.rglob("*") if p.suffix in {".csv", ".json", ".md", ".jsonl"}} == set(names)
    assert any(n.name == "report.md" for n in names) and any(n.name == "bench_report.md" for n in names)
    differing = [str(n) for n in names if _text(python / n, python) != _text(arrow / n, arrow)]
    assert differing == []


@pytest.mark.parametrize("name", ["bench_judge_file", "bench_synthetic"])
def test_the_bench_markdown_under_arrow_is_the_golden_markdown(trees: dict[str, Path], name: str) -> None:
    folder = next(p.parent for p in (trees["pyarrow"] / name).rglob("bench_report.json"))
    with _storage("pyarrow"):
        markdown = render_bench_markdown(build_bench_report(folder, n_boot=N_BOOT, seed=SEED))
    assert _normalised(markdown, trees["pyarrow"]) == (DATA / f"{name}.md").read_text(encoding="utf-8")


def test_the_otb_markdown_under_arrow_is_the_golden_markdown(trees: dict[str, Path]) -> None:
    folder = next(p.parent for p in (trees["pyarrow"] / "otb_judge_file").rglob("otb_report.json"))
    with _storage("pyarrow"):
        markdown = render_otb_markdown(build_otb_report(folder, n_boot=N_BOOT, seed=SEED))
    assert _normalised(markdown, trees["pyarrow"]) == (DATA / "otb_judge_file.md").read_text(encoding="utf-8")
