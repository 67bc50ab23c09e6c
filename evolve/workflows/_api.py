"""``evolve.calibrate``: from ratings (a folder or in memory) to a calibrated judge, in one call.

:func:`calibrate` accepts what a Python user has at hand - a rating pack folder or a
:class:`~evolve.data.RatingPack` built in memory (``RatingPack.from_frame(df, ...)``), a rubric
id, folder or :class:`~evolve.rubric.RubricBundle`, an endpoint URL or a ready client - writes
what exists only in memory into the run folder, makes the case-disjoint split when none is
given, and runs :func:`~evolve.workflows.run_calibration` (calibrate, drift audit, report). It
returns a :class:`CalibrationSummary` read from the run's ``report.json``.
"""

from __future__ import annotations

import shutil
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evolve.config import PRESETS, EndpointSettings, resolve_config
from evolve.data import RatingPack, load_pack, write_pack
from evolve.errors import ConfigError, EvolveError, RubricError, RunError
from evolve.layering import layered
from evolve.llm import Client, FakeProvider
from evolve.markdown import count_noun, format_number
from evolve.outputs import CalibrationReport, CalibrationRun, read_run
from evolve.records import Record
from evolve.rubric import RubricBundle
from evolve.runs import CalibrationFolder, ProgressHook
from evolve.splits import Splits, make_splits, write_splits
from evolve.workflows._calibration import run_calibration

__all__ = ["CalibrationSummary", "CriterionSummary", "Verdict", "calibrate"]

PACK_DIR, SPLITS_DIR, RUBRIC_DIR = "pack", "splits", "rubric"
"""Where :func:`calibrate` writes an in-memory pack, a made split and an in-memory rubric
(a prompts root: ``rubric/<rubric_id>/...``) inside the run folder."""


class Verdict(Record):
    """The winner against one baseline on validation: paired MAE difference, its sign-flip test
    over case clusters and the interval that inverts it.

    Attributes:
        baseline: ``best_initial`` (the best hand-written guidance), ``no_guidance`` or
            ``training_median`` (the constant predictor on the winner's calls).
        estimate: Winner's MAE minus the baseline's, rating points (negative: the winner is
            closer to the physicians); None when undefined.
        low: Lower end of the interval (level: the summary's ``confidence``); None when
            undefined (e.g. too few cases for any shift to be rejected).
        high: Upper end of that interval; None when undefined.
        n_pairs: (judge call, physician rating) pairs compared; 0 when the winner is the baseline.
        verdict: ``better`` (p < 0.05, winner ahead), ``worse``, ``no distinguishable
            difference``, ``too few cases to tell`` (fewer than ``evolve.stats.MIN_CASES``
            cases) or ``same candidate``.
        n_cases: Case clusters behind the test.
        p_value: Two-sided sign-flip p-value; None when undefined.
        method: How the p-value was computed, e.g. ``exact sign-flip test over 9 cases``.
        holm_p: Holm-adjusted p-value over every paired comparison of the report.
        holm_survives: Whether a better/worse verdict survives Holm's correction; None for
            other verdicts.
    """

    baseline: str
    estimate: float | None
    low: float | None
    high: float | None
    n_pairs: int
    verdict: str
    n_cases: int = 0
    p_value: float | None = None
    method: str = ""
    holm_p: float | None = None
    holm_survives: bool | None = None

    def describe(self) -> str:
        """``better vs no_guidance: -0.400 [-0.700, -0.100] (p = 0.004, 13 cases)``, worded as in
        ``report.md``: a better/worse verdict that does not survive Holm's correction over the
        report's comparisons ends `` - not after Holm's correction``; ``too few cases to tell``
        gives the count and no p-value; ``same candidate as ...`` when the winner is that baseline."""
        if self.verdict == "same candidate":
            return f"same candidate as {self.baseline}"
        if self.estimate is None:
            return f"{self.verdict} vs {self.baseline}"
        interval = (f"[{format_number(self.low, signed=True)}, {format_number(self.high, signed=True)}]"
                    if self.low is not None and self.high is not None else "[—]")
        shown_p = self.p_value is not None and self.verdict != "too few cases to tell"  # report.md gives no p there
        detail = ([f"p = {self.p_value:.3f}"] if shown_p else []) + ([count_noun(self.n_cases, "case")] if self.n_cases else [])
        text = f"{self.verdict} vs {self.baseline}: {format_number(self.estimate, signed=True)} {interval}"
        text += f" ({', '.join(detail)})" if detail else ""
        return text + (" - not after Holm's correction" if self.holm_survives is False else "")


