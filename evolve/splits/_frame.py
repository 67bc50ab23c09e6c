"""Frame splits (consilium paper, calibration): a fixed calibration frame, its exact complement, and an exact train/validation partition.

In the paper's setting a case file holds 300 cases (ids are DOIs, source order matters).
Physicians rated 110 of them -- the calibration *frame*; the other 190 are the held-out
benchmark cohort, the exact complement of the frame in source order. The frame is split,
DOI-disjoint, into 80 training and 30 validation cases.
"""

from __future__ import annotations

import re
import warnings as _warnings
from collections.abc import Mapping, Sequence
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from evolve.errors import SplitError
from evolve.records import Record
from evolve.splits._manifest import (
    FRAME_PRESETS,
    CaseList,
    FrameOrigin,
    FramePreset,
    Manifest,
    SplitWarning,
    raise_problems,
    read_case_ids,
    read_manifest,
)
from evolve.splits._splits import (
    SplitCheck,
    Splits,
    _round_half_up,
    _short,
    check_splits,
    load_splits,
    make_splits,
)

if TYPE_CHECKING:  # pragma: no cover
    from evolve.data import RatingPack

DEFAULT_VALIDATION_FRACTION = 0.3


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SplitError(f"seed={seed!r} must be a non-negative integer.")
    return int(seed)


def _as_universe(case_ids: CaseList | Sequence[str]) -> CaseList:
    return case_ids if isinstance(case_ids, CaseList) else CaseList.from_ids(case_ids)


def _as_manifest(value: Manifest | Sequence[str] | Path | str, name: str) -> Manifest:
    if isinstance(value, Manifest):
        return value
    if isinstance(value, (str, Path)):
        return read_manifest(value, name=name)
    return Manifest.from_ids(value, name=name)


def _as_preset(preset: FramePreset | str | None) -> FramePreset | None:
    if preset is None or isinstance(preset, FramePreset):
        return preset
    if preset not in FRAME_PRESETS:
        raise SplitError(f"unknown frame preset {preset!r}; use one of {sorted(FRAME_PRESETS)}.")
    return FRAME_PRESETS[preset]


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Two independent generators from one seed: one draws the frame, the other the partition."""
    frame_seq, partition_seq = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(frame_seq), np.random.default_rng(partition_seq)


def _groups(ids: Sequence[str], group_of: Mapping[str, str]) -> list[tuple[str, ...]]:
    """Cases grouped by ``group_of`` (a case without an entry is its own group), in order of first appearance."""
    out: dict[str, list[str]] = {}
    for cid in ids:
        out.setdefault(group_of.get(cid, cid), []).append(cid)
    return [tuple(v) for v in out.values()]


def _draw(ids: Sequence[str], size: int, rng: np.random.Generator, group_of: Mapping[str, str], *,
          what: str, exact: bool) -> set[str]:
    """Walk a permutation of the groups, taking each group that still fits, until ``size`` cases are taken.

    Without groups this is the first ``size`` cases of a permutation of ``ids``.
    """
    groups = _groups(ids, group_of)
    chosen: list[str] = []
    for gi in rng.permutation(len(groups)):
        if len(chosen) == size:
            break
        if len(chosen) + len(groups[gi]) <= size:
            chosen.extend(groups[gi])
    if (exact and len(chosen) != size) or not chosen:
        raise SplitError(
            f"cannot draw {'exactly ' if exact else ''}{size} case(s) for {what} from {len(ids)} cases in "
            f"{len(groups)} DOI group(s) without splitting a group (this seed's draw reached {len(chosen)}). "
            "Choose another size or seed, or a validation fraction instead of exact sizes."
        )
    return set(chosen)


# --------------------------------------------------------------------------------------------
# Drawing and checking a frame
# --------------------------------------------------------------------------------------------


def draw_frame(
    case_ids: CaseList | Sequence[str],
    size: int,
    *,
    seed: int = 42,
    group_of: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Draw a calibration frame of exactly ``size`` cases, deterministically, when no manifest exists.

    The seed's first stream (``numpy.random.SeedSequence(seed).spawn(2)[0]``) permutes the
    groups (DOIs; each case is its own group without ``group_of``) and whole groups are
    taken while they fit, so a group is never split between frame and holdout (consilium paper, calibration).

    Args:
        case_ids: The source-ordered universe (a :class:`CaseList` or a list of ids).
        size: Frame size, ``2 .. len(case_ids)`` (train and validation need a case each).
        seed: Non-negative seed.
        group_of: Case id -> group (DOI), merged over the case list's own mapping.

    Returns:
        The frame's case ids in the universe's source order.

    Raises:
        SplitError: Bad seed or size, repeated ids, or groups that make ``size`` unreachable.
    """
    seed = _check_seed(seed)
    universe = _as_universe(case_ids)
    n = len(universe.ids)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 2 <= size <= n:
        raise SplitError(
            f"frame size {size!r} must be an integer from 2 to the {n} cases of {universe.label} "
            "(train and validation need at least one case each)."
        )
    frame_rng, _ = _streams(seed)
    chosen = _draw(universe.ids, int(size), frame_rng, {**universe.group_of, **(group_of or {})},
                   what="the frame", exact=True)
    return tuple(cid for cid in universe.ids if cid in chosen)


