"""Judge and mutation seeds derived from the run seed by hashing."""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed"]

_SEED_SPACE = 2**31 - 1


def derive_seed(run_seed: int, phase: str, criterion: str, repeat: int) -> int:
    """The seed of one call family: a hash of (run seed, phase, criterion, repeat).

    Offsets (``seed + 1000 + r``) let two run seeds share "fresh" seeds - ``--seed 42``'s
    re-evaluation seed 1043 was ``--seed 43``'s too, so the second run read the first run's
    answers from the cache. Hashing gives every (run seed, phase, criterion, repeat) its own
    seed, the same on every machine and in every resume.

    Args:
        run_seed: The run's master seed (``--seed``).
        phase: ``evolution``, ``finalist``, ``reeval`` or ``mutation``.
        criterion: Criterion id.
        repeat: Repeat index (the attempt number for ``mutation``), >= 0.

    Returns:
        An int in [0, 2**31 - 1) (what OpenAI-compatible servers accept as ``seed``).
    """
    key = f"evolve-seed/1|{run_seed}|{phase}|{criterion}|{repeat}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % _SEED_SPACE
