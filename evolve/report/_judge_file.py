"""The judge file of a calibration run (``judge.json``), built from its report and artifacts.

:func:`build_judge_file` gathers what a calibrated judge needs to score new outputs exactly as
validated (:class:`evolve.calibrated.JudgeFile`): the run's rubric copy, the judge settings and
seed policy of its configuration, and per criterion the report's validation figures, verdicts
and drift flag with the anchor sample (the winner's validation scores beside the physicians').
Nothing here calls a model.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from evolve.calibrated import (
    AnchorTarget,
    CriterionJudge,
    JudgeFile,
    JudgeGuidance,
    JudgeVerdict,
    SeedPolicy,
    read_candidates,
)
from evolve.outputs import BaselineRow, CalibrationReport, CriterionReport, SplitStatistics, Verdicts
from evolve.report._inputs import RunInputs, read_inputs
from evolve.rubric import RubricBundle
from evolve.stats import median_baseline, numeric_ratings

__all__ = ["build_judge_file"]

_Versus = Literal["best-initial", "no-guidance", "training-median"]
_VERSUS: tuple[tuple[str, _Versus], ...] = (
    ("best_initial", "best-initial"), ("no_guidance", "no-guidance"), ("training_median", "training-median"))
"""Report verdict key -> :attr:`JudgeVerdict.versus`."""


def _num(x: Any) -> float | None:
    """A JSON number as float; None for None and NaN."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_judge_file(run_dir: Path | str, report: CalibrationReport, *, prompts_root: Path | str | None = None) -> JudgeFile:
    """The judge file of a finished calibration run.

    Args:
        run_dir: The run folder (``archives/<run_id>``).
        report: Its report (:func:`~evolve.report.build_report`): per criterion the rows,
            ``agreement`` (validation statistics with intervals of the winner, the best initial
            prompt and no guidance), ``verdicts``, ``winner`` and ``audit``.
        prompts_root: For a run made before runs kept their own rubric copy: where its rubric is
            looked up (as :func:`~evolve.report.build_report`); a run with a copy reads the copy.

    Returns:
        The :class:`~evolve.calibrated.JudgeFile`; criteria without a winner are left out.

    Raises:
        RunError: Missing artifacts (``config.json``, ``scores.csv``, ``candidates.csv``, the pack).
        RubricError: The run's rubric cannot be loaded.
    """
    return judge_file_of(read_inputs(run_dir, prompts_root), report)


def judge_file_of(inputs: RunInputs, report: CalibrationReport) -> JudgeFile:
    """:func:`build_judge_file` of a run's inputs read once (:func:`read_inputs`)."""
    run_dir, config, pack, scores, ratings = inputs.run_dir, inputs.config, inputs.pack, inputs.scores, inputs.ratings
    rubric_id = report.rubric.id
    bundle = RubricBundle.load(rubric_id, root=inputs.root)
    files = {rel: data.decode("utf-8") for rel, data in bundle.files().items()}
    has_statement = {t.target_id: bool(t.statement) for t in pack.targets}
    has_reference = {c.case_id: bool(c.reference_answer) for c in pack.cases}
    texts = {c.candidate_id: c.text for c in read_candidates(run_dir, required=("candidate_id", "criterion", "text"))}
    criteria = {}
    for cid, entry in report.criteria.items():
        crit_scores = scores[scores["criterion"] == cid]
        crit_ratings = ratings[ratings["criterion"] == cid]
        crit = bundle.rubric.criterion(cid)
        shown = _carried(crit_scores["case_id"], has_reference) if crit.show_reference else "either"
        criteria[cid] = _criterion(cid, entry, crit_scores, crit_ratings, texts, list(crit.scores),
                                   _carried(crit_scores["target_id"], has_statement), shown)
    return JudgeFile(
        run_id=config.run_id, created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        source_run=str(run_dir.absolute()), rubric_id=rubric_id, rubric_version=bundle.rubric.version,
        rubric_sha256=_sha(files["rubric.json"]), protocol_sha256=_sha(files["protocol.md"]), rubric_files=files,
        judge=config.judge, seed_policy=SeedPolicy(run_seed=config.seed, repeats=config.budget.reeval_repeats),
        criteria=criteria,
    )


