"""Case-disjoint splits of a rating pack, stored as plain-text manifests.

Calibration must never score a judge on cases whose ratings shaped its guidance. A
:class:`Splits` object therefore divides the *cases* of a pack (all targets and ratings of a
case travel with it) into:

* ``holdout`` - set aside for the final, untouched evaluation;
* ``frame`` - every other case (the exact complement of the holdout), itself divided into
  ``train`` (fitness during evolution) and ``validation`` (re-scoring of the winners).

:func:`make_splits` draws the split deterministically from a seed; :func:`write_splits`
stores it as one id list per manifest (``frame.txt``, ``holdout.txt``, ``train.txt``,
``validation.txt``, in the pack's source order) plus ``split.json`` with the parameters and
counts; :func:`load_splits` reads it back and :func:`check_splits` verifies it against a pack.
"""

from evolve.splits._splits import (
    MANIFEST_FILES,
    SPLIT_FORMAT_VERSION,
    Side,
    Splits,
    check_splits,
    load_splits,
    make_splits,
    split_sizes,
    write_splits,
)

__all__ = [
    "MANIFEST_FILES",
    "SPLIT_FORMAT_VERSION",
    "Side",
    "Splits",
    "check_splits",
    "load_splits",
    "make_splits",
    "split_sizes",
    "write_splits",
]
