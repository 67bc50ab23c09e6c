"""make_splits: deterministic, case-disjoint, complements, source order, sizes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evolve.data import RatingPack
from evolve.errors import SplitError
from evolve.splits import Splits, check_splits, make_splits, split_sizes

from .conftest import synthetic_pack


def test_deterministic(pack: RatingPack) -> None:
    assert make_splits(pack, seed=5) == make_splits(pack, seed=5)
    assert make_splits(pack, seed=5).holdout != make_splits(pack, seed=6).holdout


def test_disjoint_complement_and_order(pack: RatingPack) -> None:
    s = make_splits(pack)
    ids = list(pack.case_ids)
    assert not set(s.frame) & set(s.holdout)
    assert set(s.frame) | set(s.holdout) == set(ids)
    assert not set(s.train) & set(s.validation)
    assert set(s.train) | set(s.validation) == set(s.frame)
    for name in ("frame", "holdout", "train", "validation"):
        listed = list(getattr(s, name))
        assert listed == [cid for cid in ids if cid in set(listed)], f"{name} lost source order"
    check_splits(s, pack)


def test_default_sizes(pack: RatingPack) -> None:
    s = make_splits(pack)  # 20 cases: holdout 4, frame 16, validation round(4.8) = 5
    assert s.counts() == {"frame": 16, "holdout": 4, "train": 11, "validation": 5}
    assert (s.seed, s.holdout_fraction, s.validation_fraction, s.pack) == (42, 0.2, 0.3, "synthetic")


def test_uses_numpy_default_rng(pack: RatingPack) -> None:
    import numpy as np

    rng = np.random.default_rng(42)
    ids = pack.case_ids
    held = {ids[i] for i in rng.permutation(len(ids))[:4]}
    assert set(make_splits(pack).holdout) == held


def test_validation_fraction_does_not_move_the_holdout(pack: RatingPack) -> None:
    a = make_splits(pack, validation_fraction=0.2)
    b = make_splits(pack, validation_fraction=0.5)
    assert a.holdout == b.holdout
    assert set(make_splits(pack, holdout_fraction=0.1).holdout) < set(make_splits(pack, holdout_fraction=0.3).holdout)


def test_side_of(pack: RatingPack) -> None:
    s = make_splits(pack)
    assert {s.side_of(c) for c in s.holdout} == {"holdout"}
    assert {s.side_of(c) for c in s.train} == {"train"}
    assert {s.side_of(c) for c in s.validation} == {"validation"}
    with pytest.raises(KeyError):
        s.side_of("nope")


@pytest.mark.parametrize(
    ("n", "hf", "vf", "expected"),
    [
        (10, 0.15, 0.5, (2, 4, 4)),   # 1.5 rounds up to 2; 8 * 0.5 = 4
        (10, 0.25, 0.3, (3, 5, 2)),   # 2.5 -> 3; 7 * 0.3 = 2.1 -> 2
        (10, 0.05, 0.1, (1, 8, 1)),   # 0.5 -> 1; 9 * 0.1 = 0.9 -> 1
        (3, 0.1, 0.3, (1, 1, 1)),     # positive fraction holds out at least one; 2 * 0.3 = 0.6 -> 1
        (4, 0.0, 0.9, (0, 1, 3)),     # no holdout; validation clamped to frame - 1
        (2, 0.0, 0.01, (0, 1, 1)),    # validation at least 1
    ],
)
def test_rounding_rule(n: int, hf: float, vf: float, expected: tuple[int, int, int]) -> None:
    assert split_sizes(n, hf, vf) == expected


def test_too_few_cases() -> None:
    with pytest.raises(SplitError, match="train and validation each need at least one case"):
        make_splits(synthetic_pack(2), holdout_fraction=0.2)
    with pytest.raises(SplitError):
        make_splits(synthetic_pack(1), holdout_fraction=0.0)
    s = make_splits(synthetic_pack(3), holdout_fraction=0.2)
    assert s.counts() == {"frame": 2, "holdout": 1, "train": 1, "validation": 1}


@pytest.mark.parametrize("kwargs", [{"holdout_fraction": 1.0}, {"holdout_fraction": -0.1},
                                    {"validation_fraction": 0.0}, {"validation_fraction": 1.0}, {"seed": -1}])
def test_bad_parameters(pack: RatingPack, kwargs: dict) -> None:
    with pytest.raises(SplitError):
        make_splits(pack, **kwargs)


def test_splits_model_is_frozen(pack: RatingPack) -> None:
    s = make_splits(pack)
    with pytest.raises(ValidationError):
        s.seed = 1  # type: ignore[misc]
    assert Splits.model_validate(s.model_dump()) == s
