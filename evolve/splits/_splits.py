"""Case-disjoint split manifests: holdout vs frame, and train vs validation inside the frame.

The Splits model, the fraction draw (:func:`make_splits`), the checks against a pack and the
on-disk format. Frame splits (consilium paper, calibration) are made in ``_frame.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import numpy as np
from pydantic import Field, ValidationError

from evolve.errors import SplitError, path_problem
from evolve.records import Record
from evolve.runs import atomic_write
from evolve.splits._manifest import CaseList, FrameOrigin, raise_problems

if TYPE_CHECKING:  # pragma: no cover
    from evolve.data import RatingPack


SPLIT_FORMAT_VERSION: Final = 1
SPLIT_META_FILE = "split.json"
MANIFEST_FILES: dict[str, str] = {
    "frame": "frame.txt",
    "holdout": "holdout.txt",
    "train": "train.txt",
    "validation": "validation.txt",
}
"""Id-list file of each manifest inside a split directory."""

Side = Literal["train", "validation", "holdout"]


class Splits(Record):
    """A case-level split of one rating pack.

    ``holdout`` is set aside for the final evaluation; the rest of the pack is the
    ``frame``, which is divided into ``train`` (fitness during evolution) and ``validation``
    (re-scoring of winners). Every tuple lists case ids in the pack's source order.

    Only field types and fraction ranges are checked on construction; the set relations
    (disjointness, complements, order) are checked by :func:`check_splits` and
    :func:`load_splits`.

    Splits made from a calibration frame (:func:`~evolve.splits.make_frame_splits`, consilium paper, calibration)
    carry ``frame_origin``; their frame and holdout partition a case *universe* (e.g. a
    300-case case file) that may be larger than the pack, and their two fractions are the
    realised shares (``holdout / universe`` and ``validation / frame``), recorded for
    information only. Splits drawn by fractions have ``frame_origin = None``.
    """

    version: Literal[1] = SPLIT_FORMAT_VERSION
    pack: str
    seed: int
    holdout_fraction: float = Field(ge=0.0, lt=1.0)
    validation_fraction: float = Field(gt=0.0, lt=1.0)
    frame: tuple[str, ...]
    holdout: tuple[str, ...]
    train: tuple[str, ...]
    validation: tuple[str, ...]
    frame_origin: FrameOrigin | None = None

    def side_of(self, case_id: str) -> Side:
        """Which side a case is on: ``"train"``, ``"validation"`` or ``"holdout"``.

        Raises:
            KeyError: The case is in none of the three lists.
        """
        # Plain scans: caching on the model would leak into pydantic's equality.
        for side in ("holdout", "validation", "train"):
            if case_id in getattr(self, side):
                return side
        raise KeyError(f"case {case_id!r} is not in the splits of pack {self.pack!r}")

    def ids(self, name: Literal["frame", "holdout", "train", "validation"]) -> tuple[str, ...]:
        """The case ids of one manifest by name."""
        if name not in MANIFEST_FILES:
            raise KeyError(f"unknown manifest {name!r}; use one of {list(MANIFEST_FILES)}")
        return getattr(self, name)

    def counts(self) -> dict[str, int]:
        """Number of cases per manifest."""
        return {name: len(getattr(self, name)) for name in MANIFEST_FILES}


# --------------------------------------------------------------------------------------------
# Making splits
# --------------------------------------------------------------------------------------------


def _round_half_up(x: Decimal) -> int:
    return int(x.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def split_sizes(n_cases: int, holdout_fraction: float, validation_fraction: float) -> tuple[int, int, int]:
    """``(n_holdout, n_train, n_validation)`` for a pack of ``n_cases`` cases.

    Rounding rule (fractions are read as the decimals they print as, so ``0.15 * 10`` is 1.5):

    * ``n_holdout = round_half_up(holdout_fraction * n_cases)``, at least 1 when the fraction
      is positive; ``holdout_fraction = 0`` means no holdout.
    * The frame (the rest) must keep at least 2 cases.
    * ``n_validation = round_half_up(validation_fraction * n_frame)``, clamped to
      ``1 .. n_frame - 1`` so that train and validation are both non-empty;
      ``n_train = n_frame - n_validation``.

    Raises:
        SplitError: A fraction is out of range, or the frame would have fewer than 2 cases.
    """
    if not 0.0 <= holdout_fraction < 1.0:
        raise SplitError(f"the holdout fraction (--holdout-fraction; Python: holdout_fraction=) is {holdout_fraction}, but "
                         "it must be at least 0 and below 1; e.g. 0.2 holds out a fifth.")
    if not 0.0 < validation_fraction < 1.0:
        raise SplitError(
            f"the validation fraction (--validation-fraction; Python: validation_fraction=) is {validation_fraction}, "
            "but it must be above 0 and below 1: train and validation both need cases; e.g. 0.4."
        )
    n_holdout = _round_half_up(Decimal(repr(holdout_fraction)) * n_cases)
    if holdout_fraction > 0 and n_holdout == 0:
        n_holdout = 1
    n_frame = n_cases - n_holdout
    if n_frame < 2:
        raise SplitError(
            f"the pack has {n_cases} case(s); holding out {n_holdout} leaves {n_frame} for the frame, but train "
            "and validation each need at least one case. Lower holdout_fraction or use a pack with more cases."
        )
    n_validation = _round_half_up(Decimal(repr(validation_fraction)) * n_frame)
    n_validation = min(max(n_validation, 1), n_frame - 1)
    return n_holdout, n_frame - n_validation, n_validation


def make_splits(
    pack: RatingPack,
    *,
    holdout_fraction: float = 0.2,
    validation_fraction: float = 0.3,
    seed: int = 42,
) -> Splits:
    """Split a pack's cases into holdout / train / validation, deterministically.

    One ``numpy.random.default_rng(seed)`` generator makes two draws: a permutation of all
    cases whose first ``n_holdout`` positions form the holdout (the frame is the exact
    complement), then a permutation of the frame whose first ``n_validation`` positions form
    validation (train is the rest). Every list keeps the pack's source order. Because the
    holdout is a prefix of a permutation that does not depend on the fractions, raising
    ``holdout_fraction`` with the same seed only adds cases to the holdout.
    Sizes follow :func:`split_sizes`.

    Raises:
        SplitError: Negative seed, fractions out of range, too few cases, or duplicate case
            ids in the pack.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SplitError(f"seed={seed!r} must be a non-negative integer.")
    case_ids = [c.case_id for c in pack.cases]
    dupes = sorted(cid for cid, n in Counter(case_ids).items() if n > 1)
    if dupes:
        raise SplitError(f"pack {pack.manifest.name!r} repeats case ids {dupes[:10]}; validate the pack (load_pack).")
    n_holdout, _, n_validation = split_sizes(len(case_ids), holdout_fraction, validation_fraction)

    rng = np.random.default_rng(int(seed))
    held = {case_ids[i] for i in rng.permutation(len(case_ids))[:n_holdout]}
    frame = [cid for cid in case_ids if cid not in held]
    chosen = {frame[i] for i in rng.permutation(len(frame))[:n_validation]}
    return Splits(
        pack=pack.manifest.name,
        seed=int(seed),
        holdout_fraction=holdout_fraction,
        validation_fraction=validation_fraction,
        frame=tuple(frame),
        holdout=tuple(cid for cid in case_ids if cid in held),
        train=tuple(cid for cid in frame if cid not in chosen),
        validation=tuple(cid for cid in frame if cid in chosen),
    )


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------


