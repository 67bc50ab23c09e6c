"""Calibrated judges: what a finished calibration hands on, read without the engine.

A calibration evolves, per criterion, the guidance a judge model is given and validates it
against physician ratings. Its result leaves the run as a *judge file* (``judge.json`` in the
run folder, :class:`JudgeFile`), written by the report (:func:`evolve.report.write_report`; so
``evolve report RUN`` writes one for a run made before judge files existed). It holds:

* the rubric exactly as the run used it: every file of the run's own rubric copy
  (``judge_prompts/<rubric_id>/``) as text, with the sha256 of ``rubric.json`` and
  ``protocol.md``. The file is therefore *self-contained*: it scores with the prompts that were
  validated even after the rubric folder it came from is edited or removed
  (:meth:`JudgeFile.bundle` rebuilds it);
* the judge model and decoding (:class:`~evolve.judge.JudgeSettings`) and the seed policy
  (:class:`SeedPolicy`: the seeds of the run's validation re-scoring, so a validation target
  scored again sends the very request the run sent, with the same prompt hash);
* per criterion (:class:`CriterionJudge`) the winner's guidance and the best initial and
  no-guidance alternatives with their validation MAE and QWK (intervals), the winner's paired
  verdicts against them and against the training median, whether it is no better than that
  constant, the drift verdict, and the *anchor*: the validation targets with the winner's
  mean score and the physicians' mean, the rated sample that physician-anchored
  (prediction-powered) estimates of :mod:`evolve.stats` rest on.

Versioning: ``format`` is ``evolve.judge`` and ``version`` an integer. A change that makes an
old reader misread a file raises the version; this evolve writes version 2 (the judge settings
name their prompt layout), reads version 1 with the layout it was validated with
(``target-first``) and refuses any other version in words (:func:`load_judge_file`), never
guessing. Fields added with defaults keep the version.

This package sits on floor 5, below the engines: reading a judge file or a run's candidates
(:func:`read_candidates`) loads neither pyribs, numba nor optuna, so ``report``, ``compare``,
``bench judge --guidance``, ``otb judge --guidance`` and ``evolve judge`` start fast.
"""

from evolve.calibrated._candidates import CandidateRecord, read_candidates
from evolve.calibrated._judge_file import (
    JUDGE_FILE,
    AnchorTarget,
    CriterionJudge,
    JudgeFile,
    JudgeGuidance,
    JudgeVerdict,
    SeedPolicy,
    load_judge_file,
    write_judge_file,
)

__all__ = [
    "JUDGE_FILE",
    "AnchorTarget",
    "CandidateRecord",
    "CriterionJudge",
    "JudgeFile",
    "JudgeGuidance",
    "JudgeVerdict",
    "SeedPolicy",
    "load_judge_file",
    "read_candidates",
    "write_judge_file",
]