class CriterionSummary(Record):
    """One criterion of a finished calibration.

    Attributes:
        criterion: Criterion id.
        name: Criterion name (the rubric's).
        winner: Candidate id of the selected guidance (e.g. ``entailment:m003``).
        origin: ``mutation`` (evolved), ``initial`` (a hand-written guidance kept) or ``none``.
        guidance: The winner's guidance text, as the judge receives it (empty for ``none``).
        train_mae: The winner's MAE against every physician rating on training, from evolution.
        validation_mae: The winner's MAE on validation with fresh judge seeds, rating points.
        baselines: Validation MAE of ``no_guidance``, ``best_initial`` and ``training_median``
            (always answering the training median), rating points; None when undefined.
        ceiling_mae: The physicians' own MAE against each other on validation (a floor for any
            judge); None when no validation target has two raters.
        verdicts: Paired verdicts of the winner against ``best_initial``, ``no_guidance`` and ``training_median``.
        n_validation_targets: Validation targets judged.
        drift: The drift audit's flag (``ok``, ``review``, ...), None when not audited.
        no_better_than_constant: Whether the winner's validation MAE is not below the training
            median's (always answering that one number agrees as well); None when undefined.
    """

    criterion: str
    name: str
    winner: str
    origin: str
    guidance: str
    train_mae: float | None
    validation_mae: float | None
    baselines: dict[str, float | None]
    ceiling_mae: float | None
    verdicts: dict[str, Verdict]
    n_validation_targets: int
    drift: str | None
    no_better_than_constant: bool | None = None

    def describe(self) -> str:
        """One line: the winner, its validation MAE, the baselines' and the verdicts, then a
        warning when the winner is no better than a constant, and one when the drift audit
        flagged it (``drift`` or ``review``)."""
        mae = "n/a" if self.validation_mae is None else f"{self.validation_mae:.3f}"
        base = ", ".join(f"{k} {v:.3f}" for k, v in self.baselines.items() if v is not None)
        verdicts = "; ".join(v.describe() for v in self.verdicts.values())
        line = f"{self.criterion}: winner {self.winner} ({self.origin}), validation MAE {mae} ({base}); {verdicts}"
        if self.no_better_than_constant:
            line += ("; WARNING: no better than a constant (always answering the training median agrees as well "
                     "with the physicians)")
        if self.drift in ("drift", "review"):
            line += f"; WARNING: the drift audit flagged this guidance '{self.drift}' (read audit.md before using it)"
        return line