_raise = raise_problems


def _short(ids: Iterable[str], limit: int = 10) -> str:
    ids = list(ids)
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"{ids[:limit]}{more}"


def _internal_problems(splits: Splits) -> list[str]:
    """Set relations that need no pack: duplicates, frame vs holdout, train/validation vs frame."""
    problems = []
    for name in MANIFEST_FILES:
        ids = getattr(splits, name)
        dupes = sorted(cid for cid, n in Counter(ids).items() if n > 1)
        if dupes:
            problems.append(f"{name}: case ids listed more than once: {_short(dupes)}. Keep each id once.")
    frame, holdout = set(splits.frame), set(splits.holdout)
    train, validation = set(splits.train), set(splits.validation)
    both = [cid for cid in splits.frame if cid in holdout]
    if both:
        problems.append(
            f"frame and holdout overlap in {len(both)} case(s): {_short(both)}. A case is either held out or in "
            "the frame; regenerate the splits with make_splits."
        )
    both = [cid for cid in splits.train if cid in validation]
    if both:
        problems.append(
            f"train and validation overlap in {len(both)} case(s): {_short(both)}. Regenerate the splits."
        )
    outside = [cid for cid in (*splits.train, *splits.validation) if cid not in frame]
    if outside:
        problems.append(
            f"train/validation contain {len(outside)} case(s) that are not in the frame: {_short(outside)}. "
            "Train and validation must partition the frame."
        )
    uncovered = [cid for cid in splits.frame if cid not in train and cid not in validation]
    if uncovered:
        problems.append(
            f"{len(uncovered)} frame case(s) are in neither train nor validation: {_short(uncovered)}. "
            "Train and validation must partition the frame."
        )
    origin = splits.frame_origin
    if origin is not None and origin.n_cases != len(splits.frame) + len(splits.holdout):
        problems.append(
            f"frame_origin.n_cases says the universe has {origin.n_cases} cases but frame + holdout list "
            f"{len(splits.frame) + len(splits.holdout)}. The holdout must be the exact complement of the frame; "
            "regenerate the splits."
        )
    return problems


