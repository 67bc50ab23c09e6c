"""Pieces every run report shares: an interval, a paired verdict, Holm's summary, calls and spend."""

from __future__ import annotations

from evolve.records import Record

__all__ = ["CallCounts", "Comparisons", "PairedVerdict", "PriceRecord", "SpendRecord", "SpentTokens", "StatInterval",
           "Usage"]


class StatInterval(Record):
    """One statistic with its case-clustered percentile bootstrap interval.

    Attributes:
        estimate: The statistic on the data as observed; None where undefined (no pairs, a
            constant for a rank statistic).
        low: Lower end of the interval (same units); None where undefined.
        high: Upper end; None where undefined.
        n_valid: Bootstrap replicates that gave a defined value (<= ``n_boot``).
        n_boot: Replicates drawn (the report's ``bootstrap.n_boot``).
        n_clusters: Cases resampled (the bootstrap's clusters).
        n_pairs: Judge-physician (or physician-physician) pairs the estimate rests on.
    """

    estimate: float | None
    low: float | None
    high: float | None
    n_valid: int
    n_boot: int
    n_clusters: int
    n_pairs: int


class PairedVerdict(Record):
    """A paired difference (first minus second) with its test and verdict.

    Attributes:
        estimate: The difference (for MAE: lower is better, so negative favours the first);
            None where undefined.
        low: Lower end of the interval that inverts the test; None where undefined.
        high: Upper end; None where undefined.
        n_pairs: Paired observations.
        n_cases: Case clusters (a verdict needs at least :data:`evolve.stats.MIN_CASES`).
        verdict: ``better``/``worse``/``higher``/``lower``/``no distinguishable difference``/
            ``too few cases to tell``/``same candidate``/...
        p_value: Two-sided p-value of the sign-flip test over case clusters, in [0, 1]; None
            without a test.
        method: How the p-value was computed (exact or Monte Carlo sign flips).
        holm_p: Holm-adjusted p-value over every comparison of the report (Holm 1979); None
            without a p-value.
        holm_survives: For a better/worse verdict: whether ``holm_p`` < alpha; None otherwise.
    """

    estimate: float | None
    low: float | None
    high: float | None
    n_pairs: int
    n_cases: int
    verdict: str
    p_value: float | None = None
    method: str = ""
    holm_p: float | None = None
    holm_survives: bool | None = None


class Comparisons(Record):
    """Holm's correction over every paired verdict of a report.

    Attributes:
        n: Comparisons with a p-value.
        correction: ``"Holm"``.
        alpha: Family-wise error level, e.g. 0.05.
        definitive: Verdicts that claim a difference.
        not_surviving: Definitive verdicts whose Holm-adjusted p-value is not below alpha.
    """

    n: int
    correction: str
    alpha: float
    definitive: int
    not_surviving: int


class CallCounts(Record):
    """Calls and tokens of one step (or the total) over every process of a run.

    Attributes:
        calls: Calls answered by the endpoint.
        cache_hits: Calls answered by the response cache (not paid again).
        failures: Calls that failed after their retries.
        retries: Extra attempts of retried calls.
        prompt_tokens: Prompt tokens (cache hits included: the cost the run represents).
        completion_tokens: Completion tokens (likewise).
        calls_made: ``calls + failures``: every call sent.
        in_flight: Calls sent by a process that ended before their answer was counted.
        cached_prompt_tokens: Prompt tokens the server served from its prefix cache.
        billed_prompt_tokens: Prompt tokens of paid calls only.
        billed_completion_tokens: Completion tokens of paid calls only.
    """

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls_made: int = 0
    in_flight: int = 0
    cached_prompt_tokens: int = 0
    billed_prompt_tokens: int = 0
    billed_completion_tokens: int = 0


class PriceRecord(Record):
    """USD per million tokens a run was priced at (``--price-in`` ...)."""

    input_usd_per_m: float
    output_usd_per_m: float
    cached_input_usd_per_m: float | None = None
    batch_input_usd_per_m: float | None = None
    batch_output_usd_per_m: float | None = None


class SpentTokens(Record):
    """Paid calls and their tokens, interactive and batch parts apart."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    batch_prompt_tokens: int = 0
    batch_completion_tokens: int = 0
    batch_cached_prompt_tokens: int = 0


class SpendRecord(Record):
    """What a run with a spending limit or prices spent against them.

    Attributes:
        max_usd: The last process's USD limit (``--max-usd``); None: none.
        max_tokens: The last process's token limit; None: none.
        price: The last prices given; None: none.
        spent: Paid calls and tokens.
        tokens: Prompt plus completion tokens paid.
        usd: USD at ``price``; None without a price.
        stopped_at_limit: How many times a process stopped at its limit.
        stops: Their messages.
    """

    max_usd: float | None = None
    max_tokens: int | None = None
    price: PriceRecord | None = None
    spent: SpentTokens
    tokens: int
    usd: float | None = None
    stopped_at_limit: int = 0
    stops: list[str] = []


class Usage(Record):
    """Every model call of a run, by step (``judge``, ``mutation``, ``audit``, bench stages ...).

    Attributes:
        by_tag: Counts per step, sorted by name.
        total: Their sum.
        by_endpoint: Per replica URL (a run routed over several endpoints): paid calls, tokens,
            ``failed_attempts``, ``taken_out``.
        spend: What was spent against a spending limit or prices; None without either.
    """

    by_tag: dict[str, CallCounts] = {}
    total: CallCounts = CallCounts()
    by_endpoint: dict[str, dict[str, int]] | None = None
    spend: SpendRecord | None = None