class CalibrationSummary(Record):
    """What a calibration found, read from its run folder's ``report.json``.

    Attributes:
        run_dir: The run folder (``report.md``, ``report.html`` and every table are there).
        run_id: The run's id.
        pack: The rating pack's name.
        rubric: The rubric id.
        confidence: Level of the verdicts' intervals (0.95).
        criteria: Per criterion id, its :class:`CriterionSummary`, in the report's order.
    """

    run_dir: Path
    run_id: str
    pack: str
    rubric: str
    confidence: float
    criteria: dict[str, CriterionSummary]

    @property
    def guidance(self) -> dict[str, str]:
        """The calibrated judge: the winning guidance text per criterion id."""
        return {cid: c.guidance for cid, c in self.criteria.items()}

    def describe(self) -> str:
        """One line per criterion (:meth:`CriterionSummary.describe`)."""
        return "\n".join(c.describe() for c in self.criteria.values())

    @classmethod
    def from_report(cls, run_dir: Path | str, report: CalibrationReport) -> CalibrationSummary:
        """The summary of a calibration report (:func:`evolve.report.build_report`, ``report.json``)."""
        criteria = {}
        for row in report.table5:
            entry = report.criteria[row.criterion]
            verdicts = {k: Verdict(baseline=k, **v.model_dump()) for k in ("best_initial", "no_guidance", "training_median")
                        if (v := getattr(entry.verdicts, k)) is not None}
            criteria[row.criterion] = CriterionSummary(
                criterion=row.criterion, name=row.name or row.criterion, winner=row.evolved,
                origin=row.evolved_origin, guidance=entry.winner.text,
                train_mae=row.evolved_train_mae, validation_mae=row.evolved_val_mae,
                baselines={"no_guidance": row.no_guidance_val_mae, "best_initial": row.best_initial_val_mae,
                           "training_median": row.median_val_mae},
                ceiling_mae=row.ceiling_val_mae, verdicts=verdicts, n_validation_targets=row.n_val_targets,
                drift=row.drift, no_better_than_constant=row.no_better_than_constant,
            )
        return cls(run_dir=Path(run_dir), run_id=report.run_id, pack=report.pack, rubric=report.rubric.id,
                   confidence=report.bootstrap.confidence, criteria=criteria)

    @classmethod
    def from_run(cls, run_dir: Path | str) -> CalibrationSummary:
        """The summary of a finished run folder (its ``report.json``, read by :func:`evolve.outputs.read_run`).

        Raises:
            RunError: The folder has no readable ``report.json`` (``evolve report RUN`` writes it),
                or it is not a calibration run.
        """
        run = read_run(run_dir)
        if not isinstance(run, CalibrationRun):
            raise RunError(f"{run_dir}: not a calibration run (it holds a {type(run).__name__}); pass a folder "
                           "that `evolve calibrate` wrote.")
        return cls.from_report(run_dir, run.report)


def _endpoint(endpoint: Client | EndpointSettings | Mapping[str, Any] | str | None, model: str | None) -> dict[str, Any]:
    """The endpoint overrides of a :func:`calibrate` call."""
    if isinstance(endpoint, Client):
        out: dict[str, Any] = {"provider": "fake"} if isinstance(endpoint.provider, FakeProvider) else {}
    elif isinstance(endpoint, str):
        out = {"base_url": endpoint}  # a URL means the OpenAI-compatible provider
    elif isinstance(endpoint, EndpointSettings):
        out = endpoint.model_dump()
    elif isinstance(endpoint, Mapping):
        out = dict(endpoint)
    elif endpoint is None:
        out = {}
    else:
        raise EvolveError(f"endpoint={endpoint!r}: give a base URL, an EndpointSettings, a dict of endpoint settings or "
                          "an evolve.llm.Client.")
    return {**out, "model": model} if model is not None else out


def _rubric(rubric: RubricBundle | Path | str | None, prompts_root: Path | str | None,
            run_dir: Path) -> tuple[str | None, Path | None, RubricBundle | None]:
    """(expected rubric id, prompts root, bundle to write into the run) of a :func:`calibrate` call."""
    root = Path(prompts_root) if prompts_root is not None else None
    if rubric is None:
        return None, root, None
    if isinstance(rubric, RubricBundle):
        rubric.validate()
        return rubric.rubric.id, run_dir / RUBRIC_DIR, rubric
    if isinstance(rubric, Path) or "/" in rubric or "\\" in rubric:
        folder = Path(rubric)
        if not (folder / "rubric.json").is_file():
            raise RubricError(f"{folder}: not a rubric folder (no rubric.json). Give a rubric folder "
                              "(<prompts root>/<rubric_id>/rubric.json), a rubric id or a RubricBundle.")
        return folder.name, folder.parent, None
    return rubric, root, None


def _pack_name(pack: RatingPack | Path | str) -> str:
    return pack.manifest.name if isinstance(pack, RatingPack) else Path(pack).resolve().name


