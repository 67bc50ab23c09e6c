"""Fixtures for the rating-pack tests: small synthetic packs and a private test rubric."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evolve.data import Case, PackManifest, Rating, RatingPack, RubricRef, Target, write_pack

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
EXAMPLE_PACK = REPO_ROOT / "ratings" / "example"
SCHEMA_DIR = REPO_ROOT / "ratings" / "schema"

TEST_RUBRIC = {
    "id": "test-rubric",
    "version": "7",
    "title": "Synthetic rubric for pack tests",
    "components": {"answer": "an answer", "rationale": "a rationale"},
    "criteria": [
        {
            "criterion_id": "support",
            "name": "Support",
            "definition": "Synthetic.",
            "anchors": {"0": "no", "1": "partly", "2": "yes"},
            "scale_min": 0,
            "scale_max": 2,
            "components": ["answer"],
        },
        {
            "criterion_id": "errors",
            "name": "Errors",
            "definition": "Synthetic.",
            "anchors": {"0": "none", "1": "one", "2": "two", "3": "three or more"},
            "scale_min": 0,
            "scale_max": 3,
            "higher_is_better": False,
            "components": ["rationale"],
        },
    ],
}


@pytest.fixture
def prompts_root(tmp_path: Path) -> Path:
    """A judge_prompts folder holding only ``test-rubric`` (two criteria, two components)."""
    root = tmp_path / "prompts"
    (root / "test-rubric").mkdir(parents=True)
    (root / "test-rubric" / "rubric.json").write_text(json.dumps(TEST_RUBRIC), encoding="utf-8")
    return root


def small_pack() -> RatingPack:
    """2 cases, 3 targets (2 answers, 1 rationale), 2 raters, both criteria of ``test-rubric``."""
    cases = (
        Case(case_id="c1", title="Case one", text="Synthetic case one.", reference_answer="Ref one."),
        Case(case_id="c2", title="Case two", text="Synthetic case two."),
    )
    targets = (
        Target(target_id="t1", case_id="c1", component="answer", text="Answer one.", statement="S1", model="m"),
        Target(target_id="t2", case_id="c1", component="rationale", text="Rationale one.", model="m"),
        Target(target_id="t3", case_id="c2", component="answer", text="Answer two, with a comma.", model="m"),
    )
    ratings = (
        Rating(case_id="c1", target_id="t1", rater_id="r1", criterion="support", score=2),
        Rating(case_id="c1", target_id="t1", rater_id="r2", criterion="support", score=1, comment='said "partly", ok'),
        Rating(case_id="c1", target_id="t2", rater_id="r1", criterion="errors", score=3),
        Rating(case_id="c1", target_id="t2", rater_id="r2", criterion="errors", not_evaluable=True,
               comment="unreadable,\nsecond line"),
        Rating(case_id="c2", target_id="t3", rater_id="r1", criterion="support", score=0),
        Rating(case_id="c2", target_id="t3", rater_id="r2", criterion="support", score=0),
    )
    manifest = PackManifest(name="small", description="synthetic", rubric=RubricRef(id="test-rubric", version="7"))
    return RatingPack(path=None, manifest=manifest, cases=cases, targets=targets, ratings=ratings)


@pytest.fixture
def pack_dir(tmp_path: Path) -> Path:
    """``small_pack()`` written to a temporary directory."""
    return write_pack(small_pack(), tmp_path / "small")


@pytest.fixture
def edit(pack_dir: Path) -> Callable[[str, Callable[[list[str]], list[str]]], Path]:
    """Edit one file of ``pack_dir`` line by line: ``edit("cases.jsonl", lambda lines: ...)``."""

    def _edit(name: str, change: Callable[[list[str]], list[str]]) -> Path:
        path = pack_dir / name
        lines = path.read_text(encoding="utf-8").split("\n")[:-1]  # files end with a newline
        path.write_text("\n".join(change(lines)) + "\n", encoding="utf-8")
        return pack_dir

    return _edit


@pytest.fixture
def edit_ratings(pack_dir: Path) -> Callable[[Callable[[list[list[str]]], list[list[str]]]], Path]:
    """Edit ``ratings.csv`` of ``pack_dir`` as CSV rows (row 0 is the header)."""

    def _edit(change: Callable[[list[list[str]]], list[list[str]]]) -> Path:
        path = pack_dir / "ratings.csv"
        with open(path, encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
        with open(path, "w", encoding="utf-8", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows(change(rows))
        return pack_dir

    return _edit


requires_real_data = pytest.mark.skipif(
    not SHARED_DATA.is_dir(), reason=f"real data not available at {SHARED_DATA}"
)