class SplitCheck(Record):
    """What :func:`check_splits` found acceptable but worth knowing.

    Attributes:
        warnings: One sentence each, e.g. rated pack cases that sit in the holdout.
    """

    warnings: tuple[str, ...] = ()


def _group_problems(splits: Splits, group_of: dict[str, str]) -> list[str]:
    """Groups (DOIs) whose cases sit on more than one of holdout / train / validation."""
    if not group_of:
        return []
    sides: dict[str, dict[str, list[str]]] = {}
    for name in ("holdout", "train", "validation"):
        for cid in getattr(splits, name):
            sides.setdefault(group_of.get(cid, cid), {}).setdefault(name, []).append(cid)
    problems = []
    for group, by_side in sides.items():
        if len(by_side) > 1:
            where = "; ".join(f"{side}: {_short(ids, 5)}" for side, ids in by_side.items())
            problems.append(
                f"group (DOI) {group!r} is split across sides ({where}). All cases of one DOI must stay on one "
                "side; regenerate the splits with the group mapping (make_frame_splits group_of=..., or a case "
                "file with a 'doi' field)."
            )
    return problems


def check_splits(
    splits: Splits,
    pack: RatingPack,
    *,
    cases: CaseList | Sequence[str] | None = None,
    group_of: Mapping[str, str] | None = None,
) -> SplitCheck:
    """Check that ``splits`` is a valid, case-disjoint split of ``pack`` (consilium paper, calibration).

    Checks (all problems are collected): frame and holdout are disjoint; train and
    validation are disjoint and together are exactly the frame; no id is repeated; every
    pack case is in the frame or the holdout; the pack name matches; every target's case is
    on some side and every rating's case is on the same side as its target's case; no group
    (DOI) straddles holdout / train / validation when a ``group_of`` mapping is known.

    Which ids may be listed depends on the universe the split was drawn from:

    * splits drawn from the pack itself (``make_splits``, or ``frame_origin.universe ==
      "pack"``): frame and holdout are exactly the pack's cases, in the pack's source order;
    * frame splits over a larger case universe (a case file): listed ids outside the pack
      are allowed. Pass ``cases`` (the universe) to verify them: every listed id and every
      pack case must be in it, frame and holdout must be exactly it, and every list must
      follow its source order. Without ``cases`` those ids cannot be verified.

    A pack case in the holdout is allowed -- held-out cases may carry ratings for a final
    evaluation, and calibration only ever reads train and validation. For frame splits over a
    case file it is reported as a warning (rated cases normally form the frame), and so are
    frame cases without ratings in the pack, and a case file whose sha256 differs from the
    one recorded when the split was made.

    Args:
        splits: The splits to check.
        pack: The rating pack they are used with.
        cases: The case universe (e.g. :func:`~evolve.splits.read_case_ids`), optional.
        group_of: Case id -> group (DOI); merged over the case list's own mapping.

    Returns:
        A :class:`SplitCheck` with warnings (possibly none).

    Raises:
        SplitError: The splits do not fit the pack (or the case universe); every problem is
            listed with the manifest it is in and the fix.
    """
    problems = _internal_problems(splits)
    warnings: list[str] = []
    if splits.pack != pack.manifest.name:
        problems.append(
            f"splits were made for pack {splits.pack!r} but the pack is {pack.manifest.name!r}; "
            "use the matching split directory or regenerate it."
        )
    universe = None
    if cases is not None:
        universe = cases if isinstance(cases, CaseList) else CaseList.from_ids(cases)
    groups = {**(universe.group_of if universe else {}), **(group_of or {})}
    order = {cid: i for i, cid in enumerate(pack.case_ids)}
    covered = set(splits.frame) | set(splits.holdout)
    missing = [cid for cid in order if cid not in covered]
    if missing:
        problems.append(
            f"{len(missing)} pack case(s) are in neither frame nor holdout: {_short(missing)}. The holdout must be "
            "the exact complement of the frame; regenerate the splits."
        )
    if universe is not None:
        _universe_problems(splits, universe, order, covered, problems, warnings)
    _list_problems(splits, pack, universe, order, problems)
    _unrated_warnings(splits, pack, universe, order, covered, warnings)
    problems += _side_problems(pack, splits)
    problems.extend(_group_problems(splits, groups))
    _raise(problems, f"splits of pack {splits.pack!r} (seed {splits.seed}) do not fit pack {pack.manifest.name!r}")
    return SplitCheck(warnings=tuple(warnings))


