"""Configuration of a calibration run: pydantic records, presets and endpoint resolution.

Layering, lowest to highest (:func:`evolve.layering.layered`, shared with the benchmark and
OpenTumorBoard configurations): preset (``quick`` or ``paper``) < config file < environment
(``EVOLVE_BASE_URL``, ``EVOLVE_MODEL``, ``EVOLVE_API_KEY``) < command-line options. The
resolved configuration is written to ``archives/<run_id>/config.json``; API keys never are
(only the *name* of the environment variable that holds one). :func:`load_run_config` reads it
back for every reader of a finished run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, model_validator

from evolve.errors import BudgetError, ConfigError, RunError
from evolve.judge import JudgeSettings, with_legacy_layout
from evolve.layering import layered, readable_error
from evolve.llm import MAX_OUTPUT_TOKENS, MAX_SEED
from evolve.records import Record
from evolve.runs import KINDS, CalibrationFolder, EndpointSettings, folder_kind, output_limit_problem

_M = TypeVar("_M", bound=BaseModel)

CONFIG_VERSION: Final = 4
"""2: hashed seeds, racing and robust selection; 3: racing with a margin that follows the judge's
measured noise, adaptive finalists; 4: judge prompts laid out criterion first
(``JudgeSettings.layout``; a configuration of an earlier version is read with the layout it was
judged with, ``target-first``). Runs of earlier versions are read, not resumed."""


class MutationSettings(Record):
    """The mutation LLM (consilium paper, calibration: temperature 0.3, up to 4,096 output tokens).

    Attributes:
        model: Model id; None = the endpoint's model.
        temperature: Sampling temperature.
        max_tokens: Output limit, tokens: at most :data:`evolve.llm.MAX_OUTPUT_TOKENS`, and at
            most the endpoint's context when it is known.
        worst_items: How many of the parent's worst training items (largest absolute error
            against the physicians' mean) the mutation prompt shows, with physicians' comments.
        excerpt_chars: Case/target text shown per item, characters.
    """

    model: str | None = None
    temperature: float = Field(default=0.3, ge=0.0, le=2.0)
    max_tokens: int = Field(default=4096, ge=64, le=MAX_OUTPUT_TOKENS)
    worst_items: int = Field(default=4, ge=0, le=50)
    excerpt_chars: int = Field(default=700, ge=100, le=20_000)


class BudgetSettings(Record):
    """How much evolution and re-evaluation a run may do, per criterion.

    Every count has an upper bound (a larger value is a typo that would run for days): accepted
    <= 10,000, attempts <= 100,000 (shared: 1,000,000), batch <= 1,000, repeats <= 20, target
    samples <= 10,000,000.

    Attributes:
        accepted: Accepted mutants to reach (the consilium paper's budget: 25).
        max_attempts: Most mutation attempts, accepted or rejected (paper: 320).
        batch_size: Mutants asked from the emitter per iteration.
        train_repeats: Judge seeds per candidate during evolution (>= 1); their spread gives
            the repeat SD used to break ties.
        reeval_repeats: Fresh judge seeds in re-evaluation (>= 2).
        max_train_targets: Use at most this many training targets (deterministic sample);
            None = all.
        max_validation_targets: Same for validation.
        shared_attempts: An attempt budget for the whole run, split evenly over the criteria
            calibrated (the first criteria get one more when it does not divide); it replaces
            ``max_attempts``. the consilium paper's calibration "25 mutants per criterion from at most 320 attempts"
            reads most plausibly as 320 attempts over all nine criteria (the ``paper``
            preset); the other reading is ``max_attempts: 320`` per criterion. Unused attempts
            of one criterion do not move to another, so a run is the same whatever order its
            parallel criteria finish in.
    """

    accepted: int = Field(default=25, ge=0, le=10_000)
    max_attempts: int = Field(default=320, ge=0, le=100_000)
    batch_size: int = Field(default=5, ge=1, le=1_000)
    train_repeats: int = Field(default=2, ge=1, le=20)
    reeval_repeats: int = Field(default=2, ge=2, le=20)
    max_train_targets: int | None = Field(default=None, ge=1, le=10_000_000)
    max_validation_targets: int | None = Field(default=None, ge=1, le=10_000_000)
    shared_attempts: int | None = Field(default=None, ge=1, le=1_000_000)

    def attempts_for(self, index: int, n_criteria: int) -> int:
        """The attempt budget of the ``index``-th of ``n_criteria`` criteria."""
        if self.shared_attempts is None:
            return self.max_attempts
        share, extra = divmod(self.shared_attempts, n_criteria)
        return share + (1 if index < extra else 0)

    @model_validator(mode="after")
    def _attempts_cover_accepted(self) -> BudgetSettings:
        if self.shared_attempts is not None:
            return self  # checked per run, when the number of criteria is known
        if self.max_attempts < self.accepted:
            raise ValueError(
                f"max_attempts ({self.max_attempts}) is below accepted ({self.accepted}); raise max_attempts"
            )
        return self


class RacingSettings(Record):
    """Racing of new mutants (GEPA's minibatch acceptance), with a margin that follows the
    judge's measured noise.

    A mutant is judged on a first batch of training targets (in one fixed shuffled order per
    criterion), then on batches that double the targets seen, and stopped (``pruned``) as
    soon as it is worse than the criterion's best candidate (lowest mean error over every
    training target) by more than the judge's own noise could explain: its mean paired
    difference on the targets seen exceeds the margin ``margin_sd x noise SD / sqrt(targets
    seen)`` and a one-sided Wilcoxon signed-rank test of the differences minus the margin gives
    p < ``p_threshold``. The noise SD is the judge's seed-to-seed SD of a per-target error,
    measured on the initial prompts judged again with the re-evaluation's first seed (calls
    the re-evaluation makes anyway, so free). Survivors are judged on every training target,
    so their training MAE and archive insertion are those of a full evaluation.

    Attributes:
        enabled: Race mutants (``--racing on``); False judges every accepted mutant on every
            training target, as the paper did (``--racing off``).
        first_batch: Training targets in the first batch (4..100,000: with fewer than 4, a
            one-sided signed-rank test cannot go below p = 0.125).
        p_threshold: p-value below which a mutant is pruned. Racing asks "is this mutant
            unlikely to beat the best?", not "is it proven worse?": a mutant pruned wrongly
            costs one exploration step, one kept wrongly a full evaluation.
        margin_sd: The margin in units of the measured noise of a mean paired difference (0 to
            10; 0: the plain paired test, no noise measured). Without a margin, p < 0.5 pruned
            a mutant truly better than the run's winner in 50-70% of runs at the quick budget
            (8 accepted of <= 16 attempts, ``bench/racing.py``, 20 worlds) and left 80% of
            runs short of the accepted budget; with 1.0, 0-10% and 0-15% at that budget and
            5% and 25-35% at the paper's (25 of <= 50), with fewer judge calls than the paper
            protocol at both (1.2x and 1.5x) and a true validation MAE not shown worse (the
            README's racing table). On that simulated judge, whose per-target errors are
            multiples of 0.5, 0.25 to 1.0 prune alike: a positive margin mostly makes targets
            where the mutant ties with the best count against pruning.
    """

    enabled: bool = True
    first_batch: int = Field(default=4, ge=4, le=100_000)
    p_threshold: float = Field(default=0.5, gt=0.0, lt=1.0)
    margin_sd: float = Field(default=1.0, ge=0.0, le=10.0)


class SelectionSettings(Record):
    """How the winner of a criterion is chosen after evolution.

    ``paper`` (consilium paper, calibration): lowest training MAE from evolution; ties by repeat SD, length, id.
    ``robust``: the initial prompts and the ``finalists`` best mutants (by that rule) are
    judged again on training with ``finalist_repeats`` fresh seeds (the re-evaluation's own
    training seeds, so those calls serve it too); the winner is the finalist with the lowest
    pooled (evolution + fresh) MAE, and the best initial prompt is chosen the same way. With
    ``adaptive``, the fresh calls go first on a ``first_share`` of the training targets, and
    a mutant finalist shown worse there than the leading finalist (one-sided paired
    signed-rank test at ``(1 - confidence) / 2``) is out of the final and judged no further:
    the ranking is settled for it. With ``gate``, a mutant must also be shown better than the
    best initial prompt on the fresh calls alone (paired test at ``confidence``), else the
    initial prompt is kept.

    Attributes:
        rule: ``robust`` or ``paper``.
        finalists: Mutants re-judged (>= 1). 3 with two fresh seeds, on ``bench/racing.py`` at
            the quick budget (8 accepted of <= 16 attempts, 30 training targets, low noise, 20
            worlds): true validation MAE +0.003 [-0.021, +0.025] against the paper protocol
            and an evolved winner truly worse than the best initial prompt in 10% of runs
            (paper protocol 10%), where 2 finalists with one seed gave +0.011 [-0.013, +0.035]
            and 30%; it costs 890 judge calls per criterion instead of 804 (paper protocol:
            1,068). With ``adaptive``, a third finalist that is clearly worse stops halfway.
        finalist_repeats: Fresh training seeds per finalist (>= 1); the first
            ``finalist_repeats`` re-evaluation seeds, so up to ``budget.reeval_repeats`` (2)
            the calls of the initial prompts and of the winner serve the re-evaluation too,
            and only the losing mutant finalists' calls are extra.
        gate: Require a mutant to be shown better than the best initial prompt. Off by
            default: on ``bench/racing.py`` at the quick preset's scale (8 of <= 16 attempts,
            high noise, 40 worlds) it kept an initial prompt in 68% of runs and gave up most of
            the true gain (true MAE +0.039 [+0.019, +0.059] against the paper protocol); an
            evolved winner truly worse than the best initial prompt fell from 10% to 2.5% of
            runs, but a kept initial prompt was the truly worse of the two in 38%.
        confidence: Level of the two-sided paired interval whose upper bound must be below 0
            (0.9: a one-sided test at 5%, which bounds how often a challenger that is not
            better wins); also sets the level at which ``adaptive`` drops a finalist.
        adaptive: Stop re-judging a mutant finalist once it is shown worse than the leader
            on the first share (the initial prompts and the winner are judged on every
            training target: the re-evaluation needs those calls anyway).
        first_share: Share of the training targets (0 < share <= 1) judged before finalists
            can drop out (at least 2 targets).
    """

    rule: Literal["robust", "paper"] = "robust"
    finalists: int = Field(default=3, ge=1, le=100)
    finalist_repeats: int = Field(default=2, ge=1, le=20)
    confidence: float = Field(default=0.9, gt=0.5, lt=1.0)
    gate: bool = False
    adaptive: bool = True
    first_share: float = Field(default=0.5, gt=0.0, le=1.0)


class ArchiveSettings(Record):
    """Grid of the MAP-Elites archive (paper capacity: 540 cells = 20 x 27).

    Measures (descriptors): guidance length in characters, range [0, 800], and the judge's
    signed bias on training items (mean of judge score minus rater score), range
    [-scale range, +scale range] of the criterion.

    Attributes:
        length_bins: Cells along the guidance length (0-800 characters, equal widths).
        bias_bins: Cells along the judge's signed bias on training items (from minus to plus
            the criterion's scale range, equal widths).
    """

    length_bins: int = Field(default=20, ge=1, le=1_000)
    bias_bins: int = Field(default=27, ge=1, le=1_000)

    @property
    def cells(self) -> int:
        """Archive capacity."""
        return self.length_bins * self.bias_bins


class CalibrationConfig(Record):
    """Resolved configuration of one calibration run (``config.json``).

    Attributes:
        version: Config format version.
        run_id: Folder name under ``archives_dir``.
        pack: Rating pack folder.
        splits: Split manifest folder (``frame.txt``, ``train.txt``, ``validation.txt`` ...).
            ``evolve calibrate`` takes ``splits/<pack name>`` when neither a config file nor
            ``--splits`` names one.
        prompts_root: Folder of rubric folders looked up before the shipped rubrics
            (:func:`evolve.rubric.rubric_source`); None = ``EVOLVE_PROMPTS_ROOT`` if set, else
            the shipped rubrics only.
        rubric: Expected rubric id (``--rubric consilium``); the pack must be rated on it.
            None = whatever rubric the pack names.
        criteria: Criteria to calibrate; None = every evolvable criterion of the rubric.
        conditions: Use only targets produced under these conditions (``Target.condition``,
            e.g. ``structured``, as in the paper's calibration); None = all targets (but see
            ``prefer_condition``).
        prefer_condition: Without ``conditions``: when the pack has targets produced under
            this condition, use only those, and record the choice as ``conditions`` in
            ``config.json``. The ``paper`` preset sets ``structured``: the paper calibrated on
            the structured consilium's outputs (consilium paper, calibration, §5.2). Packs without such targets
            (K-QA, Savage) keep all theirs.
        parallel_criteria: Criterion archives evolved at the same time (threads sharing one
            client, its concurrency bound and its cache); each archive stays isolated.
        audit: After re-evaluation, audit every winner for semantic drift (consilium paper, calibration semantic
            review; :func:`evolve.audit.audit_run`, including its LLM check) with the run's
            client; the report's drift column comes from it.
        evaluate_holdout: After the report, score the split's held-out cases with the run's
            judge file (the final, untouched evaluation; ``evolve judge`` into ``<run>/holdout/``)
            and add the held-out MAE and the physician-anchored vs actual held-out mean to Table 5
            and ``judge.json``. On in the ``paper`` preset.
        seed: Master seed (parent selection, subsampling, judge and mutation seeds); at most
            :data:`evolve.llm.MAX_SEED`, what OpenAI-compatible servers accept.
        min_coverage: A candidate needs numeric judge scores on at least this fraction of
            training calls to be selectable; below it its objective is the worst possible.
        archives_dir: Where run folders go.
        cache_path: SQLite response cache; None = ``<cache dir>/responses.sqlite``.
    """

    version: Literal[1, 2, 3, 4] = CONFIG_VERSION
    run_id: str = Field(pattern=r"^[A-Za-z0-9._\-]*[A-Za-z0-9_\-][A-Za-z0-9._\-]*$")  # a folder name, never "." or ".."
    pack: Path
    splits: Path
    prompts_root: Path | None = None
    rubric: str | None = None
    criteria: tuple[str, ...] | None = None
    conditions: tuple[str, ...] | None = None
    prefer_condition: str | None = None
    parallel_criteria: int = Field(default=9, ge=1, le=64)
    audit: bool = True
    evaluate_holdout: bool = False
    seed: int = Field(default=42, ge=0, le=MAX_SEED)
    min_coverage: float = Field(default=0.8, ge=0.0, le=1.0)
    archives_dir: Path = Path("archives")
    cache_path: Path | None = None
    endpoint: EndpointSettings = EndpointSettings()
    judge: JudgeSettings = JudgeSettings()
    mutation: MutationSettings = MutationSettings()
    budget: BudgetSettings = BudgetSettings()
    racing: RacingSettings = RacingSettings()
    selection: SelectionSettings = SelectionSettings()
    archive: ArchiveSettings = ArchiveSettings()

    @property
    def run_dir(self) -> Path:
        """``archives_dir / run_id``."""
        return self.archives_dir / self.run_id

    @model_validator(mode="before")
    @classmethod
    def _older_runs_keep_their_layout(cls, data: Any) -> Any:
        """A stored configuration of version < 4 was judged with the ``target-first`` layout."""
        return with_legacy_layout(data, older_than=4)

    @model_validator(mode="after")
    def _limits_fit_context(self) -> CalibrationConfig:
        """The judge's and the mutation's output limits fit the endpoint's context, when known."""
        for key, value in (("judge.max_tokens", self.judge.max_tokens), ("mutation.max_tokens", self.mutation.max_tokens)):
            if (problem := output_limit_problem(self.endpoint, key, value)) is not None:
                raise ValueError(problem)
        return self