class ManifestCheck(Record):
    """A verified manifest.

    Attributes:
        name: What the list is for (``frame``, ``train``, ``validation``).
        ids: Its case ids, each once, in the universe's source order.
        warnings: Accepted oddities (e.g. the manifest was not in source order).
    """

    name: str
    ids: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def _manifest_problems(
    m: Manifest, universe: CaseList, expected_size: int | None, why: str = ""
) -> tuple[tuple[str, ...], list[str], list[str]]:
    """Unknown ids, repeats (both lines), emptiness, size and source order of one manifest."""
    order = {cid: i for i, cid in enumerate(universe.ids)}
    problems: list[str] = []
    warnings: list[str] = []
    first: dict[str, int] = {}
    known: list[int] = []
    for i, cid in enumerate(m.ids):
        if cid in first:
            problems.append(
                f"{m.where(i)}: case id {cid!r} repeats {m.unit} {m.lines[first[cid]]}. Delete one of the two."
            )
            continue
        first[cid] = i
        if cid not in order:
            hint = " The line holds more than one field: put one case id per line." if re.search(r"[\s,;]", cid) else ""
            problems.append(f"{m.where(i)}: case id {cid!r} is not in {universe.label}. Fix the id or delete it.{hint}")
            continue
        known.append(i)
    if not m.ids:
        problems.append(f"{m.label}: lists no case ids. Put one case id per line.")
    elif expected_size is not None and len(first) != expected_size:
        problems.append(
            f"{m.label}: lists {len(first)} distinct case id(s) but {expected_size} are expected{why}. "
            "Add or remove ids (or change the expected size)."
        )
    for a, b in pairwise(known):
        if order[m.ids[a]] > order[m.ids[b]]:
            warnings.append(
                f"{m.label} is not in the source order of {universe.label} ({m.unit} {m.lines[b]} {m.ids[b]!r} "
                f"comes before {m.unit} {m.lines[a]} {m.ids[a]!r} there); accepted, and written in source order."
            )
            break
    ids = tuple(sorted((m.ids[i] for i in known), key=order.__getitem__))
    return ids, problems, warnings


def _whole_groups_problems(m: Manifest, ids: Sequence[str], pool: Sequence[str], group_of: Mapping[str, str],
                           outside: str) -> list[str]:
    """Groups (DOIs) of which ``m`` lists some cases while other cases of ``pool`` are outside it."""
    if not group_of:
        return []
    inside = set(ids)
    line = {cid: m.where(i) for i, cid in reversed(list(enumerate(m.ids)))}
    problems = []
    for group in _groups(pool, group_of):
        part = [cid for cid in group if cid in inside]
        if part and len(part) < len(group):
            rest = [cid for cid in group if cid not in inside]
            problems.append(
                f"{line[part[0]]}: case {part[0]!r} belongs to DOI group {group_of.get(part[0], part[0])!r}, whose "
                f"case(s) {_short(rest, 5)} are {outside}. A DOI stays on one side: list all of its cases or none."
            )
    return problems


