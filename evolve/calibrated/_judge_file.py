"""The judge file (``judge.json``): a calibrated judge, self-contained and versioned."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import PrivateAttr, ValidationError, model_validator

from evolve.errors import RunError
from evolve.judge import JudgeSettings, derive_seed, with_legacy_layout
from evolve.records import Record
from evolve.rubric import RubricBundle
from evolve.runs import atomic_write

__all__ = [
    "JUDGE_FILE",
    "AnchorTarget",
    "CriterionJudge",
    "JudgeFile",
    "JudgeGuidance",
    "JudgeVerdict",
    "SeedPolicy",
    "load_judge_file",
    "write_judge_file",
]

JUDGE_FILE = "judge.json"
"""The judge file's name inside a calibration run folder (``CalibrationFolder.JUDGE``)."""

GuidanceKind = Literal["winner", "best-initial", "no-guidance"]

_FIX = "`evolve report RUN` writes it from a finished calibration run folder"


class JudgeGuidance(Record):
    """One guidance text of a criterion and how it agreed with physicians on validation.

    Attributes:
        kind: ``winner`` (the evolved or chosen prompt), ``best-initial`` or ``no-guidance``.
        candidate_id: Its id in the run's ``candidates.csv`` (e.g. ``data_use:m7``).
        text: The guidance sent to the judge ("" for no guidance), at most 800 characters.
        sha256: sha256 (64 hex digits) of ``text`` as UTF-8.
        validation_mae, validation_mae_low, validation_mae_high: Validation MAE against every
            individual physician rating (scale points, >= 0) with its case-clustered 95% interval.
        validation_qwk, validation_qwk_low, validation_qwk_high: Quadratic-weighted kappa in
            [-1, 1] with its interval; None where undefined (e.g. constant ratings).
        n_pairs: (judge score, physician rating) pairs behind the validation figures.
        n_cases: Case clusters among them.
    """

    kind: GuidanceKind
    candidate_id: str
    text: str
    sha256: str
    validation_mae: float | None = None
    validation_mae_low: float | None = None
    validation_mae_high: float | None = None
    validation_qwk: float | None = None
    validation_qwk_low: float | None = None
    validation_qwk_high: float | None = None
    n_pairs: int = 0
    n_cases: int = 0


class JudgeVerdict(Record):
    """The winner against one alternative on validation: a paired MAE difference.

    Attributes:
        versus: The alternative (``best-initial``, ``no-guidance`` or ``training-median``, the
            constant predictor).
        estimate, low, high: Winner MAE minus the alternative's (negative = winner better),
            scale points, with its 95% interval; None where undefined.
        p_value: Two-sided p of the paired test (None where undefined or not recorded).
        n_pairs, n_cases: Shared pairs and case clusters behind it.
        verdict: ``better``, ``worse``, ``no distinguishable difference``, ``too few cases to
            tell`` or ``same candidate``.
        holm_survives: Whether a definitive verdict survives the Holm correction over the
            report's comparisons (None when not recorded).
    """

    versus: Literal["best-initial", "no-guidance", "training-median"]
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    n_pairs: int = 0
    n_cases: int = 0
    verdict: str
    holm_survives: bool | None = None


class AnchorTarget(Record):
    """One validation target the winner scored: the rated sample of physician-anchored estimates.

    Attributes:
        case_id: Its case (the cluster).
        target_id: The target.
        judge: The winner's mean score over the re-evaluation repeats (scale points).
        physician: The mean numeric physician rating (scale points).
    """

    case_id: str
    target_id: str
    judge: float
    physician: float


