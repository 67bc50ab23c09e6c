"""Agreement statistics between judge scores and physician ratings, with case-clustered intervals.

The calibration objective is one number, the MAE of the judge against every individual
physician rating. A report (consilium paper, calibration, "Table 5") needs more than that number to be read
safely, and this package supplies it.

**The unit is a pair.** A *pairs* frame has one row per (judge score, individual physician
rating) of the same target and criterion: columns ``case_id``, ``target_id``, ``judge``,
``rater`` and optionally ``rater_id``, ``repeat``. Two judge repeats on a target rated by
three physicians give six rows. Every statistic below is computed over these rows.

**Several statistics, because each can mislead on its own.** On a 0-3 scale:

- ``mae`` - mean |judge - rater|, the fitness; ``signed_error`` - mean (judge - rater), > 0
  when the judge is lenient.
- ``class_balanced_mae`` - the MAE within each physician category, averaged with equal
  weight (Baccianella et al. 2009). When most ratings are 3, a judge that always says 3 has
  a small MAE but a large class-balanced MAE.
- ``qwk`` - quadratic weighted kappa (Cohen 1968): agreement corrected for what the two
  score distributions would give by chance, distant disagreements costing more.
- ``krippendorff_alpha`` (:func:`krippendorff_alpha_ordinal`) - Krippendorff's alpha with the ordinal metric
  (Krippendorff 2011/2019), another chance-corrected coefficient that respects order
  without assuming equal spacing, and the one to compare with physician-vs-physician
  reliability.
- ``spearman`` - rank correlation: does the judge *order* targets as the physicians do,
  whatever its offset?

An undefined value (no pairs, every score in one category, a constant side) is ``nan``, not
an exception.

**From run tables to pairs.** :func:`agreement`, :func:`judge_pairs`, :func:`rater_ceiling`
and friends turn a run's long tables into the fitness, its coverage and the pairs above; the
engine and the report share them. The tables: judge ``scores``, one row per judge call with
``criterion, target_id, case_id, repeat, outcome, score`` (``outcome`` one of ``score``,
``not_evaluable``, ``model_failure``; only ``score`` rows pair), as in a run's ``scores.csv``;
physician ``ratings``, one row per rating with ``criterion, target_id, rater_id, score`` (an
empty score, a not-evaluable rating, never pairs), as :meth:`evolve.data.RatingPack.ratings_frame`
gives them. Each join
looks the ratings up by (criterion, target); :class:`IndexedRatings` builds that lookup once
for a caller that joins many candidates with the same ratings, and every join takes it in
place of the ratings frame.

**Intervals resample cases, not pairs.** Pairs from the same case share its text, its
physicians and the judge's reading of it, so they move together. The bootstrap therefore
draws whole cases with replacement and keeps all their pairs (Field & Welsh 2007), then
takes the percentile interval of the replicates (Efron & Tibshirani 1993). Resampling pairs
would pretend there are as many independent observations as pairs and give intervals that
are too narrow. Replicates where a statistic is undefined are left out and counted
(``Interval.n_valid``). :func:`agreement_table` computes all six statistics on the same
resampled cases in one fast pass (:func:`judge_agreement_table` straight from one candidate's
judge calls and the ratings), :func:`constant_agreement_table` the three error statistics
of a constant predictor (the training median); :func:`cluster_bootstrap` does the same for any
``statistic(judge, rater)``.

**The judge as one more rater.** :func:`judge_as_rater` puts, for every physician, the
judge's distance from them beside the other physicians' distance from them, on the same
targets (those with two or more ratings) - does the judge agree with physicians as well as
they agree with each other?

**Paired verdicts.** Two candidates judged on the same targets with the same seeds are
compared pair by pair: :func:`paired_mae_difference` gives MAE(A) - MAE(B) on the shared
(target, repeat, rater) pairs (:func:`paired_difference` does the same for any per-pair
differences, e.g. against a constant predictor). A percentile bootstrap over six or seven cases is far too
narrow, so the verdict rests on a sign-flip permutation test over the case-level sums of the
differences (:func:`sign_flip_test`: exact over all ``2**n`` sign patterns up to 14 cases,
20,000 seeded random patterns beyond), valid for any number of cases, and the interval is the
set of shifts that test does not reject (:func:`shift_interval`), so interval and verdict
always agree: ``better`` <=> ``high < 0`` <=> ``p < 1 - confidence`` with A ahead. Below
:data:`MIN_CASES` (8) case clusters, or with no shared pair, the verdict is ``too few cases to
tell`` whatever the numbers. Several comparisons in one report: :func:`holm` adjusts their
p-values (Holm 1979) so a verdict can be marked when it does not survive. Two MAEs with
overlapping intervals can still differ clearly when paired.

**Physician-anchored means.** A judge's raw mean is biased even when it is well calibrated,
so its case-clustered interval covers the judge's mean, not the physicians'. When a rated
sample of the same kind of outputs exists, :func:`ppi_mean` estimates the physicians' mean as
``lam * mean(judge on the judged items) + mean(physician - lam * judge on the rated items)``:
prediction-powered inference (Angelopoulos et al., Science 2023) with the power-tuned ``lam``
of PPI++ (Angelopoulos, Duchi & Zrnic 2023), 0 = the rated mean alone, 1 = plain PPI, and an
interval whose variance treats cases as the unit on both sides (with a small-sample
correction: Student's t on the rated cases; ``bench/ppi_coverage.py`` measures 93.5-94%
coverage at nominal 95% with 30 rated cases, where the judge's raw mean covers 0-13%).
``effective_n`` says how many physician ratings the result is worth (by its own variance
estimate, which the bench finds 10-40% optimistic). :func:`ppi_mean_difference` does the same for
system A minus system B (cases shared by the samples bring their covariance in; one rated
sample anchoring both gives the judge's raw difference with ``lam = 1``). Below
:data:`MIN_RATED_CASES` rated cases the estimate is refused with the size named, and every
estimate carries its ``assumption`` sentence: the rated sample is drawn like the judged outputs.

**The ceiling.** Physicians disagree with each other too. :func:`rater_pairs` turns a long
ratings table into physician-vs-physician pairs (each unordered pair of raters on a target)
in the same schema, so ``agreement_table(rater_pairs(ratings), labels)`` gives the level of
agreement a judge can hardly be expected to beat. :func:`macro_mean` averages per-criterion
values while skipping undefined ones and saying how many it used.

Example::

    from evolve.stats import agreement_table, rater_pairs

    table = agreement_table(pairs, labels=[0, 1, 2, 3], n_boot=2000, seed=0)
    table["qwk"].estimate, table["qwk"].low, table["qwk"].high
    ceiling = agreement_table(rater_pairs(ratings), labels=[0, 1, 2, 3])
"""