def calibrate(
    pack: RatingPack | Path | str,
    *,
    rubric: RubricBundle | Path | str | None = None,
    endpoint: Client | EndpointSettings | Mapping[str, Any] | str | None = None,
    preset: str | None = "quick",
    model: str | None = None,
    splits: Splits | Path | str | None = None,
    criteria: list[str] | tuple[str, ...] | None = None,
    config: Mapping[str, Any] | Path | str | None = None,
    prompts_root: Path | str | None = None,
    run_id: str | None = None,
    archives_dir: Path | str | None = None,
    split_seed: int = 42,
    progress: ProgressHook | None = None,
) -> CalibrationSummary:
    """Calibrate a judge on ratings: evolve each criterion's guidance, audit it, report.

    What exists only in memory is written into the new run folder first (``pack/``,
    ``splits/``, ``rubric/<rubric_id>/``), so the run folder holds everything it was made from;
    folders given by path are read where they are. The configuration is layered as for
    ``evolve calibrate``: ``preset`` < ``config`` < environment (``EVOLVE_BASE_URL`` ...) < the
    other arguments. Nothing is written when an argument or the configuration is invalid; a
    start that fails before the run begins (an invalid pack, an impossible split) removes the
    run folder it made.

    Example::

        summary = evolve.calibrate("ratings/kqa", endpoint="http://127.0.0.1:8080/v1")
        print(summary.describe())          # winner, validation MAE, verdicts per criterion
        summary.guidance["entailment"]     # the calibrated guidance text

    Args:
        pack: A rating pack folder, or a :class:`~evolve.data.RatingPack` in memory (e.g.
            ``RatingPack.from_frame(df, rubric=..., name=...)``).
        rubric: None (the rubric the pack names), a rubric id (the pack must be rated on it),
            a rubric folder (a :class:`~pathlib.Path`, or a string with a ``/``), or a
            :class:`~evolve.rubric.RubricBundle` in memory.
        endpoint: None (the configuration's endpoint: the embedded model by default), a base
            URL (an OpenAI-compatible server, e.g. ``http://127.0.0.1:8080/v1``), an
            :class:`~evolve.config.EndpointSettings`, a dict of endpoint settings, or a ready
            :class:`~evolve.llm.Client` (kept open; a client over the fake provider is recorded
            as provider ``fake``).
        preset: ``quick`` (minutes on the embedded model), ``paper`` (consilium paper, calibration) or None.
        model: Model id sent to the endpoint (judge and mutation); None = the configuration's.
        splits: A split folder, a :class:`~evolve.splits.Splits`, or None: the configuration's
            ``splits`` folder if it names one, else the pack's cases split with
            :func:`~evolve.splits.make_splits` (seed ``split_seed``) into the run folder.
        criteria: Criteria to calibrate; None = every evolvable criterion of the rubric.
        config: Further configuration: a dict nested as a config file (see the README's
            "Configuration keys"), or the path of a JSON config file.
        prompts_root: Where rubric ids are looked up first (then ``$EVOLVE_PROMPTS_ROOT``, then
            the shipped rubrics).
        run_id: Run folder name under ``archives_dir``; None = the configuration's ``run_id``,
            else ``<pack name>-<UTC time>``.
        archives_dir: Where run folders go; None = the configuration's ``archives_dir``, else
            ``archives``.
        split_seed: Seed of the split made when ``splits`` is None.
        progress: Progress hook (:class:`~evolve.runs.ProgressHook`).

    Returns:
        The run's :class:`CalibrationSummary` (winners, guidance, validation MAE against the
        baselines, verdicts with intervals).

    Raises:
        ConfigError: An invalid setting (names the field) or an unusable ``endpoint``.
        RunError: The run folder already holds a run, or the inputs leave no training or
            validation targets.
        PackError, SplitError, RubricError: Invalid inputs (before any model call).
        NoWinnerError: Some criterion found no usable guidance (the report covers the others).
    """
    if config is not None and not isinstance(config, (Mapping, Path, str)):
        raise ConfigError(f"config= takes a dict nested like a config file or the path of a JSON config file, not "
                          f"{type(config).__name__} {config!r:.80}.")
    config_file = None if isinstance(config, Mapping) or config is None else Path(config)
    config_data = config if isinstance(config, Mapping) else None
    run_id, archives_dir, splits = _placed(pack, run_id, archives_dir, splits, preset, config_file, config_data)
    run_dir = Path(archives_dir) / run_id
    rubric_id, root, bundle = _rubric(rubric, prompts_root, run_dir)
    pack_dir = run_dir / PACK_DIR if isinstance(pack, RatingPack) else Path(pack)
    split_dir = Path(splits) if isinstance(splits, (Path, str)) else run_dir / SPLITS_DIR
    overrides = {
        "run_id": run_id, "archives_dir": Path(archives_dir), "pack": pack_dir, "splits": split_dir,
        "prompts_root": root, "rubric": rubric_id, "criteria": tuple(criteria) if criteria is not None else None,
        "endpoint": _endpoint(endpoint, model),
    }
    resolved = resolve_config(preset=preset, config_file=config_file, config_data=config_data, overrides=overrides)
    made = not run_dir.exists()
    with CalibrationFolder(run_dir).exclusive():  # before anything is written: one process per run folder
        if (run_dir / CalibrationFolder.CONFIG).exists():
            raise RunError(f"{run_dir} already holds a run; choose another run_id (continue that one with "
                           f"`evolve calibrate --resume {run_dir}`).")
        try:
            _write_inputs(run_dir, pack, bundle, splits, split_dir, resolved.prompts_root, split_seed)
            result = run_calibration(resolved, client=endpoint if isinstance(endpoint, Client) else None,
                                     progress=progress, on_warning=_warn)  # a budget too small, placeholder rubric texts
        except BaseException:
            if made and not (run_dir / CalibrationFolder.CONFIG).exists():
                shutil.rmtree(run_dir, ignore_errors=True)  # the run never began: leave nothing behind
            raise
    assert result.report is not None  # run_calibration always ends by writing the report
    return CalibrationSummary.from_report(result.run_dir, result.report)


