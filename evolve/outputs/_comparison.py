"""``reports/<name>/report.json`` of ``evolve compare``: runs side by side, paired differences.

Built by :func:`evolve.report.build_comparison` from the runs' own files (calibration runs on
one pack and split, or bench runs on one case file).
"""

from __future__ import annotations

from typing import Final, Literal

from evolve.outputs._calibration import BootstrapSettings
from evolve.outputs._common import Comparisons
from evolve.records import Record

__all__ = ["COMPARISON_VERSION", "ArmSummary", "ComparedCriterion", "ComparedRun", "ComparisonReport", "Difference",
           "RunSide"]

COMPARISON_VERSION: Final = 1
"""Format version of a comparison's ``report.json``; bumped on any incompatible change of :class:`ComparisonReport`."""


class ComparedRun(Record):
    """One run of the comparison (the first is the reference).

    Attributes:
        label: How tables name it (``<folder> (<judge model>)`` for calibration runs, ``<folder>
            (judge <model>)`` for judged bench runs).
        path: Its folder.
        judge_model: Calibration: the model id sent to the endpoint; bench: the model that judged
            the run's outputs (None for a run never judged).
        provider: Calibration: the endpoint's provider.
        local_model: Calibration on the embedded server: its model.
        models: Bench: the generating models.
    """

    label: str
    path: str
    judge_model: str | None = None
    provider: str | None = None
    local_model: str | None = None
    models: list[str] | None = None


class RunSide(Record):
    """One calibration run's validation MAE for a criterion: the winner, no guidance, the best
    initial prompt and physician vs physician, each with its 95% interval (None where undefined)."""

    run: str
    winner: str
    origin: str
    winner_mae: float | None = None
    winner_low: float | None = None
    winner_high: float | None = None
    no_guidance_mae: float | None = None
    no_guidance_low: float | None = None
    no_guidance_high: float | None = None
    best_initial_mae: float | None = None
    best_initial_low: float | None = None
    best_initial_high: float | None = None
    ceiling_mae: float | None = None
    ceiling_low: float | None = None
    ceiling_high: float | None = None


class ComparedCriterion(Record):
    """A criterion every calibration run has a winner for: its name and each run's side."""

    name: str | None = None
    runs: list[RunSide]


class ArmSummary(Record):
    """One bench arm (run x model x condition x topology): pipelines, consensus share, mean rounds
    and tokens, mean final-report quality (0-3; None when nothing was judged)."""

    arm: str
    pipelines: int
    consensus_share: float | None
    mean_rounds: float | None
    mean_tokens: float | None
    quality: float | None = None


class Difference(Record):
    """``what`` of ``run`` minus the reference (``versus``), paired on what both scored.

    Attributes:
        criterion: The criterion (calibration) or ``final-report quality (0-3)`` (bench).
        what: ``winner``, ``no guidance``, ``best initial`` or ``quality``.
        run: The run (or arm) compared.
        versus: The reference.
        estimate: The mean paired difference (MAE: negative is better; quality: positive is better).
        low: Lower end of the interval that inverts the sign-flip test; None where undefined.
        high: Upper end.
        n_pairs: Pairs behind it.
        n_targets: Targets (calibration) or cases (bench) both scored.
        n_cases: Case clusters.
        verdict: ``better``/``worse``/``higher``/``lower``/``no distinguishable difference``/
            ``too few cases to tell``/``too few shared pairs to tell (...)``/``the runs share no
            targets``/...
        p_value: Two-sided sign-flip p-value; None without a test.
        holm_p: Holm-adjusted over every difference of the comparison.
        holm_survives: For a definitive verdict: whether it survives Holm's correction.
    """

    criterion: str
    what: str
    run: str
    versus: str
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    n_pairs: int = 0
    n_targets: int = 0
    n_cases: int = 0
    verdict: str
    p_value: float | None = None
    holm_p: float | None = None
    holm_survives: bool | None = None


class ComparisonReport(Record):
    """``report.json`` of ``evolve compare``.

    Attributes:
        version: Format version (:data:`COMPARISON_VERSION`).
        kind: ``calibration`` or ``bench``.
        pack: Calibration: the pack every run shares.
        splits: Calibration: the split folder.
        cases_sha256: Bench: the case file every run shares.
        bootstrap: How the intervals were drawn.
        runs: The runs, the reference first.
        criteria: Calibration: each shared criterion, side by side.
        arms: Bench: each arm's summary.
        differences: Every paired difference.
        comparisons: Holm's correction over them.
        notes: What a reader must know (a rubric changed since a run, how to make runs share targets).
    """

    version: Literal[1] = COMPARISON_VERSION
    kind: Literal["calibration", "bench"]
    pack: str | None = None
    splits: str | None = None
    cases_sha256: str | None = None
    bootstrap: BootstrapSettings
    runs: list[ComparedRun]
    criteria: dict[str, ComparedCriterion] = {}
    arms: list[ArmSummary] = []
    differences: list[Difference]
    comparisons: Comparisons
    notes: list[str] = []