PRESETS: dict[str, dict[str, Any]] = {
    # consilium paper, calibration: 540 cells, 2 seeds, 25 accepted of <= 320 attempts, mutation 0.3 / 4,096 tokens,
    # judge temperature 0 / top_p 1 / 8,000 tokens.
    "paper": {
        "budget": {"accepted": 25, "max_attempts": 320, "shared_attempts": 320, "batch_size": 5, "train_repeats": 2,
                   "reeval_repeats": 2},
        "archive": {"length_bins": 20, "bias_bins": 27},
        "judge": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 8000, "rationale_max_chars": 1200},
        "mutation": {"temperature": 0.3, "max_tokens": 4096},
        # the paper judged every accepted mutant on every training target and picked the
        # lowest training MAE
        "racing": {"enabled": False},
        "selection": {"rule": "paper"},
        # the paper calibrated on the structured pipeline's outputs (a consilium pack's other
        # condition is left out; packs without structured targets keep all theirs)
        "prefer_condition": "structured",
        # the split's held-out cases: the final, untouched estimate (Table 5's held-out column)
        "evaluate_holdout": True,
    },
    # A demo that finishes in about 15 minutes on 2 CPU cores with the embedded 0.5B model.
    "quick": {
        "budget": {
            "accepted": 2,
            "max_attempts": 4,
            "batch_size": 2,
            "train_repeats": 1,
            "reeval_repeats": 2,
            "max_train_targets": 10,
            "max_validation_targets": 8,
        },
        "archive": {"length_bins": 8, "bias_bins": 9},
        "judge": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 160, "rationale_max_chars": 120},
        "mutation": {"temperature": 0.3, "max_tokens": 600, "worst_items": 3, "excerpt_chars": 400},
    },
}


