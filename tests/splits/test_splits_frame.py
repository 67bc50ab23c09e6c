"""make_frame_splits / draw_frame: the paper's 110-case frame, its 190-case complement, 80/30 (consilium paper, calibration)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from evolve.errors import SplitError
from evolve.splits import (
    FRAME_PRESETS,
    CaseList,
    SplitWarning,
    check_splits,
    draw_frame,
    load_splits,
    make_frame_splits,
    read_manifest,
    write_splits,
)

from .conftest import doi_universe, rated_pack

IDS = doi_universe(300)


def _in_source_order(listed, universe=IDS) -> bool:
    pos = {cid: i for i, cid in enumerate(universe)}
    return [pos[c] for c in listed] == sorted(pos[c] for c in listed)


def test_paper_frame_exact_complement_in_source_order(tmp_path: Path) -> None:
    frame = draw_frame(IDS, 110, seed=7)
    manifest = tmp_path / "calibration.txt"
    manifest.write_text("".join(f"{c}\n" for c in sorted(frame)))  # user order: sorted, not source order
    with pytest.warns(SplitWarning, match="not in the source order"):
        s = make_frame_splits(IDS, pack_name="nejm", frame=read_manifest(manifest), preset="paper", seed=7)
    assert s.counts() == {"frame": 110, "holdout": 190, "train": 80, "validation": 30}
    assert set(s.frame) == set(frame)
    assert s.holdout == tuple(c for c in IDS if c not in set(frame))  # exact complement, source order
    for name in ("frame", "holdout", "train", "validation"):
        assert _in_source_order(getattr(s, name)), name
    assert set(s.train) | set(s.validation) == set(s.frame) and not set(s.train) & set(s.validation)


def test_exact_sizes_and_fraction() -> None:
    frame = IDS[:110]
    s = make_frame_splits(IDS, pack_name="nejm", frame=frame, n_train=80, n_validation=30)
    assert (len(s.train), len(s.validation)) == (80, 30)
    assert make_frame_splits(IDS, pack_name="nejm", frame=frame, n_validation=30) == s  # n_train = rest
    assert make_frame_splits(IDS, pack_name="nejm", frame=frame, n_train=80) == s
    f = make_frame_splits(IDS, pack_name="nejm", frame=frame, validation_fraction=0.25)
    assert len(f.validation) == 28  # round_half_up(27.5)
    assert f.validation_fraction == 0.25
    assert s.validation_fraction == pytest.approx(30 / 110) and s.holdout_fraction == pytest.approx(190 / 300)


def test_deterministic_with_seed() -> None:
    a = make_frame_splits(IDS, pack_name="nejm", preset="paper", seed=3)
    assert a == make_frame_splits(IDS, pack_name="nejm", preset="paper", seed=3)
    b = make_frame_splits(IDS, pack_name="nejm", preset="paper", seed=4)
    assert a.frame != b.frame
    assert draw_frame(IDS, 110, seed=3) == a.frame
    # The partition of a given frame depends only on the seed, not on how the frame was obtained.
    assert make_frame_splits(IDS, pack_name="nejm", frame=a.frame, n_train=80, seed=3).validation == a.validation


def test_frame_draw_is_in_source_order_and_sized() -> None:
    frame = draw_frame(IDS, 110, seed=0)
    assert len(frame) == 110 and len(set(frame)) == 110 and _in_source_order(frame)
    with pytest.raises(SplitError, match="frame size 301"):
        draw_frame(IDS, 301)
    with pytest.raises(SplitError, match="frame size 1"):
        draw_frame(IDS, 1)
    with pytest.raises(SplitError, match="repeats item 1"):
        draw_frame([IDS[0], IDS[0], IDS[1]], 2)


def test_doi_groups_stay_on_one_side() -> None:
    universe = [f"case-{i:03d}" for i in range(40)]
    group_of = {"case-001": "10.1/a", "case-017": "10.1/a", "case-005": "10.1/b", "case-030": "10.1/b",
                "case-031": "10.1/b"}
    seen_apart = False
    for seed in range(25):
        s = make_frame_splits(universe, pack_name="p", frame_size=20, n_validation=6, group_of=group_of, seed=seed)
        assert s.counts() == {"frame": 20, "holdout": 20, "train": 14, "validation": 6}
        for members in (["case-001", "case-017"], ["case-005", "case-030", "case-031"]):
            assert len({s.side_of(c) for c in members}) == 1, (seed, members)
        seen_apart |= s.side_of("case-001") != s.side_of("case-005")
        assert s.frame_origin.grouped
        check_splits(s, rated_pack(list(s.frame), name="p"), cases=universe, group_of=group_of)
    assert seen_apart  # the groups really are drawn, not pinned


def test_groups_that_cannot_reach_an_exact_size() -> None:
    universe = ["a", "b", "c", "d"]
    with pytest.raises(SplitError, match="cannot draw exactly 3 case"):
        draw_frame(universe, 3, group_of={"a": "g1", "b": "g1", "c": "g2", "d": "g2"})


def test_check_splits_finds_a_split_group() -> None:
    s = make_frame_splits(IDS, pack_name="nejm", preset="paper")
    group_of = {s.train[0]: "10.9/shared", s.validation[0]: "10.9/shared"}
    with pytest.raises(SplitError, match="group \\(DOI\\) '10.9/shared' is split across sides"):
        check_splits(s, rated_pack(list(s.frame)), group_of=group_of)


def test_split_json_records_the_manifest_and_round_trips(tmp_path: Path) -> None:
    manifest = tmp_path / "frame.txt"
    manifest.write_text("# calibration frame\n" + "".join(f"{c}\n" for c in IDS[:110]))
    cases = tmp_path / "cases.txt"
    cases.write_text("".join(f"{c}\n" for c in IDS))
    from evolve.splits import read_case_ids

    s = make_frame_splits(read_case_ids(cases), pack_name="nejm", frame=read_manifest(manifest), preset="paper")
    out = write_splits(s, tmp_path / "sp")
    meta = json.loads((out / "split.json").read_text())
    origin = meta["frame_origin"]
    import hashlib

    assert origin["frame"] == "manifest" and origin["frame_manifest"]["path"] == str(manifest)
    assert origin["frame_manifest"]["sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert origin["cases"]["sha256"] == hashlib.sha256(cases.read_bytes()).hexdigest()
    assert (origin["universe"], origin["n_cases"], origin["preset"], origin["partition"]) == ("file", 300, "paper", "drawn")
    assert meta["version"] == 1 and meta["counts"]["holdout"] == 190
    assert load_splits(out) == s

    drawn = make_frame_splits(IDS, pack_name="nejm", frame_size=110, n_train=80, seed=9)
    origin = drawn.frame_origin
    assert (origin.frame, origin.frame_seed, origin.frame_manifest, origin.universe) == ("drawn", 9, None, "list")


def test_frame_split_checked_against_a_pack_of_rated_cases(tmp_path: Path) -> None:
    s = make_frame_splits(IDS, pack_name="nejm", preset="paper", seed=1)
    pack = rated_pack(list(s.frame))
    assert check_splits(s, pack).warnings  # 190 listed ids not verified without the case file
    assert check_splits(s, pack, cases=IDS).warnings == ()
    # A rated case in the holdout is allowed (final evaluation only), and said so.
    extra = rated_pack([*s.frame, s.holdout[0]])
    extra = type(extra)(path=None, manifest=extra.manifest,
                        cases=sorted(extra.cases, key=lambda c: IDS.index(c.case_id)),
                        targets=extra.targets, ratings=extra.ratings)
    notes = check_splits(s, extra, cases=IDS).warnings
    assert any("1 rated pack case(s) are in the holdout" in n for n in notes)
    # Frame cases without ratings are allowed too, with a warning.
    notes = check_splits(s, rated_pack(list(s.frame[1:])), cases=IDS).warnings
    assert any("1 frame case(s) are not in pack 'nejm'" in n for n in notes)


def test_check_splits_against_the_case_universe() -> None:
    s = make_frame_splits(IDS, pack_name="nejm", preset="paper", seed=1)
    pack = rated_pack(list(s.frame))
    with pytest.raises(SplitError) as info:
        check_splits(s, pack, cases=[*IDS, "10.1056/extra"])
    assert "1 case(s) of the case list are in neither frame nor holdout" in str(info.value)
    with pytest.raises(SplitError) as info:
        check_splits(s, pack, cases=list(reversed(IDS)))
    assert "frame: not in source order of the case list" in str(info.value)
    outsider = rated_pack([*s.frame, "10.1056/outsider"])
    with pytest.raises(SplitError) as info:
        check_splits(s, outsider, cases=IDS)
    msg = str(info.value)
    assert "1 pack case(s) are in neither frame nor holdout" in msg and "1 pack case(s) are not in the case list" in msg


def test_universe_taken_from_the_pack_keeps_the_strict_pack_rules() -> None:
    pack = rated_pack(IDS[:50])
    s = make_frame_splits(CaseList.from_pack(pack), pack_name="nejm", frame_size=30, n_validation=10)
    assert s.frame_origin.universe == "pack" and check_splits(s, pack).warnings == ()
    bad = s.model_copy(update={"holdout": (*s.holdout, "10.1056/zzz")})
    with pytest.raises(SplitError, match="holdout: 1 case id\\(s\\) not in pack 'nejm'"):
        check_splits(bad, pack)


def test_preset_values() -> None:
    p = FRAME_PRESETS["paper"]
    assert (p.n_cases, p.frame_size, p.n_train, p.n_validation) == (300, 110, 80, 30)


def test_options_are_checked_together() -> None:
    with pytest.raises(SplitError) as info:
        make_frame_splits(IDS, pack_name="nejm", frame=IDS[:110], frame_size=100, preset="paper", n_train=70,
                          validation_fraction=0.3)
    msg = str(info.value)
    assert "inconsistent options (5 problems)" in msg
    assert "frame_size=100 conflicts with preset 'paper'" in msg and "n_train=70 conflicts" in msg
    assert "validation_fraction conflicts with preset" in msg and "not both" in msg
    with pytest.raises(SplitError, match="no frame"):
        make_frame_splits(IDS, pack_name="nejm")
    with pytest.raises(SplitError, match="must equal frame_size 100"):
        make_frame_splits(IDS, pack_name="nejm", frame_size=100, n_train=80, n_validation=30)
    with pytest.raises(SplitError, match="unknown frame preset 'nope'"):
        make_frame_splits(IDS, pack_name="nejm", preset="nope")
    with pytest.raises(SplitError, match="seed=-1"):
        make_frame_splits(IDS, pack_name="nejm", frame_size=10, seed=-1)
    with pytest.raises(SplitError, match="leaves no validation case"):
        make_frame_splits(IDS, pack_name="nejm", frame=IDS[:10], n_train=10)


def test_preset_needs_the_full_universe() -> None:
    with pytest.raises(SplitError, match="has 299 cases but preset 'paper' expects 300"):
        make_frame_splits(IDS[:299], pack_name="nejm", frame=IDS[:110], preset="paper")


def test_no_python_warning_for_source_ordered_manifests() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_frame_splits(IDS, pack_name="nejm", frame=IDS[:110], preset="paper")