def _external(splits: Splits) -> bool:
    """Whether the split was drawn from a case universe larger than its pack."""
    return splits.frame_origin is not None and splits.frame_origin.universe != "pack"


def _universe_problems(splits: Splits, universe: CaseList, order: dict[str, int], covered: set[str],
                       problems: list[str], warnings: list[str]) -> None:
    """The pack and the split against the case universe they were drawn from."""
    known = set(universe.ids)
    outside = [cid for cid in order if cid not in known]
    if outside:
        problems.append(
            f"{len(outside)} pack case(s) are not in {universe.label}: {_short(outside)}. Use the case file the "
            "pack's cases come from."
        )
    uncovered = [cid for cid in universe.ids if cid not in covered]
    if uncovered:
        problems.append(
            f"{len(uncovered)} case(s) of {universe.label} are in neither frame nor holdout: {_short(uncovered)}. "
            "The holdout must be the exact complement of the frame; regenerate the splits from this case file."
        )
    origin = splits.frame_origin
    if origin is not None and origin.cases is not None and universe.source is not None \
            and universe.source.sha256 != origin.cases.sha256:
        warnings.append(
            f"{universe.label} has changed since the split was made (sha256 {universe.source.sha256[:12]}... vs "
            f"{origin.cases.sha256[:12]}... recorded for {origin.cases.path}); the ids still fit."
        )


def _list_problems(splits: Splits, pack: RatingPack, universe: CaseList | None, order: dict[str, int],
                   problems: list[str]) -> None:
    """Every id list: known ids (of the universe, or of the pack) in source order."""
    uorder = {cid: i for i, cid in enumerate(universe.ids)} if universe is not None else {}
    for name in MANIFEST_FILES:
        ids = getattr(splits, name)
        if universe is not None:
            extra = [cid for cid in ids if cid not in uorder]
            if extra:
                problems.append(
                    f"{name}: {len(extra)} case id(s) not in {universe.label}: {_short(extra)}. Remove them or "
                    "regenerate the splits from this case file."
                )
            problems.extend(_order_problem(name, ids, uorder, f"source order of {universe.label}"))
        elif not _external(splits):
            extra = [cid for cid in ids if cid not in order]
            if extra:
                problems.append(
                    f"{name}: {len(extra)} case id(s) not in pack {pack.manifest.name!r}: {_short(extra)}. Remove them "
                    "or regenerate the splits for this pack."
                )
            problems.extend(_order_problem(name, ids, order, "pack source order"))