def resolve_config(
    *,
    preset: str | None = "quick",
    config_file: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
    config_data: Mapping[str, Any] | None = None,
) -> CalibrationConfig:
    """Build a :class:`CalibrationConfig` from preset < file < environment < overrides.

    Args:
        preset: ``quick``, ``paper`` or None.
        config_file: JSON file with any subset of the config fields.
        overrides: Nested dict of values (None values are ignored), e.g. from the CLI.
        environ: Environment to read (default: ``os.environ``).
        defaults: Top-level values taken only where no layer gives one (see :func:`~evolve.layering.layered`).
        config_data: Settings as a nested dict, at the file's layer (on top of ``config_file``).

    Raises:
        ConfigError: Unknown preset, unreadable file or invalid values (names the field).
        BudgetError: Inconsistent budget.
    """
    data = layered(PRESETS, preset=preset, config_file=config_file, overrides=overrides, environ=environ,
                   defaults=defaults, config_data=config_data)
    if data.get("judge", {}).get("model") is None and data.get("endpoint", {}).get("model"):
        data.setdefault("judge", {})["model"] = data["endpoint"]["model"]
    try:
        return CalibrationConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        msg = f"configuration field '{loc}': " if loc else "configuration: "
        msg += f"{readable_error(first, CalibrationConfig)}."
        if first.get("type") == "extra_forbidden":
            raise ConfigError(msg + " Correct or remove the key in the config file (Python: the config= dict).") from exc
        if loc.startswith("budget"):
            raise BudgetError(msg + " Adjust the budget options.") from exc
        raise ConfigError(msg + " Fix the value in the config file (Python: config=) or on the command line.") from exc