def check_manifest(
    manifest: Manifest | Sequence[str] | Path | str,
    universe: CaseList | Sequence[str],
    *,
    expected_size: int | None = None,
    name: str | None = None,
    group_of: Mapping[str, str] | None = None,
) -> ManifestCheck:
    """Verify a user-supplied manifest against the case universe (e.g. a 110-case frame, consilium paper, calibration).

    Reports every problem at once: ids that are not in the universe (with their line), ids
    listed twice (both lines), an empty manifest, a number of distinct ids other than
    ``expected_size``, and DOI groups that the manifest lists only in part (when a group
    mapping is known). A manifest in another order than the universe is **accepted** with a
    warning: users often keep manifests sorted or grouped their own way, and every manifest
    ``evolve`` writes is in source order regardless.

    Args:
        manifest: A :class:`Manifest`, a manifest file path (read with :func:`read_manifest`),
            or an in-memory list of ids.
        universe: The source-ordered case universe (case file or pack cases).
        expected_size: Required number of distinct ids, if any (the paper's frame: 110).
        name: What the list is for, used in messages (default: the manifest's own name or ``frame``).
        group_of: Case id -> group (DOI), merged over the universe's own mapping.

    Returns:
        A :class:`ManifestCheck` with the ids in source order and any warnings.

    Raises:
        SplitError: One error listing every problem by file and line, with the fix.
    """
    m = _as_manifest(manifest, name or "frame")
    if name and name != m.name:
        m = m.model_copy(update={"name": name})
    u = _as_universe(universe)
    ids, problems, warnings = _manifest_problems(m, u, expected_size)
    problems += _whole_groups_problems(m, ids, u.ids, {**u.group_of, **(group_of or {})}, "not in it")
    raise_problems(problems, f"{m.label} does not fit {u.label}")
    return ManifestCheck(name=m.name, ids=ids, warnings=tuple(warnings))


# --------------------------------------------------------------------------------------------
# Frame splits
# --------------------------------------------------------------------------------------------


def _is_count(value: object) -> bool:
    return bool(not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= 1)


