"""What a calibration run's report and judge file are computed from, read once for both."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from evolve.config import CalibrationConfig, load_run_config
from evolve.rubric import run_prompts_root
from evolve.runs import CalibrationFolder

if TYPE_CHECKING:
    from evolve.data import RatingPack


@dataclass(frozen=True)
class RunInputs:
    """A finished calibration run's settings, judge calls and ratings.

    Attributes:
        run_dir: The run folder.
        folder: Its typed folder.
        config: Its configuration (``prompts_root`` replaced when the caller gave one).
        root: Where its rubric is read: the run's own copy when it has one, else its
            recorded prompts root (None: the shipped rubrics).
        scores: ``scores.csv``, one row per judge call (target and case ids as text).
        pack: The rating pack it was calibrated on.
        ratings: The pack's ratings, one row per rating (:meth:`RatingPack.ratings_frame`).
    """

    run_dir: Path
    folder: CalibrationFolder
    config: CalibrationConfig
    root: Path | None
    scores: pd.DataFrame
    pack: RatingPack
    ratings: pd.DataFrame


def read_inputs(run_dir: Path | str, prompts_root: Path | str | None = None) -> RunInputs:
    """Read what :func:`~evolve.report.build_report` and
    :func:`~evolve.report.build_judge_file` compute from.

    Args:
        run_dir: The run folder.
        prompts_root: For a run made before runs kept their own rubric copy: where its rubric
            is looked up (replaces the run's recorded ``prompts_root``); a run with a copy
            always reads the copy.

    Raises:
        RunError: ``config.json`` or ``scores.csv`` is missing or unreadable.
        DataError: The pack cannot be loaded.
    """
    from evolve.data import load_pack

    run_dir = Path(run_dir)
    config = load_run_config(run_dir)
    if prompts_root is not None:
        config = config.model_copy(update={"prompts_root": Path(prompts_root)})
    folder = CalibrationFolder(run_dir)
    scores = folder.read_frame(folder.SCORES, dtype={"target_id": str, "case_id": str})
    assert scores is not None  # a required file: read_frame raises when it is missing
    root = run_prompts_root(folder.prompts_root, config.prompts_root)
    pack = load_pack(config.pack, prompts_root=root)
    return RunInputs(run_dir=run_dir, folder=folder, config=config, root=root, scores=scores, pack=pack,
                     ratings=pack.ratings_frame())