CONFIG_PATHS: Final = ("pack", "splits", "prompts_root", "archives_dir", "cache_path")
"""The path fields of :class:`CalibrationConfig`: ``config.json`` stores the relative ones
relative to the run folder (:meth:`~evolve.runs.RunFolder.portable`)."""


def parse_run_config(run_dir: Path) -> CalibrationConfig:
    """``config.json`` of ``run_dir``, its relative paths resolved from the run folder.

    The plain reader under :func:`load_run_config`, for callers with a message of their own
    (resume says "start a new --run-id").

    Raises:
        OSError, ValueError: Unreadable or invalid file (pydantic's ValidationError and
            json's JSONDecodeError are ValueErrors).
    """
    folder = CalibrationFolder(run_dir)
    data = json.loads((folder / folder.CONFIG).read_text(encoding="utf-8") or "null")
    if not isinstance(data, dict):
        return CalibrationConfig.model_validate(data)  # raises: not an object
    return CalibrationConfig.model_validate(folder.resolved_fields(data, CONFIG_PATHS))


def load_run_config(run_dir: Path | str) -> CalibrationConfig:
    """Read ``config.json`` of a calibration run folder.

    Relative paths in it (pack, splits, prompts root, archives folder, cache) are resolved from
    the run folder, so a run is read the same from any current folder; runs written before paths
    were stored that way fall back on the current folder. Every reader of a finished run (report,
    compare, the judge file) uses this, never the engine.

    Raises:
        RunError: Missing or invalid file (the message names it and what to check).
    """
    path = Path(run_dir) / CalibrationFolder.CONFIG
    if (kind := folder_kind(run_dir)) not in (None, "calibration"):
        raise RunError(f"{run_dir} holds {KINDS[kind]}, not a calibration run. {_READ_INSTEAD[kind]}")
    if not path.exists():
        held = "the folder holds" if Path(run_dir).is_dir() else "no such folder, so"
        raise RunError(f"{run_dir}: not a calibration run - {held} no {CalibrationFolder.CONFIG} (a run stopped before it started, or a "
                       "wrong path). Check the path; a run stopped before it started is begun again with the command that started it.")
    try:
        return parse_run_config(Path(run_dir))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RunError(f"{path}: not a calibration run's configuration ({exc.error_count()} invalid field(s), the first "
                       f"'{'.'.join(map(str, first['loc']))}': {readable_error(first, CalibrationConfig)}). Is this "
                       "a calibration run folder?") from exc
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise RunError(f"{path}: cannot read the run configuration ({exc}). Is this a run folder?") from exc


_READ_INSTEAD: Final = {
    "scoring": "Its report is report.md and summary.json in the folder (Python: evolve.outputs.read_run).",
    "bench": "Read it with `evolve bench report` (Python: evolve.outputs.read_run).",
    "otb": "Read it with `evolve otb report` (Python: evolve.outputs.read_run).",
}
"""Where the report of a run that is not a calibration is read."""
