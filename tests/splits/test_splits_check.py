"""check_splits catches overlap, missing, extra and reordered ids, and side-crossing ratings."""

from __future__ import annotations

import pytest

from evolve.data import Rating, RatingPack
from evolve.errors import SplitError
from evolve.splits import Splits, check_splits, make_splits

from .conftest import synthetic_pack


def _splits(pack: RatingPack, **changes) -> Splits:
    return make_splits(pack).model_copy(update=changes)


def _problem(splits: Splits, pack: RatingPack) -> str:
    with pytest.raises(SplitError) as info:
        check_splits(splits, pack)
    return str(info.value)


def test_valid_splits_pass(pack: RatingPack) -> None:
    check_splits(make_splits(pack), pack)


def test_frame_holdout_overlap(pack: RatingPack) -> None:
    s = make_splits(pack)
    bad = s.model_copy(update={"holdout": tuple(c for c in pack.case_ids if c in {*s.holdout, s.frame[0]})})
    assert "frame and holdout overlap in 1 case(s)" in _problem(bad, pack)


def test_train_validation_overlap(pack: RatingPack) -> None:
    s = make_splits(pack)
    bad = s.model_copy(update={"validation": tuple(c for c in s.frame if c in {*s.validation, s.train[0]})})
    msg = _problem(bad, pack)
    assert "train and validation overlap in 1 case(s)" in msg


def test_missing_case(pack: RatingPack) -> None:
    s = make_splits(pack)
    gone = s.holdout[0]
    msg = _problem(s.model_copy(update={"holdout": s.holdout[1:]}), pack)
    assert "1 pack case(s) are in neither frame nor holdout" in msg
    assert gone in msg


def test_extra_case(pack: RatingPack) -> None:
    s = make_splits(pack)
    msg = _problem(s.model_copy(update={"holdout": (*s.holdout, "case-zzz")}), pack)
    assert "holdout: 1 case id(s) not in pack 'synthetic'" in msg
    assert "case-zzz" in msg


def test_train_validation_do_not_cover_frame(pack: RatingPack) -> None:
    s = make_splits(pack)
    msg = _problem(s.model_copy(update={"train": s.train[1:]}), pack)
    assert "1 frame case(s) are in neither train nor validation" in msg
    msg = _problem(s.model_copy(update={"train": (*s.train, s.holdout[0])}), pack)
    assert "not in the frame" in msg


def test_reordered(pack: RatingPack) -> None:
    s = make_splits(pack)
    msg = _problem(s.model_copy(update={"train": tuple(reversed(s.train))}), pack)
    assert "train: not in pack source order" in msg
    msg = _problem(s.model_copy(update={"frame": tuple(sorted(s.frame))}), pack)
    assert "frame: not in pack source order" in msg


def test_duplicate_ids(pack: RatingPack) -> None:
    s = make_splits(pack)
    msg = _problem(s.model_copy(update={"validation": (s.validation[0], *s.validation)}), pack)
    assert "validation: case ids listed more than once" in msg


def test_other_pack(pack: RatingPack) -> None:
    other = synthetic_pack(name="other")
    assert "splits were made for pack 'synthetic' but the pack is 'other'" in _problem(make_splits(pack), other)


def test_all_problems_reported_together(pack: RatingPack) -> None:
    s = make_splits(pack)
    bad = s.model_copy(update={"train": tuple(reversed(s.train)), "holdout": (*s.holdout, "case-zzz")})
    msg = _problem(bad, pack)
    assert "(2 problems)" in msg


def test_rating_on_another_side_than_its_target(pack: RatingPack) -> None:
    s = make_splits(pack)
    holdout_target = next(t for t in pack.targets if t.case_id == s.holdout[0])
    stray = Rating(case_id=s.train[0], target_id=holdout_target.target_id, rater_id="r9",
                   criterion="entailment", score=1)
    broken = RatingPack(path=None, manifest=pack.manifest, cases=pack.cases, targets=pack.targets,
                        ratings=(*pack.ratings, stray))
    msg = _problem(s, broken)
    assert "1 rating(s) have a case_id on a different side than their target's case" in msg
