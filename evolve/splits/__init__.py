"""Case-disjoint splits of a rating pack, stored as plain-text manifests.

Calibration must never score a judge on cases whose ratings shaped its guidance. A
:class:`Splits` object therefore divides the *cases* of a pack (all targets and ratings of a
case travel with it) into:

* ``holdout`` - set aside for the final, untouched evaluation;
* ``frame`` - every other case (the exact complement of the holdout), itself divided into
  ``train`` (fitness during evolution) and ``validation`` (re-scoring of the winners).

Two ways to make one:

* :func:`make_splits` draws the holdout from the pack by a fraction (the default);
* :func:`make_frame_splits` starts from a fixed calibration *frame* inside a case universe
  that may be larger than the pack (consilium paper, calibration: 110 rated cases of a 300-case case file; the
  190 others are the exact complement, in source order), given as a user manifest
  (:func:`read_manifest`, verified like :func:`check_manifest`) or drawn with
  :func:`draw_frame`, and splits it into exact train/validation counts (80/30 with
  ``preset="paper"``) or takes user-supplied train/validation manifests. A ``group_of``
  mapping (case id -> DOI) keeps all cases of one DOI on one side.

:func:`write_splits` stores a split as one id list per manifest (``frame.txt``,
``holdout.txt``, ``train.txt``, ``validation.txt``, in source order) plus ``split.json`` with
the parameters, counts and, for frame splits, ``frame_origin`` (manifest paths and sha256, or
the seed); :func:`load_splits` reads it back and :func:`check_splits` verifies it against a
pack (and, optionally, the case file). :func:`build_splits` and :func:`check_split_dir` are
what ``evolve splits make`` / ``evolve splits check`` call.
"""

from evolve.splits._frame import (
    DEFAULT_VALIDATION_FRACTION,
    ManifestCheck,
    SplitResult,
    build_splits,
    check_manifest,
    check_split_dir,
    draw_frame,
    make_frame_splits,
)
from evolve.splits._manifest import (
    FRAME_PRESETS,
    CaseList,
    FrameOrigin,
    FramePreset,
    Manifest,
    SourceFile,
    SplitWarning,
    read_case_ids,
    read_manifest,
)
from evolve.splits._splits import (
    MANIFEST_FILES,
    SPLIT_FORMAT_VERSION,
    Side,
    SplitCheck,
    Splits,
    check_splits,
    holds_splits,
    load_splits,
    make_splits,
    split_sizes,
    write_splits,
)

__all__ = [
    "DEFAULT_VALIDATION_FRACTION",
    "FRAME_PRESETS",
    "MANIFEST_FILES",
    "SPLIT_FORMAT_VERSION",
    "CaseList",
    "FrameOrigin",
    "FramePreset",
    "Manifest",
    "ManifestCheck",
    "Side",
    "SourceFile",
    "SplitCheck",
    "SplitResult",
    "SplitWarning",
    "Splits",
    "build_splits",
    "check_manifest",
    "check_split_dir",
    "check_splits",
    "draw_frame",
    "holds_splits",
    "load_splits",
    "make_frame_splits",
    "make_splits",
    "read_case_ids",
    "read_manifest",
    "split_sizes",
    "write_splits",
]