def _unrated_warnings(splits: Splits, pack: RatingPack, universe: CaseList | None, order: dict[str, int],
                      covered: set[str], warnings: list[str]) -> None:
    """Accepted oddities of a frame split: unrated frame cases, rated held-out cases, unverified ids."""
    if splits.frame_origin is not None:
        unrated = [cid for cid in splits.frame if cid not in order]
        if unrated:
            warnings.append(
                f"{len(unrated)} frame case(s) are not in pack {pack.manifest.name!r} and so carry no ratings: "
                f"{_short(unrated)}. Calibration uses only rated cases."
            )
    if not _external(splits):
        return
    held = [cid for cid in splits.holdout if cid in order]
    if held:
        warnings.append(
            f"{len(held)} rated pack case(s) are in the holdout: {_short(held)}. Allowed: their ratings serve the "
            "final evaluation only and never reach calibration."
        )
    if universe is None:
        foreign = sum(1 for cid in covered if cid not in order)
        if foreign:
            warnings.append(
                f"{foreign} listed case id(s) are not in the pack and were not verified; pass the case file "
                "(cases=..., or --cases) to check them and the source order."
            )


def _side_problems(pack: RatingPack, splits: Splits) -> list[str]:
    """Every target's case on some side; every rating's case on its target's side."""
    problems = []
    side: dict[str, str] = {}
    for name in ("holdout", "train", "validation"):
        for cid in getattr(splits, name):
            side.setdefault(cid, name)
    target_case = {t.target_id: t.case_id for t in pack.targets}
    orphan_targets = [t.target_id for t in pack.targets if t.case_id not in side]
    if orphan_targets:
        problems.append(
            f"{len(orphan_targets)} target(s) belong to cases on no side: {_short(orphan_targets)}."
        )
    crossing = []
    for r in pack.ratings:
        tcase = target_case.get(r.target_id)
        if tcase is not None and side.get(r.case_id) != side.get(tcase):
            crossing.append(f"{r.target_id}/{r.rater_id}/{r.criterion}")
    if crossing:
        problems.append(
            f"{len(crossing)} rating(s) have a case_id on a different side than their target's case: "
            f"{_short(crossing)}. Fix the ratings' case_id in the pack (load_pack reports it)."
        )
    return problems


def _order_problem(name: str, ids: Sequence[str], order: dict[str, int], what: str) -> list[str]:
    known = [cid for cid in ids if cid in order]
    for prev, cur in pairwise(known):
        if order[prev] > order[cur]:
            fix = "regenerate or sort by pack order" if what == "pack source order" else "regenerate the splits"
            return [f"{name}: not in {what} ({cur!r} comes before {prev!r} there). List ids in source order ({fix})."]
    return []


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def _meta(splits: Splits) -> dict:
    return {
        "version": splits.version,
        "pack": splits.pack,
        "seed": splits.seed,
        "holdout_fraction": splits.holdout_fraction,
        "validation_fraction": splits.validation_fraction,
        "counts": splits.counts(),
        "files": dict(MANIFEST_FILES),
        **({"frame_origin": splits.frame_origin.model_dump(mode="json")} if splits.frame_origin else {}),
    }


def _render(splits: Splits) -> dict[str, str]:
    files = {SPLIT_META_FILE: json.dumps(_meta(splits), indent=2) + "\n"}
    for name, filename in MANIFEST_FILES.items():
        files[filename] = "".join(f"{cid}\n" for cid in getattr(splits, name))
    return files


def holds_splits(directory: Path | str, splits: Splits) -> bool:
    """Whether ``directory`` already holds exactly the files :func:`write_splits` would write
    for ``splits`` (so writing them again changes nothing)."""
    directory = Path(directory)
    return all((directory / name).is_file() and (directory / name).read_text(encoding="utf-8") == text
               for name, text in _render(splits).items())


def write_splits(splits: Splits, directory: Path | str, *, overwrite: bool = False) -> Path:
    """Write ``split.json`` and the four id lists (one case id per line) into ``directory``.

    Re-writing identical splits is a no-op (:func:`holds_splits`): the files are left as they are. If the directory already holds *different*
    split files, nothing is written unless ``overwrite=True`` (silently replacing a holdout
    would let held-out cases leak into training). Each file is replaced atomically.

    Returns:
        The directory.

    Raises:
        SplitError: Different splits already exist there and ``overwrite`` is false.
    """
    directory = Path(directory)
    if holds_splits(directory, splits):
        return directory
    files = _render(splits)
    existing = [name for name in files if (directory / name).exists()]
    if existing and not overwrite:
        differs = [name for name in existing if (directory / name).read_text(encoding="utf-8") != files[name]]
        if differs:
            raise SplitError(
                f"{directory}: already holds different split files ({', '.join(differs)}); refusing to replace them. "
                "Pass --overwrite (overwrite=True in Python), or write to another directory."
            )
    directory.mkdir(parents=True, exist_ok=True)
    # Id lists first, split.json last: a crash leaves either the old split.json (whose counts
    # then disagree with the lists, which load_splits reports) or a complete new set.
    for name in [*MANIFEST_FILES.values(), SPLIT_META_FILE]:
        atomic_write(directory / name, files[name])
    return directory