def _placed(pack: RatingPack | Path | str, run_id: str | None, archives_dir: Path | str | None,
            splits: Splits | Path | str | None, preset: str | None, config_file: Path | None,
            config_data: Mapping[str, Any] | None) -> tuple[str, Path | str, Splits | Path | str | None]:
    """The run id, archives folder and splits of a :func:`calibrate` call: an argument given
    wins, then the configuration's (``config``, the environment), then the defaults
    (``<pack name>-<UTC time>``, ``archives``, a split made into the run folder).

    Raises:
        ConfigError: An unknown preset or an unreadable config file.
    """
    given = layered(PRESETS, preset=preset, config_file=config_file, config_data=config_data, overrides=None,
                    environ=None)
    run_id = run_id or given.get("run_id") or f"{_pack_name(pack)}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    return str(run_id), archives_dir or given.get("archives_dir") or "archives", splits or given.get("splits")


def _write_inputs(run_dir: Path, pack: RatingPack | Path | str, bundle: RubricBundle | None,
                  splits: Splits | Path | str | None, split_dir: Path, root: Path | None, split_seed: int) -> None:
    """Write the in-memory rubric, pack and split of a :func:`calibrate` call into its run folder."""
    if bundle is not None:
        bundle.write(run_dir / RUBRIC_DIR, overwrite=True)
    if isinstance(pack, RatingPack):
        write_pack(pack, run_dir / PACK_DIR, overwrite=True)
    if isinstance(splits, Splits):
        write_splits(splits, split_dir, overwrite=True)
    elif splits is None:
        loaded = pack if isinstance(pack, RatingPack) else load_pack(pack, prompts_root=root)
        write_splits(make_splits(loaded, seed=split_seed), split_dir, overwrite=True)


def _warn(message: str) -> None:
    """A warning about the run, before it starts, as a Python :class:`UserWarning` at the caller
    of :func:`calibrate` (the command line prints the same sentences as ``warning:`` lines)."""
    warnings.warn(message, UserWarning, stacklevel=5)  # _warn, the calibration steps, run_calibration, calibrate
