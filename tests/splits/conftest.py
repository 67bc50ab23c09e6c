"""Fixtures for the split tests: synthetic packs of any size."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve.data import Case, PackManifest, Rating, RatingPack, RubricRef, Target

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def synthetic_pack(n_cases: int = 20, name: str = "synthetic") -> RatingPack:
    """``n_cases`` cases (ids in a non-sorted source order), two targets and two raters each."""
    cases, targets, ratings = [], [], []
    for i in range(n_cases):
        cid = f"case-{(i * 7) % 101:03d}"  # source order differs from sorted order
        cases.append(Case(case_id=cid, text=f"Synthetic case {i}."))
        for j in range(2):
            tid = f"{cid}-t{j}"
            targets.append(Target(target_id=tid, case_id=cid, component="answer", text=f"Answer {i}.{j}"))
            for rater in ("r1", "r2"):
                ratings.append(Rating(case_id=cid, target_id=tid, rater_id=rater, criterion="entailment",
                                      score=(i + j) % 3))
    manifest = PackManifest(name=name, rubric=RubricRef(id="kqa-entailment", version="1"))
    return RatingPack(path=None, manifest=manifest, cases=cases, targets=targets, ratings=ratings)


@pytest.fixture
def pack() -> RatingPack:
    return synthetic_pack()


def doi_universe(n: int = 300) -> list[str]:
    """``n`` DOI-like case ids in a source order that is not sorted order."""
    return [f"10.1056/NEJMcpc{2300000 + (i * 7919) % 100003:06d}" for i in range(n)]


def rated_pack(case_ids: list[str], name: str = "nejm") -> RatingPack:
    """A pack rating exactly ``case_ids`` (in that order): one target, two raters each."""
    from evolve.rubric import load_rubric

    rubric = load_rubric("kqa-entailment")
    cases, targets, ratings = [], [], []
    for i, cid in enumerate(case_ids):
        cases.append(Case(case_id=cid, text=f"Synthetic case {i}."))
        tid = f"t{i:03d}"
        targets.append(Target(target_id=tid, case_id=cid, component="answer", text=f"Answer {i}"))
        for rater in ("r1", "r2"):
            ratings.append(Rating(case_id=cid, target_id=tid, rater_id=rater, criterion="entailment", score=i % 3))
    manifest = PackManifest(name=name, rubric=RubricRef(id=rubric.id, version=rubric.version))
    return RatingPack(path=None, manifest=manifest, cases=cases, targets=targets, ratings=ratings)