def _read_ids(path: Path, problems: list[str]) -> list[str]:
    ids: list[str] = []
    first: dict[str, int] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        cid = line.strip()
        if not cid:
            problems.append(f"{path.name} line {lineno}: blank line. Remove it (one case id per line).")
            continue
        if cid in first:
            problems.append(
                f"{path.name} line {lineno}: case id {cid!r} duplicates line {first[cid]}. Remove the repeat."
            )
            continue
        first[cid] = lineno
        ids.append(cid)
    return ids


def load_splits(directory: Path | str) -> Splits:
    """Read a split directory written by :func:`write_splits`.

    Checks the files themselves and the relations that need no pack (use
    :func:`check_splits` against the pack as well).

    Folders written before ``frame_origin`` existed (and fraction splits, which never carry
    it) load with ``frame_origin = None``.

    Raises:
        SplitError: Missing files, invalid ``split.json`` (including an inconsistent
            ``frame_origin``), blank or duplicate ids (naming the file and line), counts that
            disagree with the lists, or overlapping manifests.
    """
    directory = Path(directory)
    heading = f"split directory {directory} is invalid"
    problems: list[str] = []
    if (problem := path_problem(directory, "folder")) is not None:
        what = "no such split directory" if problem == "does not exist" else f"the split directory {problem}"
        raise SplitError(
            f"{directory}: {what}. Make one with `evolve splits make <pack dir> --out {directory}` "
            "(or pass --splits to point at existing manifests)."
        )
    found = {name: path_problem(directory / name) for name in [SPLIT_META_FILE, *MANIFEST_FILES.values()]}
    if any(found.values()):
        _raise(
            [f"{name}: {'file is missing' if problem == 'does not exist' else problem.split(':')[0]}. Regenerate the "
             "splits with `evolve splits make` (library: make_splits + write_splits)."
             for name, problem in found.items() if problem is not None],
            heading,
        )
    meta_path = directory / SPLIT_META_FILE
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        _raise([f"{SPLIT_META_FILE} line {exc.lineno}: invalid JSON ({exc.msg}). Fix the syntax."], heading)
    if not isinstance(meta, dict):
        _raise([f"{SPLIT_META_FILE} line 1: expected a JSON object. Regenerate the splits."], heading)
    if meta.get("version") != SPLIT_FORMAT_VERSION:
        _raise(
            [
                f"{SPLIT_META_FILE}, field 'version': unsupported split format {meta.get('version')!r}; this "
                f"toolkit reads version {SPLIT_FORMAT_VERSION}. Regenerate the splits."
            ],
            heading,
        )
    lists = {name: _read_ids(directory / filename, problems) for name, filename in MANIFEST_FILES.items()}
    counts = meta.get("counts")
    if isinstance(counts, dict):
        for name, filename in MANIFEST_FILES.items():
            if name in counts and counts[name] != len(lists[name]):
                problems.append(
                    f"{SPLIT_META_FILE}, field 'counts.{name}': says {counts[name]} but {filename} lists "
                    f"{len(lists[name])} id(s). The files are out of sync; regenerate the splits."
                )
    fields = {k: meta.get(k) for k in ("version", "pack", "seed", "holdout_fraction", "validation_fraction")}
    if meta.get("frame_origin") is not None:  # absent in fraction splits and in folders written before it existed
        fields["frame_origin"] = meta["frame_origin"]
    try:
        splits = Splits(**fields, **{name: tuple(ids) for name, ids in lists.items()})  # type: ignore[arg-type]
    except ValidationError as exc:
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            problems.append(f"{SPLIT_META_FILE}, field '{loc}': {err['msg']}. Fix the value or regenerate the splits.")
        _raise(problems, heading)
    problems.extend(_internal_problems(splits))
    _raise(problems, heading)
    return splits