from evolve.stats._agreement import (
    Agreement,
    IndexedRatings,
    agreement,
    constant_agreement,
    item_errors,
    judge_as_rater,
    judge_pairs,
    median_baseline,
    numeric_ratings,
    rater_ceiling,
)
from evolve.stats._bootstrap import (
    CONSTANT_STATISTICS,
    ClusterMeans,
    Interval,
    Statistic,
    agreement_table,
    cluster_bootstrap,
    constant_agreement_table,
    judge_agreement_table,
    percentile_interval,
)
from evolve.stats._paired import (
    MIN_CASES,
    PairedDifference,
    Verdict,
    holm,
    paired_difference,
    paired_mae_difference,
    shift_interval,
    sign_flip_test,
    sign_patterns,
)
from evolve.stats._pairs import rater_pairs
from evolve.stats._ppi import MIN_RATED_CASES, PPIEstimate, ppi_mean, ppi_mean_difference
from evolve.stats._statistics import (
    class_balanced_mae,
    krippendorff_alpha_ordinal,
    macro_mean,
    mae,
    qwk,
    signed_error,
    spearman,
)
from evolve.stats._tables import STATISTICS

__all__ = [
    "MIN_CASES",
    "MIN_RATED_CASES",
    "CONSTANT_STATISTICS",
    "STATISTICS",
    "Agreement",
    "IndexedRatings",
    "agreement",
    "constant_agreement",
    "item_errors",
    "judge_as_rater",
    "judge_pairs",
    "median_baseline",
    "numeric_ratings",
    "rater_ceiling",
    "ClusterMeans",
    "Interval",
    "PairedDifference",
    "PPIEstimate",
    "Verdict",
    "Statistic",
    "agreement_table",
    "class_balanced_mae",
    "cluster_bootstrap",
    "constant_agreement_table",
    "judge_agreement_table",
    "percentile_interval",
    "krippendorff_alpha_ordinal",
    "macro_mean",
    "mae",
    "holm",
    "paired_difference",
    "paired_mae_difference",
    "ppi_mean",
    "ppi_mean_difference",
    "qwk",
    "rater_pairs",
    "shift_interval",
    "sign_flip_test",
    "sign_patterns",
    "signed_error",
    "spearman",
]