def make_frame_splits(
    case_ids: CaseList | Sequence[str],
    *,
    pack_name: str,
    frame: Manifest | Sequence[str] | Path | str | None = None,
    frame_size: int | None = None,
    n_train: int | None = None,
    n_validation: int | None = None,
    validation_fraction: float | None = None,
    train: Manifest | Sequence[str] | Path | str | None = None,
    validation: Manifest | Sequence[str] | Path | str | None = None,
    group_of: Mapping[str, str] | None = None,
    preset: FramePreset | str | None = None,
    seed: int = 42,
) -> Splits:
    """Split a case universe into a calibration frame, its exact complement, and train/validation (consilium paper, calibration).

    **Frame.** Either a supplied manifest (``frame``: a :class:`Manifest`, a file path, or a
    list of ids -- verified like :func:`check_manifest`) or ``frame_size`` cases drawn with
    :func:`draw_frame`. The holdout is the exact complement of the frame in the universe, in
    source order.

    **Train / validation.** Either supplied (``train`` and/or ``validation`` manifests; one
    alone means the other is the rest of the frame) and verified -- no overlap, both inside
    the frame, together exactly the frame, no DOI group on both sides -- or drawn from the
    seed's second stream (``SeedSequence(seed).spawn(2)[1]``): a permutation of the frame's
    DOI groups, taking whole groups while they fit. The validation size is exact
    (``n_validation``, or ``len(frame) - n_train``; with both, ``n_train + n_validation`` must
    equal the frame size) or ``round_half_up(validation_fraction * frame)`` clamped to
    ``1 .. frame - 1`` (default fraction 0.3; with DOI groups the draw may stop short of it).
    Supplied manifests are checked against ``n_train`` / ``n_validation`` when those are given.

    **Preset.** ``preset="paper"`` fixes universe 300, frame 110, train 80, validation 30:
    missing sizes are filled in (a missing frame is drawn with 110 cases) and every size is
    verified; a conflicting size or a ``validation_fraction`` is an error.

    Every list is in the universe's source order. All problems with the options, the
    manifests and the sizes are reported together in one error. A manifest that is out of
    source order is accepted and reported with a :class:`SplitWarning`.

    Args:
        case_ids: The source-ordered universe: a :class:`CaseList` (e.g. from
            :func:`read_case_ids` or ``CaseList.from_pack``) or a list of ids.
        pack_name: Name of the rating pack the split is for (``split.json: pack``).
        frame: The calibration manifest; exclusive with ``frame_size``.
        frame_size: Draw a frame of this many cases instead (``2 .. len(case_ids)``).
        n_train: Exact training size (>= 1).
        n_validation: Exact validation size (>= 1).
        validation_fraction: Share of the frame for validation, in (0, 1); exclusive with
            exact sizes and with supplied train/validation manifests.
        train: A supplied training manifest (ids in the frame).
        validation: A supplied validation manifest (ids in the frame).
        group_of: Case id -> group (DOI), merged over the case list's own mapping; all cases
            of a group stay on one side of every split. Without it, case-disjoint is
            DOI-disjoint (case ids are the DOIs).
        preset: A :class:`FramePreset` or its name (``"paper"``).
        seed: Non-negative seed of every draw.

    Returns:
        The :class:`Splits`, with ``frame_origin`` recording how the frame and the partition
        were obtained (manifest paths and sha256, or the seed).

    Raises:
        SplitError: Inconsistent options; manifest problems (unknown ids, repeats, sizes,
            overlap, not a partition of the frame, DOI groups split across sides), each with
            its file and line; or sizes that DOI groups make unreachable.
    """
    seed = _check_seed(seed)
    universe = _as_universe(case_ids)
    groups = {**universe.group_of, **(group_of or {})}
    opts = FrameOptions(frame=frame, frame_size=frame_size, n_train=n_train, n_validation=n_validation,
                        validation_fraction=validation_fraction, train=train, validation=validation,
                        preset=_as_preset(preset))
    problems: list[str] = []
    warnings: list[str] = []
    if opts.preset is not None and len(universe.ids) != opts.preset.n_cases:
        p = opts.preset
        problems.append(
            f"{universe.label} has {len(universe.ids)} cases but preset {p.name!r} expects {p.n_cases} "
            f"({p.frame_size} in the frame, {p.n_cases - p.frame_size} held out). Use the full case "
            "file (--cases), or give the sizes yourself instead of the preset."
        )
    frame_manifest, frame_ids = _frame_ids(opts, universe, groups, seed, problems, warnings)
    supplied = {name: _as_manifest(value, name)  # type: ignore[arg-type]
                for name, value in (("train", opts.train), ("validation", opts.validation)) if value is not None}
    train_ids, validation_ids = _supplied_partition(opts, supplied, universe, frame_ids, groups, problems, warnings)
    raise_problems(problems, f"cannot make a frame split of {universe.label}")
    if not supplied:
        train_ids, validation_ids = _drawn_partition(opts, frame_ids, groups, seed)
    for message in warnings:
        _warnings.warn(message, SplitWarning, stacklevel=2)
    in_frame = set(frame_ids)
    holdout_ids = tuple(cid for cid in universe.ids if cid not in in_frame)
    if supplied or opts.validation_fraction is None:
        shown_fraction = len(validation_ids) / len(frame_ids)
    else:
        shown_fraction = opts.validation_fraction
    return Splits(
        pack=pack_name,
        seed=seed,
        holdout_fraction=len(holdout_ids) / len(universe.ids),
        validation_fraction=shown_fraction,
        frame=frame_ids,
        holdout=holdout_ids,
        train=train_ids,
        validation=validation_ids,
        frame_origin=_origin(opts, universe, frame_manifest, supplied, groups, seed),
    )


