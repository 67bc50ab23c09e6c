"""Importers on the real data in ../shared/data (skipped when it is absent).

Counts asserted here are the ones stated in each data set's SOURCE.md. Packs are written to
temporary directories only; nothing derived from the data is kept in the repository.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from evolve.data import RatingPack, check_pack, import_kqa, import_savage, load_pack, savage_swapped_case_ids, write_pack

from .conftest import SHARED_DATA, requires_real_data

KQA_DIR = SHARED_DATA / "kqa-physician-nli"
SAVAGE_DIR = SHARED_DATA / "savage2024-dr-ratings"

pytestmark = requires_real_data


@pytest.fixture(scope="module")
def kqa() -> RatingPack:
    if not KQA_DIR.is_dir():
        pytest.skip(f"K-QA data not available at {KQA_DIR}")
    return import_kqa(KQA_DIR)


@pytest.fixture(scope="module")
def savage() -> RatingPack:
    if not SAVAGE_DIR.is_dir():
        pytest.skip(f"Savage et al. 2024 data not available at {SAVAGE_DIR}")
    return import_savage(SAVAGE_DIR)


def _per_rater(pack: RatingPack) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for r in pack.ratings:
        out.setdefault(r.rater_id, Counter())[r.score] += 1
    return out


# -- K-QA ---------------------------------------------------------------------------------


def test_kqa_counts(kqa: RatingPack) -> None:
    assert len(kqa.cases) == 50
    assert len(kqa.targets) == 399
    assert kqa.raters == ("kqa-physician-1", "kqa-physician-2", "kqa-physician-3")
    assert len(kqa.ratings) == 1197
    assert kqa.criteria == ("entailment",)
    assert {t.component for t in kqa.targets} == {"answer"}


def test_kqa_per_rater_counts_sum_and_majority(kqa: RatingPack) -> None:
    per_rater = _per_rater(kqa)
    assert all(sum(c.values()) == 399 for c in per_rater.values())
    majority: Counter = Counter()
    for target in kqa.targets:
        votes = Counter(r.score for r in kqa.ratings_of_target(target.target_id))
        score, n = votes.most_common(1)[0]
        assert n >= 2, f"{target.target_id} has no majority"
        majority[score] += 1
    # SOURCE.md: majority_label Neutral 234, Entailment 153, Contradiction 12.
    assert majority == Counter({1: 234, 2: 153, 0: 12})


def test_kqa_agreement_and_targets_match_source(kqa: RatingPack) -> None:
    unanimous = sum(len({r.score for r in kqa.ratings_of_target(t.target_id)}) == 1 for t in kqa.targets)
    assert round(unanimous / 399, 2) == 0.78  # "All three physicians agree on 78% of rows"
    assert Counter(t.model for t in kqa.targets) == {"gpt4": 118, "gpt35": 101, "askk": 99, "bard": 81}
    assert Counter(t.condition for t in kqa.targets) == {"Must_have": 217, "Nice_to_have": 182}
    assert [t.target_id for t in kqa.targets] == [f"kqa-r{i:03d}" for i in range(399)]


def test_kqa_cases(kqa: RatingPack) -> None:
    assert all(re.fullmatch(r"kqa-[0-9a-f]{10}", c.case_id) for c in kqa.cases)
    assert all(len(c.title) <= 80 for c in kqa.cases)
    with_ref = sum(c.reference_answer is not None for c in kqa.cases)
    assert with_ref >= 45, f"only {with_ref} of 50 questions got a physician reference answer"
    # first-appearance order: the first target belongs to the first case
    assert kqa.targets[0].case_id == kqa.cases[0].case_id


def test_kqa_provenance(kqa: RatingPack) -> None:
    assert kqa.manifest.source_sha256 == {
        "NLI_medical_annotator.csv": "98372a3feea2ac7b445357ec2ab2e6f6251ecd72ad03a102ea4e4cdf53956779",
        "questions_w_answers.jsonl": "1d4204665e2c9e50c3c348b8ad1de2ddf5d90205c3efaea0eb38135192272c6f",
    }
    assert kqa.manifest.name == "kqa"


def test_kqa_import_is_deterministic(kqa: RatingPack) -> None:
    assert import_kqa(KQA_DIR) == kqa


def test_kqa_round_trip(kqa: RatingPack, tmp_path: Path) -> None:
    out = write_pack(kqa, tmp_path / "kqa")
    assert load_pack(out) == kqa
    assert check_pack(out).n_ratings == 1197


# -- Savage et al. 2024 -------------------------------------------------------------------


def test_savage_counts(savage: RatingPack) -> None:
    assert len(savage.cases) == 101
    assert len(savage.targets) == 101
    assert len(savage.ratings) == 202
    assert savage.raters == ("savage-reviewer-1", "savage-reviewer-2")
    assert {t.condition for t in savage.targets} == {"DR"}


def test_savage_swapped_rows(savage: RatingPack) -> None:
    assert len(savage_swapped_case_ids(savage)) == 42
    assert "In 42 of 101 rows" in savage.manifest.description
    for t in savage.targets:
        answer, rationale = t.text.removeprefix("Final answer: ").split("\n\nRationale:\n", 1)
        assert len(rationale) > len(answer), t.target_id


def test_savage_reviewer_counts(savage: RatingPack) -> None:
    per_rater = _per_rater(savage)
    assert per_rater["savage-reviewer-1"] == Counter({0: 81, 1: 18, 2: 1, 3: 1})
    assert per_rater["savage-reviewer-2"] == Counter({0: 89, 1: 10, 2: 1, 3: 1})
    same = sum(len({r.score for r in savage.ratings_of_target(t.target_id)}) == 1 for t in savage.targets)
    assert round(same / 101, 2) == 0.84  # "same count in 84% of rows"
    assert any(r.comment for r in savage.ratings)


def test_savage_provenance_and_round_trip(savage: RatingPack, tmp_path: Path) -> None:
    assert savage.manifest.source_sha256 == {
        "41746_2024_1010_MOESM9_ESM.xlsx": "00738ebadbb7a41e6a9396aca34a2ca49e71962bc8610ac01480d25de7bc2f1c"
    }
    assert load_pack(write_pack(savage, tmp_path / "savage")) == savage