class CriterionJudge(Record):
    """Everything the judge file holds about one criterion.

    Attributes:
        criterion_id, name: The rubric's criterion.
        labels: Its ordinal scale (integers, ascending).
        winner: The guidance to judge with.
        alternatives: The best initial prompt and no guidance, for comparison.
        verdicts: The winner's paired verdicts against each alternative and the training median.
        training_median: The physicians' median rating on training targets (the constant predictor).
        no_better_than_constant: The winner's validation MAE is not below the training median's.
        drift: The semantic-drift audit's verdict, None when the run was not audited.
        anchor: The winner's validation targets with judge and physician means.
        holdout: Summary numbers of the held-out evaluation, when one was made.
        statement: Whether the targets the criterion was calibrated on carried a statement
            (K-QA's gold statement, ExpertQA's claim), which the judge prompt then shows:
            ``required`` (every one did), ``absent`` (none did) or ``either`` (some did, or a
            file written before this was recorded). New targets must match, or they are scored
            with prompts the calibration never validated.
        reference: For a criterion whose rubric entry sets ``show_reference``: whether the
            cases it was calibrated on carried a reference answer, which the judge prompt then
            shows (``required``, ``absent`` or ``either``, as ``statement``); ``either`` for
            other criteria and for files written before this was recorded.
    """

    criterion_id: str
    name: str
    labels: list[int]
    winner: JudgeGuidance
    alternatives: list[JudgeGuidance]
    verdicts: list[JudgeVerdict]
    training_median: float
    no_better_than_constant: bool
    drift: str | None = None
    anchor: list[AnchorTarget]
    holdout: dict[str, Any] | None = None
    statement: Literal["required", "absent", "either"] = "either"
    reference: Literal["required", "absent", "either"] = "either"


class SeedPolicy(Record):
    """The seeds a judge file scores with: those of the run's validation re-scoring.

    Attributes:
        run_seed: The calibration run's master seed.
        phase: The seed family (``reeval``).
        repeats: Judge calls per target and criterion (the run's ``budget.reeval_repeats``).
    """

    run_seed: int
    phase: str = "reeval"
    repeats: int

    def seeds(self, criterion_id: str) -> list[int]:
        """The seed of each repeat r < ``repeats`` for ``criterion_id``
        (:func:`evolve.judge.derive_seed`)."""
        return [derive_seed(self.run_seed, self.phase, criterion_id, r) for r in range(self.repeats)]


class JudgeFile(Record):
    """A calibrated judge, as ``judge.json`` holds it (see the package docstring).

    Attributes:
        format, version: ``evolve.judge`` and the format version (2: the judge settings name
            their prompt layout; a version-1 file is read with ``target-first``, the layout it
            was validated with).
        run_id: The calibration run.
        created_at: When the file was written (UTC, ISO 8601).
        source_run: The run folder it was written from (absolute).
        rubric_id, rubric_version: The rubric.
        rubric_sha256, protocol_sha256: sha256 of ``rubric.json`` and ``protocol.md`` as held
            in ``rubric_files``.
        rubric_files: The run's copy of the rubric folder: relative path -> text.
        judge: Judge model and decoding.
        seed_policy: Which seeds to score with.
        criteria: Criterion id -> :class:`CriterionJudge`.
    """

    format: Literal["evolve.judge"] = "evolve.judge"
    version: Literal[1, 2] = 2
    run_id: str
    created_at: str
    source_run: str
    rubric_id: str
    rubric_version: str
    rubric_sha256: str
    protocol_sha256: str
    rubric_files: dict[str, str]
    judge: JudgeSettings
    seed_policy: SeedPolicy
    criteria: dict[str, CriterionJudge]

    _bundle: RubricBundle | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _version_1_keeps_its_layout(cls, data: Any) -> Any:
        """A version-1 file was validated with the ``target-first`` prompt layout."""
        return with_legacy_layout(data, older_than=2)

    @model_validator(mode="after")
    def _files_match_their_hashes(self) -> JudgeFile:
        """``rubric_files`` holds ``rubric.json`` and ``protocol.md`` with the recorded sha256s: a
        file edited by hand would score with prompts that were never validated."""
        for name, recorded in (("rubric.json", self.rubric_sha256), ("protocol.md", self.protocol_sha256)):
            text = self.rubric_files.get(name)
            if text is None:
                raise ValueError(f"rubric_files lacks {name}")
            if hashlib.sha256(text.encode("utf-8")).hexdigest() != recorded:
                raise ValueError(f"rubric_files[{name!r}] does not match its recorded sha256 (the file was edited); "
                                 "these are not the prompts that were validated")
        return self

    def bundle(self) -> RubricBundle:
        """The rubric exactly as validated, rebuilt from ``rubric_files`` (by the rubric loaders,
        so it equals what the run loaded from its copy).

        Raises:
            RubricError: The files do not form a valid rubric folder.
        """
        if self._bundle is None:
            with tempfile.TemporaryDirectory(prefix="evolve-judge-") as tmp:
                folder = Path(tmp) / self.rubric_id
                for rel, text in self.rubric_files.items():
                    path = folder / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text, encoding="utf-8")
                self._bundle = RubricBundle.load(self.rubric_id, root=tmp)
        return self._bundle

    def guidance(self, criterion_id: str, kind: str = "winner") -> str | None:
        """The guidance to send the judge for ``criterion_id``: the ``winner``'s (default), the
        ``best-initial`` prompt's, or None for ``no-guidance`` (and for an empty text).

        Raises:
            KeyError: No such criterion in the file, or no guidance of that kind.
        """
        crit = self.criteria[criterion_id]
        found = next((g for g in (crit.winner, *crit.alternatives) if g.kind == kind), None)
        if found is None:
            raise KeyError(f"criterion {criterion_id!r} has no {kind!r} guidance in this judge file")
        return found.text or None


