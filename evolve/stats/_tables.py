"""All six statistics from judge x rater count tables, vectorised over bootstrap replicates.

Every statistic in :mod:`evolve.stats._statistics` depends on the pairs only through the
``K x K`` table of counts ``T[i, k] = #{pairs with judge = labels[i] and rater = labels[k]}``
(Spearman too: tied values share the mid-rank of their category, which the margins
determine). A cluster-bootstrap replicate is therefore a sum of per-case tables weighted by
how often each case was drawn, and ``B`` replicates are one ``(B, G) @ (G, K*K)`` product.
The formulas below are the textbook ones the libraries implement (scikit-learn's
``cohen_kappa_score`` weighting by category position, ``krippendorff.alpha`` with the
ordinal metric over ``value_domain``, scipy's average-rank Spearman); tests check that they
agree with the libraries to ~1e-12 on random and degenerate tables. The point functions of
:mod:`evolve.stats._statistics` give the estimates (the libraries', and scikit-learn's kappa
arithmetic done directly); these give the replicates, where 2,000 calls would be slow.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

STATISTICS = ("mae", "signed_error", "class_balanced_mae", "qwk", "krippendorff_alpha", "spearman")
"""Names, in report order, of the statistics :func:`table_statistics` returns."""


def cluster_tables(
    judge_codes: npt.NDArray[np.intp],
    rater_codes: npt.NDArray[np.intp],
    cluster_codes: npt.NDArray[np.intp],
    n_clusters: int,
    n_labels: int,
) -> npt.NDArray[np.float64]:
    """Count table of each cluster, flattened.

    Args:
        judge_codes: Category position (0 .. K-1) of each pair's judge score, shape ``(n,)``.
        rater_codes: Category position of each pair's rating, shape ``(n,)``.
        cluster_codes: Cluster index (0 .. G-1) of each pair, shape ``(n,)``.
        n_clusters: ``G``.
        n_labels: ``K``.

    Returns:
        Array of shape ``(G, K*K)``; row ``g`` is cluster ``g``'s table ``T[judge, rater]``
        in row-major order.
    """
    kk = n_labels * n_labels
    flat = cluster_codes * kk + judge_codes * n_labels + rater_codes
    return np.bincount(flat, minlength=n_clusters * kk).reshape(n_clusters, kk).astype(np.float64)


def _safe_divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def table_statistics(tables: npt.NDArray[np.float64], labels: npt.NDArray[np.float64]) -> dict[str, np.ndarray]:
    """Compute every statistic for a stack of count tables.

    Args:
        tables: Counts ``T[b, judge, rater]``, shape ``(B, K, K)``, non-negative.
        labels: The scale values, strictly increasing, shape ``(K,)``.

    Returns:
        ``{name: array of shape (B,)}`` for each name in :data:`STATISTICS`; ``nan`` where a
        statistic is undefined (the same cases as the library-based functions).
    """
    t = np.asarray(tables, dtype=np.float64)
    n_labels = labels.size
    n = t.sum(axis=(1, 2))
    diff = labels[:, None] - labels[None, :]  # judge - rater, (K, K)
    abs_err = (t * np.abs(diff)).sum(axis=(1, 2))
    out: dict[str, np.ndarray] = {
        "mae": _safe_divide(abs_err, n),
        "signed_error": _safe_divide((t * diff).sum(axis=(1, 2)), n),
    }

    judge_margin = t.sum(axis=2)  # (B, K): judge category counts
    rater_margin = t.sum(axis=1)  # (B, K): rater category counts

    # Class-balanced MAE: per true (rater) category, then the mean over present categories.
    per_class = _safe_divide((t * np.abs(diff)[None]).sum(axis=1), rater_margin)
    present = rater_margin > 0
    out["class_balanced_mae"] = _safe_divide(np.where(present, per_class, 0.0).sum(axis=1), present.sum(axis=1))

    # Quadratic weighted kappa, weights on category positions (scikit-learn's convention).
    pos = np.arange(n_labels, dtype=np.float64)
    weights = (pos[:, None] - pos[None, :]) ** 2
    expected = _safe_divide(judge_margin[:, :, None] * rater_margin[:, None, :], n[:, None, None])
    observed_w = (t * weights).sum(axis=(1, 2))
    expected_w = (expected * weights).sum(axis=(1, 2))
    # undefined (nan) when either side uses one category: the formula would give 0 whatever the other side does
    varied = ((judge_margin > 0).sum(axis=1) > 1) & ((rater_margin > 0).sum(axis=1) > 1)
    out["qwk"] = 1.0 - _safe_divide(observed_w, np.where((n > 0) & varied, expected_w, 0.0))

    # Krippendorff's alpha, ordinal metric; each pair is a unit with two values, so the
    # coincidence matrix is T + T' (a unit contributes both ordered value pairs, weight 1/(2-1)).
    coinc = t + np.swapaxes(t, 1, 2)
    n_v = coinc.sum(axis=1)  # (B, K) pairable values per category
    n_total = n_v.sum(axis=1)  # 2n
    chance = _safe_divide(
        n_v[:, :, None] * n_v[:, None, :] - n_v[:, :, None] * np.eye(n_labels)[None], (n_total - 1)[:, None, None]
    )
    lo = np.minimum.outer(np.arange(n_labels), np.arange(n_labels))
    hi = np.maximum.outer(np.arange(n_labels), np.arange(n_labels))
    cum = np.cumsum(n_v, axis=1)
    between = cum[:, hi] - cum[:, lo] + n_v[:, lo]  # sum of n_g for g in [lo, hi]
    dist = (between - (n_v[:, lo] + n_v[:, hi]) / 2.0) ** 2
    d_obs = (coinc * dist).sum(axis=(1, 2))
    d_exp = np.where(n > 0, (np.nan_to_num(chance) * dist).sum(axis=(1, 2)), 0.0)
    out["krippendorff_alpha"] = 1.0 - _safe_divide(d_obs, d_exp)

    # Spearman: Pearson correlation of average ranks; a category's tied values share the
    # mid-rank (number of smaller values + (count + 1) / 2).
    def midranks(margin: np.ndarray) -> np.ndarray:
        return np.cumsum(margin, axis=1) - margin + (margin + 1.0) / 2.0

    rank_j = midranks(judge_margin)
    rank_r = midranks(rater_margin)
    mean_rank = ((n + 1.0) / 2.0)[:, None]
    dj = np.where(judge_margin > 0, rank_j - mean_rank, 0.0)
    dr = np.where(rater_margin > 0, rank_r - mean_rank, 0.0)
    cov = np.einsum("bik,bi,bk->b", t, dj, dr)
    var_j = (judge_margin * dj**2).sum(axis=1)
    var_r = (rater_margin * dr**2).sum(axis=1)
    denom = np.sqrt(var_j * var_r)
    rho = _safe_divide(cov, np.where(n >= 2, denom, 0.0))
    out["spearman"] = np.clip(rho, -1.0, 1.0)
    return out