class FrameOptions(BaseModel):
    """The options of :func:`make_frame_splits`, checked together: every conflict is reported in
    one :class:`SplitError`. A preset's sizes fill in the ones not given (after the conflicts
    with it are checked).

    Attributes: as the arguments of :func:`make_frame_splits` (``preset`` resolved).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    # passed through as given (manifests, paths, id lists; sizes checked below with their own messages)
    frame: object = None
    frame_size: object = None
    n_train: object = None
    n_validation: object = None
    validation_fraction: float | None = None
    train: object = None
    validation: object = None
    preset: FramePreset | None = None

    @model_validator(mode="after")
    def _consistent(self) -> FrameOptions:
        bad: list[str] = []
        for label, value in (("n_train", self.n_train), ("n_validation", self.n_validation)):
            if value is not None and not _is_count(value):
                bad.append(f"{label}={value!r} must be a positive integer.")
        if self.preset is not None:
            bad += self._fill_from_preset(self.preset)
        if self.frame is not None and self.frame_size is not None:
            bad.append("give either a frame manifest or a frame size to draw, not both.")
        if self.frame is None and self.frame_size is None:
            bad.append("no frame: pass a frame manifest (frame=...) or a frame size to draw (frame_size=...).")
        if self.validation_fraction is not None:
            if not 0.0 < self.validation_fraction < 1.0:
                bad.append(f"validation_fraction={self.validation_fraction} must be in (0, 1).")
            if self.n_train is not None or self.n_validation is not None:
                bad.append("give either exact sizes (n_train / n_validation) or validation_fraction, not both.")
            if self.train is not None or self.validation is not None:
                bad.append("validation_fraction does not apply to supplied train/validation manifests; drop it.")
        nt, nv = self.n_train, self.n_validation
        if self.frame_size is not None and isinstance(nt, int) and isinstance(nv, int) and _is_count(nt) \
                and _is_count(nv) and nt + nv != self.frame_size:
            bad.append(f"n_train + n_validation = {nt} + {nv} = {nt + nv} must equal frame_size {self.frame_size}.")
        raise_problems(bad, "make_frame_splits: inconsistent options")
        return self

    def _fill_from_preset(self, preset: FramePreset) -> list[str]:
        """Conflicts with ``preset``; then its sizes fill in the ones not given."""
        bad = []
        for label, value, wanted in (("frame_size", self.frame_size, preset.frame_size),
                                     ("n_train", self.n_train, preset.n_train),
                                     ("n_validation", self.n_validation, preset.n_validation)):
            if value is not None and value != wanted:
                bad.append(f"{label}={value} conflicts with preset {preset.name!r} ({label} {wanted}); drop one of them.")
        if self.validation_fraction is not None:
            bad.append(f"validation_fraction conflicts with preset {preset.name!r}, which fixes "
                       f"{preset.n_train} train / {preset.n_validation} validation cases; drop it.")
        self.n_train = preset.n_train if self.n_train is None else self.n_train
        self.n_validation = preset.n_validation if self.n_validation is None else self.n_validation
        if self.frame is None and self.frame_size is None:
            self.frame_size = preset.frame_size
        return bad

    def size(self, side: str) -> int | None:
        """The exact size asked for ``"train"`` or ``"validation"``, or ``None``."""
        value = self.n_train if side == "train" else self.n_validation
        return value if isinstance(value, int) else None


def _frame_ids(opts: FrameOptions, universe: CaseList, groups: Mapping[str, str], seed: int,
               problems: list[str], warnings: list[str]) -> tuple[Manifest | None, tuple[str, ...]]:
    """The frame: drawn (``frame_size``) or a supplied manifest, verified (problems appended)."""
    if opts.frame_size is not None:
        # With a universe of the wrong size for the preset, report that instead of drawing.
        return None, () if problems else draw_frame(universe, opts.frame_size, seed=seed, group_of=groups)  # type: ignore[arg-type]
    frame_manifest = _as_manifest(opts.frame, "frame")  # type: ignore[arg-type]
    n_train, n_validation = opts.size("train"), opts.size("validation")
    if opts.preset is not None:
        expected, why = opts.preset.frame_size, f" (preset {opts.preset.name!r})"
    elif n_train is not None and n_validation is not None:
        expected, why = n_train + n_validation, f" (n_train + n_validation = {n_train} + {n_validation})"
    else:
        expected, why = None, ""
    frame_ids, found, warned = _manifest_problems(frame_manifest, universe, expected, why)
    problems += found
    warnings += warned
    problems += _whole_groups_problems(frame_manifest, frame_ids, universe.ids, groups, "held out (not in the frame)")
    if frame_manifest.ids and len(frame_ids) < 2 and not found:
        problems.append(f"{frame_manifest.label}: the frame needs at least 2 cases (one train, one validation).")
    return frame_manifest, frame_ids


def _supplied_partition(opts: FrameOptions, supplied: dict[str, Manifest], universe: CaseList,
                        frame_ids: tuple[str, ...], groups: Mapping[str, str], problems: list[str],
                        warnings: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Train and validation from supplied manifests, verified (problems appended); ``((), ())``
    when none is supplied."""
    if not supplied:
        n_frame = len(frame_ids)
        n_train, n_validation = opts.size("train"), opts.size("validation")
        if n_train is not None and n_validation is None and n_train >= n_frame >= 2:
            problems.append(f"n_train={n_train} leaves no validation case in a frame of {n_frame}; lower it.")
        if n_validation is not None and n_train is None and n_validation >= n_frame >= 2:
            problems.append(f"n_validation={n_validation} leaves no training case in a frame of {n_frame}; lower it.")
        return (), ()
    chosen = _chosen_sides(opts, supplied, universe, set(frame_ids), problems, warnings)
    if len(supplied) == 2:
        train_ids, validation_ids = _both_sides(supplied, chosen, frame_ids, problems)
    else:
        train_ids, validation_ids = _one_side(opts, supplied, chosen, frame_ids, problems)
    train_set, validation_set = set(train_ids), set(validation_ids)
    for group in _groups(frame_ids, groups) if groups else []:
        t = [cid for cid in group if cid in train_set]
        v = [cid for cid in group if cid in validation_set]
        if t and v:
            problems.append(f"DOI group {groups.get(group[0], group[0])!r} is split across sides: train "
                            f"{_short(t, 5)}, validation {_short(v, 5)}. Move all its cases to one side.")
    if not train_ids and "train" in supplied and not problems:
        problems.append(f"{supplied['train'].label}: no training case left in the frame.")
    if not validation_ids and "validation" in supplied and not problems:
        problems.append(f"{supplied['validation'].label}: no validation case left in the frame.")
    return train_ids, validation_ids


