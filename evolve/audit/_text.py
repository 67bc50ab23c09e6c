"""Lexical signals of drift: tokens, the criterion's key terms and TF-IDF cosine similarity.

All three share one deliberately simple analyzer: lowercase words of two or more characters
starting with a letter (hyphens and digits split words), scikit-learn's English stop words
removed, and a crude plural fold (``-ies`` -> ``-y``, a final ``-s`` dropped unless the word
ends in ``ss``, ``us`` or ``is``). No stemming or lemmatisation beyond that. Similarities use
unigrams and bigrams (bigrams formed after stop-word removal); key terms are unigrams.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

from evolve.rubric import Criterion, Rubric

_WORD = re.compile(r"[a-z][a-z0-9]+")


def _fold(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """The analyzer's unigrams of ``text``, in order (see the module docstring)."""
    return [_fold(w) for w in _WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS]


def analyze(text: str) -> list[str]:
    """Unigrams then bigrams of :func:`content_words` (the TF-IDF analyzer)."""
    words = content_words(text)
    return words + [f"{a} {b}" for a, b in zip(words, words[1:])]


def criterion_text(criterion: Criterion) -> str:
    """What a guidance text is compared with: the criterion's name, definition and anchors."""
    anchors = " ".join(criterion.anchors[str(s)] for s in criterion.scores)
    return f"{criterion.name}. {criterion.definition} {anchors}"


def key_terms(rubric: Rubric, criterion_id: str, n: int = 8) -> tuple[str, ...]:
    """The ``n`` key terms of one criterion.

    Rule: the criterion's name (counted twice, as the most condensed statement of what it
    measures) plus its definition, reduced to :func:`content_words`; each word is weighted by
    TF-IDF with the IDF taken over the same text of *every* criterion of the rubric, so words
    shared by all criteria ("case", "text") rank below words particular to this one. Highest
    weight first; ties go to the word that appears first. With a one-criterion rubric the IDF
    is flat and the rule reduces to word frequency.

    Raises:
        KeyError: No such criterion.
    """
    docs = [f"{c.name}. {c.name}. {c.definition}" for c in rubric.criteria]
    ids = [c.criterion_id for c in rubric.criteria]
    if criterion_id not in ids:
        raise KeyError(criterion_id)
    index = ids.index(criterion_id)
    vectorizer = TfidfVectorizer(analyzer=content_words, norm=None)
    weights = vectorizer.fit_transform(docs)[index].toarray()[0]
    first: dict[str, int] = {}
    for pos, word in enumerate(content_words(docs[index])):
        first.setdefault(word, pos)
    ranked = sorted(first, key=lambda w: (-weights[vectorizer.vocabulary_[w]], first[w]))
    return tuple(ranked[:n])


def present_terms(terms: Sequence[str], text: str) -> tuple[str, ...]:
    """The ``terms`` that occur among the :func:`content_words` of ``text``, in ``terms`` order."""
    words = set(content_words(text))
    return tuple(t for t in terms if t in words)


def tfidf_matrix(texts: Sequence[str]) -> dict[str, np.ndarray]:
    """L2-normalised TF-IDF vectors of ``texts`` (unigrams + bigrams), fitted on ``texts`` themselves.

    Returns:
        ``{text: vector}``; a text without any content word gets the zero vector.
    """
    unique = list(dict.fromkeys(texts))
    matrix = TfidfVectorizer(analyzer=analyze).fit_transform(unique).toarray()
    return {t: matrix[i] for i, t in enumerate(unique)}


def cosine(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Cosine similarity; 0.0 when either vector is zero."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx == 0.0 or ny == 0.0:
        return 0.0
    return float(np.clip(x @ y / (nx * ny), -1.0, 1.0))