def _judge_path(path: Path | str) -> Path:
    path = Path(path)
    return path / JUDGE_FILE if path.is_dir() else path


def load_judge_file(path: Path | str) -> JudgeFile:
    """Read a judge file: a calibration run folder (its ``judge.json``) or a ``judge.json``.

    Raises:
        RunError: No such file, or not a valid judge file (version, format, fields); the message
            names the path and says how to make one.
    """
    file = _judge_path(path)
    if not file.is_file():
        folder = Path(path)
        if folder.is_dir() and (folder / "config.json").is_file() and not (folder / "report.json").is_file():
            raise RunError(f"{path} holds no {JUDGE_FILE}: that calibration run has not finished (it writes its "
                           f"{JUDGE_FILE} at the end). Complete it with `evolve calibrate --resume {path}`, then "
                           "pass the run folder again.")
        where = f"{path} holds no {JUDGE_FILE}" if folder.is_dir() else f"{file}: no such file"
        raise RunError(f"{where}; {_FIX} (e.g. `evolve report archives/RUN`), or pass that run's {JUDGE_FILE}.")
    try:
        return JudgeFile.model_validate_json(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        detail = _first_error(exc)
        run = file.parent
        fix = (f"`evolve report {run}` writes it again from the run's own files" if (run / "config.json").is_file()
               else f"{_FIX[0].upper()}{_FIX[1:]} again")
        raise RunError(f"{file}: not a judge file this evolve reads ({detail}). {fix}; "
                       "a file written by a newer evolve needs that evolve.") from exc


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "file"
        return f"field '{loc}': {first['msg']}"
    return str(exc)


def write_judge_file(path: Path | str, judge: JudgeFile) -> Path:
    """Write ``judge`` as JSON (indent 2) to ``path`` (a folder: its ``judge.json``), atomically.

    A judge file already there that says the same but for ``created_at`` is left as it is, so
    its bytes and sha256 stay (``evolve report`` rebuilding a run's report does not change the
    judge someone pinned).

    Returns:
        The file written (or kept).

    Raises:
        RunError: The file cannot be written (naming it).
    """
    file = _judge_path(path)
    if _same_judge(file, judge):
        return file
    try:
        atomic_write(file, judge.model_dump_json(indent=2) + "\n")
    except OSError as exc:
        raise RunError(f"{file}: cannot write the judge file ({exc}); check the folder and free space.") from exc
    return file


def _same_judge(file: Path, judge: JudgeFile) -> bool:
    """Whether ``file`` holds ``judge`` but for ``created_at`` (False when absent or unreadable)."""
    try:
        existing = JudgeFile.model_validate_json(file.read_bytes())
    except (OSError, ValueError):  # absent, unreadable, or another format: written anew
        return False
    return existing.model_copy(update={"created_at": judge.created_at}) == judge