def _chosen_sides(opts: FrameOptions, supplied: dict[str, Manifest], universe: CaseList, in_frame: set[str],
                  problems: list[str], warnings: list[str]) -> dict[str, tuple[str, ...]]:
    """Each supplied manifest's ids that are in the frame (its other problems appended)."""
    chosen: dict[str, tuple[str, ...]] = {}
    known = set(universe.ids)
    for name, m in supplied.items():
        want = opts.size(name)
        why = f" (preset {opts.preset.name!r})" if opts.preset is not None else f" (n_{name} = {want})"
        ids, found, warned = _manifest_problems(m, universe, want, why)
        problems += found
        warnings += warned
        reported: set[str] = set()
        for i, cid in enumerate(m.ids):
            if cid in known and cid not in in_frame and cid not in reported:
                reported.add(cid)
                problems.append(f"{m.where(i)}: case id {cid!r} is not in the frame (it is held out). "
                                f"{name.capitalize()} cases must come from the frame; delete it or add it to the frame.")
        chosen[name] = tuple(cid for cid in ids if cid in in_frame)
    return chosen


def _both_sides(supplied: dict[str, Manifest], chosen: dict[str, tuple[str, ...]], frame_ids: tuple[str, ...],
                problems: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Train and validation both supplied: they must partition the frame."""
    tm, vm = supplied["train"], supplied["validation"]
    vline = {cid: i for i, cid in reversed(list(enumerate(vm.ids)))}
    seen: set[str] = set()
    for i, cid in enumerate(tm.ids):
        if cid in vline and cid not in seen:
            seen.add(cid)
            problems.append(f"case id {cid!r} is on both sides: {tm.where(i)} and {vm.where(vline[cid])}. "
                            "Keep it in one manifest only.")
    listed = set(tm.ids) | set(vm.ids)
    neither = [cid for cid in frame_ids if cid not in listed]
    if neither:
        problems.append(
            f"{len(neither)} frame case(s) are in neither {tm.label} nor {vm.label}: {_short(neither)}. "
            "Train and validation must partition the frame: add each to one of them."
        )
    both = set(chosen["validation"])
    return tuple(cid for cid in chosen["train"] if cid not in both), chosen["validation"]


def _one_side(opts: FrameOptions, supplied: dict[str, Manifest], chosen: dict[str, tuple[str, ...]],
              frame_ids: tuple[str, ...], problems: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """One side supplied: the other is the rest of the frame."""
    (name, ids), = chosen.items()
    taken = set(ids)
    rest = tuple(cid for cid in frame_ids if cid not in taken)
    other = "validation" if name == "train" else "train"
    want = opts.size(other)
    if want is not None and len(rest) != want:
        problems.append(f"the rest of the frame (the {other} side) has {len(rest)} case(s) but {want} are expected; "
                        f"fix {supplied[name].label} or the expected size.")
    if not rest:
        problems.append(f"{supplied[name].label} takes the whole frame; leave at least one case for {other}.")
    return (ids, rest) if name == "train" else (rest, ids)


def _drawn_partition(opts: FrameOptions, frame_ids: tuple[str, ...], groups: Mapping[str, str],
                     seed: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Train and validation drawn from the seed's second stream (whole DOI groups)."""
    n_frame = len(frame_ids)
    _, partition_rng = _streams(seed)
    n_train, n_validation = opts.size("train"), opts.size("validation")
    if n_train is None and n_validation is None:
        fraction = DEFAULT_VALIDATION_FRACTION if opts.validation_fraction is None else opts.validation_fraction
        size = min(max(_round_half_up(Decimal(repr(fraction)) * n_frame), 1), n_frame - 1)
        picked = _draw(frame_ids, size, partition_rng, groups, what="validation", exact=False)
    else:
        size = n_validation if n_validation is not None else n_frame - (n_train or 0)
        picked = _draw(frame_ids, size, partition_rng, groups, what="validation", exact=True)
    return tuple(cid for cid in frame_ids if cid not in picked), tuple(cid for cid in frame_ids if cid in picked)


def _origin(opts: FrameOptions, universe: CaseList, frame_manifest: Manifest | None, supplied: dict[str, Manifest],
            groups: Mapping[str, str], seed: int) -> FrameOrigin:
    """How the frame and its partition were obtained (``split.json: frame_origin``)."""
    return FrameOrigin(
        frame="drawn" if frame_manifest is None else ("manifest" if frame_manifest.source else "list"),
        frame_manifest=frame_manifest.source if frame_manifest is not None else None,
        frame_label=frame_manifest.label if frame_manifest is not None and not frame_manifest.source else None,
        frame_seed=seed if frame_manifest is None else None,
        universe=universe.kind,
        cases=universe.source if universe.kind == "file" else None,
        n_cases=len(universe.ids),
        partition="manifest" if supplied else "drawn",
        train_manifest=supplied["train"].source if "train" in supplied else None,
        validation_manifest=supplied["validation"].source if "validation" in supplied else None,
        grouped=bool(groups),
        preset=opts.preset.name if opts.preset is not None else None,
    )


# --------------------------------------------------------------------------------------------
# One call per CLI command
# --------------------------------------------------------------------------------------------


class SplitResult(Record):
    """Splits made by :func:`build_splits`, checked against their pack, with the warnings found.

    Attributes:
        splits: The splits (not yet written; use :func:`~evolve.splits.write_splits`).
        warnings: Accepted oddities from making and checking them.
    """

    splits: Splits
    warnings: tuple[str, ...] = ()


def build_splits(
    pack: RatingPack,
    *,
    cases: Path | str | CaseList | None = None,
    frame_manifest: Path | str | None = None,
    frame_size: int | None = None,
    n_train: int | None = None,
    n_validation: int | None = None,
    train_manifest: Path | str | None = None,
    validation_manifest: Path | str | None = None,
    preset: str | None = None,
    holdout_fraction: float | None = None,
    validation_fraction: float | None = None,
    seed: int = 42,
) -> SplitResult:
    """Make the splits ``evolve splits make`` asks for and check them against ``pack``.

    With none of the frame options this is :func:`~evolve.splits.make_splits` (holdout drawn
    by ``holdout_fraction``, default 0.2; validation fraction default 0.3). Otherwise it is
    :func:`make_frame_splits` over the universe ``cases`` (a case file, read with
    :func:`read_case_ids`) or, without it, the pack's own cases; the frame is, in this order
    of precedence: ``frame_manifest``; ``frame_size`` drawn; the pack's (rated) cases when
    ``cases`` is given; the preset's frame size drawn; ``n_train + n_validation`` drawn.

    Args:
        pack: The rating pack (its name goes into ``split.json``; the result is checked against it).
        cases: Case file (or :class:`CaseList`) holding the full source-ordered universe.
        frame_manifest: Calibration manifest file to verify and use.
        frame_size: Draw a frame of this many cases.
        n_train: Exact training size.
        n_validation: Exact validation size.
        train_manifest: Supplied training manifest file.
        validation_manifest: Supplied validation manifest file.
        preset: ``"paper"``: universe 300, frame 110, 80 train / 30 validation, all verified.
        holdout_fraction: Fraction splits only; an error together with frame options.
        validation_fraction: Share of the frame for validation (both modes).
        seed: Seed of every draw.

    Returns:
        A :class:`SplitResult` (splits + warnings).

    Raises:
        SplitError: Any problem with the options, the files or the resulting split.
    """
    frame_mode = any(v is not None for v in (cases, frame_manifest, frame_size, n_train, n_validation,
                                             train_manifest, validation_manifest, preset))
    if not frame_mode:
        splits = make_splits(
            pack,
            holdout_fraction=0.2 if holdout_fraction is None else holdout_fraction,
            validation_fraction=DEFAULT_VALIDATION_FRACTION if validation_fraction is None else validation_fraction,
            seed=seed,
        )
        return SplitResult(splits=splits, warnings=check_splits(splits, pack).warnings)
    if holdout_fraction is not None:
        raise SplitError(
            "holdout_fraction (--holdout-fraction) only applies to fraction splits; with a frame the holdout is the "
            "exact complement of the frame. Drop it and choose the frame (--frame-manifest, --frame-size, --cases "
            "or --preset)."
        )
    universe = (cases if isinstance(cases, CaseList) else read_case_ids(cases)) if cases is not None \
        else CaseList.from_pack(pack)
    frame: Manifest | None = None
    if frame_manifest is not None:
        frame = read_manifest(frame_manifest, name="frame")
    elif frame_size is None and cases is not None:
        frame = Manifest.from_ids(pack.case_ids, name="frame", label=f"rated cases of pack {pack.manifest.name!r}")
    elif frame_size is None and preset is None:
        if n_train is None or n_validation is None:
            raise SplitError(
                "no frame: give --frame-manifest FILE, --frame-size N, --cases CASEFILE (the frame is then the pack's "
                "cases), --preset paper, or both --train-size and --validation-size (a frame of their sum is drawn)."
            )
        frame_size = n_train + n_validation
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always", SplitWarning)
        splits = make_frame_splits(
            universe,
            pack_name=pack.manifest.name,
            frame=frame,
            frame_size=frame_size,
            n_train=n_train,
            n_validation=n_validation,
            validation_fraction=validation_fraction,
            train=read_manifest(train_manifest, name="train") if train_manifest is not None else None,
            validation=read_manifest(validation_manifest, name="validation") if validation_manifest is not None else None,
            preset=preset,
            seed=seed,
        )
    notes = [str(w.message) for w in caught if issubclass(w.category, SplitWarning)]
    for w in caught:  # pass on anything that is not ours
        if not issubclass(w.category, SplitWarning):
            _warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    notes += check_splits(splits, pack, cases=universe).warnings
    return SplitResult(splits=splits, warnings=tuple(notes))


def check_split_dir(directory: Path | str, pack: RatingPack, *, cases: Path | str | CaseList | None = None) -> SplitCheck:
    """Load a split directory and check it against ``pack`` (and the case file, if given).

    Args:
        directory: A folder written by :func:`~evolve.splits.write_splits`.
        pack: The rating pack the split is used with.
        cases: The case file the frame was chosen from; verifies ids, exact complement and order.

    Returns:
        The :class:`SplitCheck` (warnings).

    Raises:
        SplitError: The folder is invalid or does not fit the pack / case file.
    """
    splits = load_splits(directory)
    universe = None if cases is None else (cases if isinstance(cases, CaseList) else read_case_ids(cases))
    return check_splits(splits, pack, cases=universe)