def _criterion(cid: str, entry: CriterionReport, scores: pd.DataFrame, ratings: pd.DataFrame, texts: dict[str, str],
               labels: list[int], statement: Literal["required", "absent", "either"],
               reference: Literal["required", "absent", "either"]) -> CriterionJudge:
    """One criterion of the judge file from its report entry, scores and ratings."""
    reeval = scores[scores["phase"] == "reeval"]
    train_targets = set(reeval.loc[reeval["split"] == "train", "target_id"])
    median = median_baseline(ratings[ratings["target_id"].isin(train_targets)])
    best, none = entry.row("initial"), entry.row("no-guidance")
    winner_id = entry.winner.candidate_id
    stats = entry.agreement
    winner = _guidance("winner", winner_id, entry.winner.text, stats.get("winner"))
    alternatives = [_guidance("best-initial", best.candidate_id, texts.get(best.candidate_id, ""),
                              stats.get("best-initial"))] if best is not None else []
    if none is not None:
        alternatives.append(_guidance("no-guidance", none.candidate_id, "", stats.get("no-guidance")))
    flag = entry.no_better_than_constant
    return CriterionJudge(
        criterion_id=cid, name=entry.name or cid, labels=labels, winner=winner, alternatives=alternatives,
        verdicts=_verdicts(entry.verdicts), training_median=median,
        no_better_than_constant=bool(flag) if flag is not None else _no_better(entry.rows),
        drift=entry.audit.flag if entry.audit is not None else None, anchor=_anchor(reeval, winner_id, ratings),
        holdout=entry.holdout.model_dump() if entry.holdout is not None else None, statement=statement,
        reference=reference,
    )


def _carried(ids: pd.Series, has: dict[str, bool]) -> Literal["required", "absent", "either"]:
    """Whether every, no or some target (or case) the criterion was judged on carried a
    statement (or reference answer): ``ids`` of the judged rows, ``has`` per id."""
    seen = {has.get(str(i), False) for i in ids.unique()}
    return "required" if seen == {True} else "absent" if seen == {False} else "either"


def _guidance(kind: Literal["winner", "best-initial", "no-guidance"], candidate_id: str, text: str,
              stats: SplitStatistics | None) -> JudgeGuidance:
    """A guidance text with its validation MAE and QWK (case-clustered intervals) from the report."""
    val = stats.validation if stats is not None else {}
    mae, qwk = val.get("mae"), val.get("qwk")
    return JudgeGuidance(
        kind=kind, candidate_id=candidate_id, text=text, sha256=_sha(text),
        validation_mae=_num(mae.estimate if mae else None), validation_mae_low=_num(mae.low if mae else None),
        validation_mae_high=_num(mae.high if mae else None), validation_qwk=_num(qwk.estimate if qwk else None),
        validation_qwk_low=_num(qwk.low if qwk else None), validation_qwk_high=_num(qwk.high if qwk else None),
        n_pairs=mae.n_pairs if mae else 0, n_cases=mae.n_clusters if mae else 0,
    )


def _verdicts(verdicts: Verdicts) -> list[JudgeVerdict]:
    """The report's paired verdicts of one criterion (those it holds)."""
    out = []
    for key, versus in _VERSUS:
        v = getattr(verdicts, key)
        if v is None:
            continue
        out.append(JudgeVerdict(
            versus=versus, estimate=_num(v.estimate), low=_num(v.low), high=_num(v.high), p_value=_num(v.p_value),
            n_pairs=v.n_pairs, n_cases=v.n_cases, verdict=v.verdict, holm_survives=v.holm_survives,
        ))
    return out


def _no_better(rows: list[BaselineRow]) -> bool:
    """The winner's validation MAE is not below the training median's (False when either is undefined)."""
    by_kind = {r.kind: r.validation.mae for r in rows}
    win, med = by_kind.get("winner"), by_kind.get("training-median")
    return win is not None and med is not None and win >= med - 1e-12


def _anchor(reeval: pd.DataFrame, winner_id: str, ratings: pd.DataFrame) -> list[AnchorTarget]:
    """Per validation target the winner scored: its mean score over the repeats and the mean
    numeric physician rating (targets lacking either are left out)."""
    calls = reeval[(reeval["candidate_id"] == winner_id) & (reeval["split"] == "validation")
                   & (reeval["outcome"] == "score")]
    scored = calls.assign(score=pd.to_numeric(calls["score"], errors="coerce")).dropna(subset=["score"])
    by_target = scored.groupby("target_id")  # two plain aggregations: a named .agg() costs ten times more
    judge = pd.DataFrame({"case_id": by_target["case_id"].first(), "judge": by_target["score"].mean()})
    physician = numeric_ratings(ratings).groupby("target_id")["score"].mean().rename("physician")
    both = judge.join(physician, how="inner").reset_index()
    return [AnchorTarget(case_id=str(r.case_id), target_id=str(r.target_id), judge=float(r.judge),
                         physician=float(r.physician)) for r in both.itertuples(index=False)]
