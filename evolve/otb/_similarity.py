"""A BERTScore-style similarity that works offline, with an encoder that ships inside a PyPI
package - clearly *not* the paper's BERTScore.

The paper's BERTScore F1 uses ``microsoft/deberta-xlarge-mnli`` (layer 40, no idf, no
rescaling), which cannot be fetched here. This module computes the same *greedy-matching* F1
(each candidate token matched to its most similar reference token and the other way round;
precision and recall are the mean best cosine similarities, F1 their harmonic mean) on the
static token embeddings that the ``wordllama`` wheel carries inside it (``l2_supercat``, 256
dimensions, over the Llama-2 tokenizer's vocabulary). Static embeddings do not see context,
so the numbers are *not comparable* with the paper's; every output names :data:`ENCODER`
beside the score.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from evolve.errors import require_extra

__all__ = ["ENCODER", "token_f1"]

ENCODER = "wordllama l2_supercat_256 (static token embeddings; not the paper's deberta-xlarge-mnli BERTScore)"
"""What computed the score: named next to it in every output."""


@functools.lru_cache(maxsize=1)
def _encoder() -> tuple[object, np.ndarray]:
    """The tokenizer and the unit-normalised embedding matrix, from the wordllama wheel's own files.

    Raises:
        MissingExtraError: ``wordllama`` and its readers are not installed (the ``otb`` extra).
        FileNotFoundError: The wheel no longer carries its weights or tokenizer where expected.
    """
    require_extra("otb", "OpenTumorBoard's embedding similarity")
    import wordllama
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    root = Path(wordllama.__file__).parent
    tokenizer = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
    weights = load_file(str(root / "weights" / "l2_supercat_256.safetensors"))["embedding.weight"].astype(np.float32)
    weights /= np.maximum(np.linalg.norm(weights, axis=1, keepdims=True), 1e-12)
    return tokenizer, weights


def _vectors(text: str) -> np.ndarray:
    tokenizer, weights = _encoder()
    encoding = tokenizer.encode(text)  # type: ignore[attr-defined]
    ids = [i for i, tok in zip(encoding.ids, encoding.tokens) if tok not in ("<s>", "</s>") and tok.strip("▁")]
    return weights[ids]


def token_f1(candidate: str, reference: str) -> float | None:
    """Greedy-matching F1 of two texts on :data:`ENCODER`'s token embeddings, in [-1, 1] (in
    practice [0, 1]); None when either text has no token (never a silent 0).

    Raises:
        ImportError, FileNotFoundError: As for the encoder's loading (see the module docstring).
    """
    c, r = _vectors(candidate), _vectors(reference)
    if not len(c) or not len(r):
        return None
    sim = c @ r.T
    precision, recall = float(sim.max(axis=1).mean()), float(sim.max(axis=0).mean())
    return 0.0 if precision + recall <= 0 else min(1.0, 2 * precision * recall / (precision + recall))
