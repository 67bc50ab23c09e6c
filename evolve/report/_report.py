"""Calibration report (``report.md`` + ``report.json``), rebuilt from a run's saved artifacts.

Nothing here calls a model: every number comes from ``scores.csv``, ``candidates.csv``, the
pack's ratings and the split manifests, so a report can be rebuilt - and checked - at any time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from evolve.calibrated import write_judge_file
from evolve.config import ArchiveSettings
from evolve.markdown import count_noun, format_interval, md_code, md_code_block, md_inline
from evolve.outputs import (
    REPORT_VERSION,
    BaselineRow,
    CalibrationReport,
    Ceiling,
    Comparisons,
    CriterionReport,
    JudgeAsRater,
    PairedVerdict,
    StatInterval,
    Table5Row,
)
from evolve.report._frames import rows_by
from evolve.report._holm import mark_holm
from evolve.report._inputs import RunInputs, read_inputs
from evolve.report._judge_file import judge_file_of
from evolve.report._pages import calibration_html
from evolve.report._scoring import HOLDOUT_COLUMNS, holdout_columns, holdout_entries, render_holdout
from evolve.report._settings import N_BOOT, ReportSettings, report_settings
from evolve.report._usage import prefix_cached_share, render_prefix_share, render_usage, usage_report
from evolve.rubric import Rubric, load_rubric, snapshot_changes
from evolve.runs import CalibrationFolder, run_warnings
from evolve.stats import (
    MIN_CASES,
    STATISTICS,
    Agreement,
    IndexedRatings,
    Interval,
    PairedDifference,
    agreement,
    agreement_table,
    constant_agreement,
    constant_agreement_table,
    judge_agreement_table,
    judge_as_rater,
    judge_pairs,
    macro_mean,
    median_baseline,
    numeric_ratings,
    paired_mae_difference,
    rater_ceiling,
    rater_pairs,
)

TABLE5_COLUMNS = [
    "number", "criterion", "name",
    "no_guidance_train_mae", "no_guidance_val_mae",
    "best_initial", "best_initial_train_mae", "best_initial_val_mae",
    "median_train_mae", "median_val_mae",
    "evolved", "evolved_origin", "evolved_train_mae", "evolved_val_mae", "delta_val_mae",
    "evolved_val_repeat_sd", "evolved_val_coverage", "evolved_val_signed_error",
    "ceiling_val_mae", "ceiling_val_pairs", "evolved_val_mae_ceiling_targets", "evolved_val_pairs_ceiling_targets",
    "n_train_targets", "n_val_targets", "drift",
    "vs_initial_diff", "vs_initial_low", "vs_initial_high", "vs_initial_verdict",
    "vs_none_diff", "vs_none_low", "vs_none_high", "vs_none_verdict",
    "vs_median_diff", "vs_median_low", "vs_median_high", "vs_median_verdict", "no_better_than_constant",
    "vs_initial_p", "vs_initial_holm_survives", "vs_none_p", "vs_none_holm_survives", "vs_median_p",
    "vs_median_holm_survives",
    "selection", "attempts", "accepted", "pruned", "rejected", "judge_calls", "judge_cache_hits", "accepted_asked",
    *HOLDOUT_COLUMNS,
]
"""Columns of ``table5.csv`` (one row per criterion, then a ``macro`` row of column means).

``vs_*``: the winner minus the best initial prompt / no guidance / the training median on
validation (paired; ``_p`` the sign-flip p-value, ``_holm_survives`` whether a better/worse
verdict survives Holm's correction over every paired comparison of the report).
``no_better_than_constant``: the winner's validation MAE is not below the training median's.
``judge_calls``: distinct judge requests the criterion needed (what its protocol costs, the same
after a kill and resume; :func:`repeated_requests`); ``judge_cache_hits``: answers that repeat one
of them (the re-evaluation's training calls of the finalists, say), which the response cache
supplies, so the two add up to the judge answers the criterion used. What the run's processes
paid is in the report's usage section (from the journal). ``accepted_asked``: the accepted budget (``budget.accepted``); an
``accepted`` below it is stated as a warning (:func:`shortfall_warnings`)."""

VERDICTS = (("best_initial", "best initial"), ("no_guidance", "no guidance"), ("training_median", "training median"))
"""The paired verdicts of each criterion (key of ``verdicts`` in the report, label): the winner
minus each of these on validation."""

ALPHA = 0.05
"""Level of every paired test of the report (its intervals are 95%); Holm's correction keeps a
better/worse verdict only when its adjusted p-value is below it."""

AGREEMENT_COLUMNS = [
    "criterion", "row", "candidate_id", "split", "statistic", "estimate", "low", "high",
    "n_valid", "n_boot", "n_clusters", "n_pairs",
]
"""Columns of ``agreement.csv`` (one row per criterion x row x split x statistic)."""


def _fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _row(label: str, kind: str, candidate_id: str, tr: Agreement, va: Agreement, calls: int, ptok: int, ctok: int,
         cached: int = 0) -> dict:
    return {
        "label": label,
        "kind": kind,
        "candidate_id": candidate_id,
        "train": tr.model_dump(),
        "validation": va.model_dump(),
        "calls": calls,
        "cached_calls": cached,
        "prompt_tokens": ptok,
        "completion_tokens": ctok,
    }


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _stats(pairs: pd.DataFrame, labels: list[int], seed: int, n_boot: int) -> dict:
    """All agreement statistics with case-clustered 95% intervals, JSON-able (NaN -> None)."""
    if pairs.empty:
        return {}
    return _records(agreement_table(pairs[["case_id", "judge", "rater"]], labels, n_boot=n_boot, seed=seed))


def _judge_stats(scores: pd.DataFrame, ratings: IndexedRatings, labels: list[int], seed: int, n_boot: int) -> dict:
    """:func:`_stats` of the pairs of one candidate's judge calls with the ratings."""
    table = judge_agreement_table(scores, ratings, labels, n_boot=n_boot, seed=seed)
    return _records(table) if table["mae"].n_pairs else {}


def _records(table: dict[str, Interval]) -> dict:
    """An agreement table's intervals as JSON-able records (NaN -> None)."""
    return {
        name: {
            "estimate": _nan_to_none(iv.estimate), "low": _nan_to_none(iv.low), "high": _nan_to_none(iv.high),
            "n_valid": iv.n_valid, "n_boot": iv.n_boot, "n_clusters": iv.n_clusters, "n_pairs": iv.n_pairs,
        }
        for name, iv in table.items()
    }


def _constant_stats(value: float, ratings: pd.DataFrame, labels: list[int], seed: int, n_boot: int) -> dict:
    """Error statistics of a constant predictor (the training median, possibly a half point).

    Chance-corrected and rank statistics are undefined for a constant and are left out.
    """
    r = numeric_ratings(ratings)
    if r.empty:
        return {}
    pairs = pd.DataFrame({"case_id": r["case_id"].to_numpy(), "judge": float(value), "rater": r["score"].to_numpy()})
    return _records(constant_agreement_table(value, pairs, labels, n_boot=n_boot, seed=seed))


def _read_audit(run_dir: Path) -> dict[str, dict]:
    """Per-criterion drift verdicts from ``audit.json`` (``evolve audit``), if it exists."""
    data = CalibrationFolder(run_dir).read_json(CalibrationFolder.AUDIT_JSON, optional=True)
    if not isinstance(data, dict):
        return {}
    return {c["criterion"]: c for c in data.get("criteria", []) if isinstance(c, dict) and "criterion" in c}


def build_report(run_dir: Path, *, n_boot: int = N_BOOT, seed: int = 0,
                 prompts_root: Path | str | None = None, holdout: bool = True) -> CalibrationReport:
    """Compute the report of a finished run folder.

    Returns:
        The typed report (:class:`~evolve.outputs.CalibrationReport`, what ``report.json`` holds):
        ``version``, ``run_id``, ``pack``, ``rubric``, ``criteria`` (per criterion ``rows``,
        ``ceiling``, ``evolution``, ``winner`` ...).
        Each row holds train and validation :class:`Agreement` of one of: ``no-guidance``,
        ``initial`` (each initial candidate; ``best_initial`` marks the one with the lowest
        evolution-phase training MAE), ``training-median``, ``winner``.

        Also ``"table5"`` (one record per criterion, :data:`TABLE5_COLUMNS`), ``"macro"``
        (column means over criteria, with how many criteria each rests on), per criterion
        ``"agreement"`` (every statistic of :mod:`evolve.stats` with its case-clustered
        bootstrap interval, for each baseline row and the physician ceiling, train and
        validation), ``"exclusions"`` (structurally inapplicable pairs) and ``"audit"`` (drift
        verdicts, when ``audit.json`` exists) and ``"usage"`` (every call of every process of the
        run from the journal, :func:`~evolve.report.usage_report`). ``"rubric"`` holds the id,
        the version, ``run_copy`` (the rubric was read from the run's own copy,
        ``judge_prompts/``) and ``notes`` (:func:`~evolve.rubric.snapshot_changes`: the original
        rubric has changed since the run).

    Args:
        run_dir: The run folder.
        n_boot: Bootstrap replicates per interval.
        seed: Seed of the bootstrap (the same seed gives the same intervals).
        prompts_root: For a run made before runs kept their own rubric copy: where its rubric is
            looked up before the shipped rubrics (replaces the run's recorded ``prompts_root``).
            A run with a copy (``<run>/judge_prompts``) always reads the copy.
        holdout: Add the held-out results of ``holdout/summary.json`` (``--evaluate-holdout``);
            False for the report a held-out evaluation starts from (it rewrites that file).

    Raises:
        RunError: Missing artifacts.
    """
    return _report_of(read_inputs(run_dir, prompts_root), n_boot=n_boot, seed=seed, holdout=holdout)


def _report_of(inputs: RunInputs, *, n_boot: int, seed: int, holdout: bool) -> CalibrationReport:
    """:func:`build_report` of a run's inputs read once (:func:`read_inputs`)."""
    run_dir, folder, config, root, pack = inputs.run_dir, inputs.folder, inputs.config, inputs.root, inputs.pack
    scores, ratings = inputs.scores, inputs.ratings
    cands = folder.read_frame(folder.CANDIDATES, keep_default_na=False, dtype=str)
    assert cands is not None  # a required file
    rubric = load_rubric(pack.manifest.rubric.id, root=root, version=pack.manifest.rubric.version)
    audit = _read_audit(run_dir)
    exclusions = folder.read_frame(folder.EXCLUSIONS, optional=True)
    exclusions = pd.DataFrame() if exclusions is None else exclusions
    report: dict = {
        "version": REPORT_VERSION,
        "run_id": config.run_id,
        "pack": pack.manifest.name,
        "rubric": {"id": pack.manifest.rubric.id, "version": pack.manifest.rubric.version,
                   "run_copy": root == folder.prompts_root, "notes": snapshot_changes(folder.prompts_root)},
        "conditions": list(config.conditions) if config.conditions is not None else None,
        "bootstrap": {"n_boot": n_boot, "seed": seed, "confidence": 0.95, "cluster": "case_id"},
        "criteria": {},
        "exclusions": exclusions.to_dict(orient="records"),
        "usage": usage_report(folder.journal()),
        "prefix_cached_share": prefix_cached_share(scores),
    }
    for criterion, crit_scores in scores.groupby("criterion", sort=False):
        criterion = str(criterion)
        if not (cands.loc[cands["criterion"] == criterion, "selected"] == "True").any():
            report.setdefault("without_winner", []).append(criterion)  # no candidate reached min_coverage
            continue
        entry = _criterion_report(criterion, crit_scores, cands, ratings, rubric, config.archive, n_boot, seed)
        entry["evolution"]["accepted_asked"] = config.budget.accepted
        if criterion in audit:
            entry["audit"] = audit[criterion]
        report["criteria"][criterion] = entry
    apply_holm(report)
    for criterion, held in (holdout_entries(folder / folder.HOLDOUT) if holdout else {}).items():  # --evaluate-holdout
        if criterion in report["criteria"]:
            report["criteria"][criterion]["holdout"] = held
    for criterion, entry in report["criteria"].items():
        report.setdefault("table5", []).append(_table5_record(criterion, entry))
    report["macro"] = _macro(report.get("table5", []))
    typed = CalibrationReport.model_validate(report)
    return typed.model_copy(update={"warnings": [*run_warnings(folder.journal()), *shortfall_warnings(typed)]})


def shortfall_warnings(report: CalibrationReport) -> list[str]:
    """One warning per criterion that ended with fewer accepted mutants than asked: every
    mutation attempt was spent (rejected, pruned by racing or below min_coverage) before
    ``budget.accepted`` was reached, so the search was smaller than the run's budget says."""
    out = []
    for criterion, c in report.criteria.items():
        e = c.evolution
        if e.accepted_asked is None or e.accepted >= e.accepted_asked:
            continue
        why = ", ".join(f"{n} {k}" for k, n in sorted(e.status_counts.items()) if k != "accepted")
        n = e.accepted
        out.append(f"criterion {_labelled(criterion, c.name)}: {count_noun(n, 'accepted mutant')} of the "
                   f"{e.accepted_asked} asked - all {e.attempts} mutation attempts were spent"
                   f"{f' ({why})' if why else ''}; raise --max-attempts (or budget.shared_attempts) for the full "
                   "search, or read this winner as coming from a smaller one.")
    return out


def repeated_requests(scores: pd.DataFrame) -> pd.Series:
    """Which judge answers of a run repeat a request an earlier row of ``scores`` already made
    (same ``prompt_hash`` and ``seed``), in the run's order: the response cache answers those.

    Counting calls this way makes them a property of the protocol: the same whether the run
    went uninterrupted or was killed and resumed (the killed process's calls come back as cache
    hits), and the same when an earlier run's cache already held some answers. What a run's
    processes really paid is in its journal (the report's usage section).

    Returns:
        A boolean Series aligned with ``scores`` (False for rows without a prompt hash).
    """
    if "prompt_hash" not in scores or "seed" not in scores:
        return scores["cached"].astype(str).eq("True")  # runs made before prompt hashes were kept
    hashed = scores["prompt_hash"].astype(str).str.len().gt(0) & scores["prompt_hash"].notna()
    return scores.duplicated(subset=["prompt_hash", "seed"], keep="first") & hashed


def _criterion_report(criterion: str, crit_scores: pd.DataFrame, cands: pd.DataFrame, ratings: pd.DataFrame,
                      rubric: Rubric, archive: ArchiveSettings, n_boot: int, seed: int) -> dict:
    """One criterion's entry of the report: Table 5 rows, ceiling, evolution counts, winner,
    agreement with intervals (see :func:`build_report`)."""
    ccands = cands[cands["criterion"] == criterion]
    crit_scores = crit_scores.assign(repeated_request=repeated_requests(crit_scores))
    reeval = crit_scores[crit_scores["phase"] == "reeval"]
    evo = crit_scores[crit_scores["phase"] == "evolution"]
    targets = {
        split: set(reeval.loc[reeval["split"] == split, "target_id"]) for split in ("train", "validation")
    }
    crit_ratings = ratings[ratings["criterion"] == criterion]
    split_ratings = {s: crit_ratings[crit_ratings["target_id"].isin(t)] for s, t in targets.items()}
    indexed = {s: IndexedRatings(r) for s, r in split_ratings.items()}  # joined with a dozen candidates each
    calls, evo_calls = rows_by(reeval, ["candidate_id", "split"]), rows_by(evo, ["candidate_id", "split"])
    by_candidate = reeval.groupby("candidate_id", sort=False)
    sizes, sums = by_candidate.size().to_dict(), by_candidate[["prompt_tokens", "completion_tokens", "repeated_request"]].sum()
    spent = {cid: (int(sizes[cid]), int(ptok), int(ctok), int(repeated))
             for cid, (ptok, ctok, repeated) in zip(sums.index, sums.to_numpy().tolist(), strict=True)}

    def ag(cid: str, split: str) -> Agreement:
        return agreement(calls(cid, split), indexed[split])

    def cost(cid: str) -> tuple[int, int, int, int]:
        """Re-evaluation calls, prompt and completion tokens, and calls the cache answered."""
        return spent.get(cid, (0, 0, 0, 0))

    rows = []
    none_id = ccands.loc[ccands["origin"] == "none", "candidate_id"].iloc[0]
    rows.append(_row("no guidance", "no-guidance", none_id, ag(none_id, "train"), ag(none_id, "validation"), *cost(none_id)))
    inits = ccands[ccands["origin"] == "initial"]["candidate_id"].tolist()
    evo_mae = {
        cid: agreement(evo_calls(cid, "train"), indexed["train"]).mae
        for cid in inits
    }
    ranked = [cid for cid in inits if evo_mae[cid] is not None]
    chosen = ccands.loc[ccands.get("best_initial", pd.Series(dtype=str)).eq("True"), "candidate_id"].tolist() \
        if "best_initial" in ccands else []
    # the engine records the best initial prompt by the run's selection rule; runs made before
    # it did fall back to the lowest evolution training MAE
    best_init = chosen[0] if chosen else (min(ranked, key=lambda c: (evo_mae[c], c)) if ranked else None)
    for cid in inits:
        row = _row(f"initial {cid.split(':', 1)[1]}", "initial", cid, ag(cid, "train"), ag(cid, "validation"), *cost(cid))
        row["best_initial"] = cid == best_init
        rows.append(row)
    med = median_baseline(split_ratings["train"])
    rows.append(
        _row(
            f"training median ({med:g})", "training-median", "", constant_agreement(med, split_ratings["train"]),
            constant_agreement(med, split_ratings["validation"]), 0, 0, 0,
        )
    )
    win = ccands[ccands["selected"] == "True"].iloc[0]
    rows.append(_row(f"evolved winner {win['candidate_id'].split(':', 1)[1]}", "winner", win["candidate_id"],
                     ag(win["candidate_id"], "train"), ag(win["candidate_id"], "validation"), *cost(win["candidate_id"])))
    ceiling = {}
    for split in ("train", "validation"):
        mae, n = rater_ceiling(indexed[split])
        # the winner's MAE on the same targets (those with >= 2 physicians), so the two compare
        loo = judge_as_rater(calls(win["candidate_id"], split), indexed[split])
        pairs = int(loo["judge_pairs"].sum())
        judge_mae = float((loo["judge_mae"].fillna(0) * loo["judge_pairs"]).sum() / pairs) if pairs else None
        ceiling[split] = {"mae": mae, "n_pairs": n, "judge_mae_same_targets": judge_mae, "judge_pairs": pairs,
                          "judge_as_rater": loo.astype(object).where(loo.notna(), None).to_dict(orient="records"),
                          "why_none": _no_ceiling_reason(split_ratings[split]) if mae is None else None}
    mutations = ccands[ccands["origin"] == "mutation"]
    status_counts = mutations["status"].value_counts().to_dict()
    entry: dict = {
        "rows": rows,
        "ceiling": ceiling,
        "n_targets": {s: len(t) for s, t in targets.items()},
        "n_raters": len({r for frame in split_ratings.values() for r in frame["rater_id"]}),  # of these targets
        "evolution": {
            "attempts": int(len(mutations)),
            "accepted": int(status_counts.get("accepted", 0)),
            "pruned": int(status_counts.get("pruned", 0)),
            "rejected": int(len(mutations) - status_counts.get("accepted", 0) - status_counts.get("pruned", 0)),
            "calls_saved": int(pd.to_numeric(mutations.get("calls_saved", pd.Series(dtype=str)), errors="coerce").fillna(0).sum()),
            "status_counts": {k: int(v) for k, v in status_counts.items()},
            "elites": int((ccands["elite"] == "True").sum()),
            "archive_cells": archive.cells,
            "judge_calls": int(len(evo)),
            "judge_cache_hits": int(evo["repeated_request"].sum()),
            "mutation_prompt_tokens": int(pd.to_numeric(mutations["mutation_prompt_tokens"]).sum()),
            "mutation_completion_tokens": int(pd.to_numeric(mutations["mutation_completion_tokens"]).sum()),
        },
        "winner": {
            "candidate_id": win["candidate_id"],
            "origin": win["origin"],
            "parent_id": win["parent_id"],
            "evolution_train_mae": float(win["train_mae"]) if win["train_mae"] else None,
            "text": win["text"],
        },
        "verdicts": _verdicts(calls, indexed["validation"], none_id, best_init, win["candidate_id"], med, n_boot,
                              seed),
        "selection": _selection_of(ccands),
        "calls": int(len(crit_scores)),
        "cached_calls": int(crit_scores["repeated_request"].sum()),
        "calls_made": int((~crit_scores["repeated_request"]).sum()),
        "prefix_cached_share": _prefix_share(crit_scores),
        "prompt_tokens": int(crit_scores["prompt_tokens"].sum()),
        "completion_tokens": int(crit_scores["completion_tokens"].sum()),
    }
    crit = rubric.criterion(criterion)
    labels = list(crit.scores)
    entry["number"], entry["name"] = crit.number, crit.name
    entry["no_better_than_constant"] = _no_better_than_constant(rows)
    entry["archive"] = {"length_bins": archive.length_bins, "bias_bins": archive.bias_bins,
                        "bias_range": float(crit.scale_range)}
    pruned = ccands.loc[ccands["status"] == "pruned", "candidate_id"]
    partial = {cid: agreement(evo_calls(cid, "train"), indexed["train"]).mae for cid in pruned}
    entry["candidates"] = _candidate_records(ccands, partial)
    winner_val = calls(win["candidate_id"], "validation")
    entry["confusion"] = _confusion(judge_pairs(winner_val, indexed["validation"]), labels)
    stats: dict = {}
    for r in rows:
        if r["kind"] == "initial" and not r.get("best_initial"):
            continue
        key = {"initial": "best-initial"}.get(r["kind"], r["kind"])
        stats[key] = {}
        for split in ("train", "validation"):
            if r["kind"] == "training-median":
                stats[key][split] = _constant_stats(med, split_ratings[split], labels, seed, n_boot)
                continue
            stats[key][split] = _judge_stats(calls(r["candidate_id"], split), indexed[split], labels, seed, n_boot)
    stats["ceiling"] = {
        split: _stats(rater_pairs(split_ratings[split]), labels, seed, n_boot) for split in ("train", "validation")
    }
    entry["agreement"] = stats
    return entry


def _no_better_than_constant(rows: list[dict]) -> bool | None:
    """Whether the winner's validation MAE is not below the training median's (a judge that
    does no better than always answering one number); None when either MAE is undefined."""
    by_kind = {r["kind"]: r["validation"]["mae"] for r in rows if r["kind"] in ("winner", "training-median")}
    win, med = by_kind.get("winner"), by_kind.get("training-median")
    return None if win is None or med is None else bool(win >= med - 1e-12)


def _no_ceiling_reason(ratings: pd.DataFrame) -> str:
    """Why no physician-vs-physician ceiling exists for these ratings (one criterion, one split)."""
    per_target = ratings.groupby("target_id")["rater_id"].nunique() if len(ratings) else pd.Series(dtype=int)
    if per_target.empty:
        return "no target has a physician rating"
    if int(per_target.max()) < 2:
        return "each target was rated by one rater, so physicians cannot be compared with each other"
    return ("no target has numeric scores from two raters (the other ratings of the targets rated twice are "
            "not evaluable)")


def _candidate_records(ccands: pd.DataFrame, partial: dict[str, float | None]) -> list[dict]:
    """Every candidate of a criterion in attempt order, for the figures: id, parent, origin,
    status, whether it is an elite or the winner, length (characters), training MAE and signed
    error (``None`` where it was never scored). A mutant racing pruned has the MAE of the
    training targets it was judged on before it was stopped (``partial``)."""
    def num(x: str) -> float | None:
        return float(x) if x not in ("", None) else None

    return [{"candidate_id": r["candidate_id"], "parent_id": r["parent_id"], "origin": r["origin"],
             "status": r["status"], "seq": int(r["seq"]) if r["seq"] else 0, "elite": r["elite"] == "True",
             "selected": r["selected"] == "True", "length": int(r["length"] or 0),
             "train_mae": num(r["train_mae"]) if r["train_mae"] else partial.get(r["candidate_id"]),
             "train_signed_error": num(r["train_signed_error"])} for _, r in ccands.iterrows()]


def _confusion(pairs: pd.DataFrame, labels: list[int]) -> dict:
    """Judge x physician counts on validation: ``matrix[i][j]`` = pairs with physician score
    ``labels[i]`` and judge score ``labels[j]`` (each judge call against each rating)."""
    position = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for rater, judge in zip(pairs["rater"].astype(int).tolist(), pairs["judge"].round().astype(int).tolist(), strict=True):
        if rater in position and judge in position:  # as scikit-learn's confusion_matrix: other values are not counted
            matrix[position[rater]][position[judge]] += 1
    return {"labels": labels, "matrix": matrix, "n_pairs": int(len(pairs))}


def _prefix_share(scores: pd.DataFrame) -> float | None:
    """Share of prompt tokens of the calls sent to the endpoint (not the response cache) that
    the server served from its prefix cache; None when no call reported it (runs before
    ``cached_prompt_tokens`` was recorded, endpoints that do not report it)."""
    return prefix_cached_share(scores)


def _verdicts(calls: Callable[[str, str], pd.DataFrame], ratings: IndexedRatings, none_id: str, best_init: str | None,
              winner: str, median: float, n_boot: int, seed: int) -> dict:
    """Winner minus best initial, minus no guidance and minus the training median on validation:
    paired MAE differences with a sign-flip test over case clusters (:func:`~evolve.stats.paired_mae_difference`),
    the interval that inverts it and a verdict (``None`` where undefined). The training median is
    scored on the winner's own calls (each numeric call replaced by the constant), so the pairs
    are the same. ``holm_p`` / ``holm_survives`` are filled by :func:`apply_holm` once every
    criterion is in. ``calls(candidate_id, split)``: a candidate's re-evaluation calls."""
    mine = calls(winner, "validation")

    def versus(other: pd.DataFrame) -> dict:
        return _verdict_record(paired_mae_difference(mine, other, ratings, n_boot=n_boot, seed=seed))

    def candidate(other: str | None) -> dict | None:
        if other is None:
            return None
        if other == winner:
            return {"estimate": 0.0, "low": 0.0, "high": 0.0, "n_pairs": 0, "n_cases": 0, "verdict": "same candidate",
                    "p_value": None, "method": "", "holm_p": None, "holm_survives": None}
        return versus(calls(other, "validation"))

    constant = mine.assign(score=float(median))  # the constant predictor on the winner's calls
    return {"best_initial": candidate(best_init), "no_guidance": candidate(none_id), "training_median": versus(constant)}


def _verdict_record(d: PairedDifference) -> dict:
    return {"estimate": _nan_to_none(d.estimate), "low": _nan_to_none(d.low), "high": _nan_to_none(d.high),
            "n_pairs": d.n_pairs, "n_cases": d.n_cases, "verdict": d.verdict, "p_value": d.p_value,
            "method": d.method, "holm_p": None, "holm_survives": None}


def apply_holm(report: dict, alpha: float = ALPHA) -> dict:
    """Holm's correction over every paired comparison of a report (Holm 1979).

    Fills each verdict's ``holm_p`` (Holm-adjusted p-value; None without a p-value) and
    ``holm_survives`` (for a ``better``/``worse`` verdict: whether ``holm_p < alpha``; None for
    any other verdict), and sets ``report["comparisons"]``: ``n`` (comparisons with a p-value),
    ``correction``, ``alpha``, ``definitive`` (better/worse verdicts) and ``not_surviving``.
    Works in place and returns the report.
    """
    found = [v for c in report.get("criteria", {}).values() for key, _ in VERDICTS
             if (v := c.get("verdicts", {}).get(key))]
    report["comparisons"] = mark_holm(found, alpha)
    return report


def _selection_of(ccands: pd.DataFrame) -> dict:
    """Which rule chose the winner and what the finalists scored (robust selection only)."""
    if "finalist" not in ccands or not ccands["finalist"].eq("True").any():
        return {"rule": "paper"}
    fin = ccands[ccands["finalist"] == "True"]
    return {"rule": "robust", "finalists": [
        {"candidate_id": r["candidate_id"], "origin": r["origin"],
         "finalist_mae": float(r["finalist_mae"]) if r["finalist_mae"] else None,
         "pooled_mae": float(r["pooled_mae"]) if r["pooled_mae"] else None} for _, r in fin.iterrows()]}


def _cov(agreement: Agreement) -> str:
    """Coverage, and what the rest of the calls were: ``0.83 (2 n.e., 1 failed)``."""
    text = f"{agreement.coverage:.2f}"
    rest = [f"{n} {label}" for n, label in ((agreement.n_not_evaluable, "n.e."), (agreement.n_model_failures, "failed"))
            if n]
    return f"{text} ({', '.join(rest)})" if rest else text


def _table5_record(criterion: str, entry: dict) -> dict:
    """One Table 5 row: best initial vs evolved, train and validation MAE, baselines (consilium paper, calibration)."""
    by_kind = {r["kind"]: r for r in entry["rows"] if r["kind"] != "initial"}
    best = next((r for r in entry["rows"] if r.get("best_initial")), None)
    win = by_kind["winner"]

    def mae(row: dict | None, split: str) -> float | None:
        return None if row is None else row[split]["mae"]

    delta = None
    win_mae, best_mae = mae(win, "validation"), mae(best, "validation")
    if win_mae is not None and best_mae is not None:
        delta = win_mae - best_mae
    audit = entry.get("audit") or {}
    return {
        "number": entry.get("number"),
        "criterion": criterion,
        "name": entry.get("name", ""),
        "no_guidance_train_mae": mae(by_kind["no-guidance"], "train"),
        "no_guidance_val_mae": mae(by_kind["no-guidance"], "validation"),
        "best_initial": best["candidate_id"] if best else None,
        "best_initial_train_mae": mae(best, "train"),
        "best_initial_val_mae": mae(best, "validation"),
        "median_train_mae": mae(by_kind["training-median"], "train"),
        "median_val_mae": mae(by_kind["training-median"], "validation"),
        "evolved": win["candidate_id"],
        "evolved_origin": entry["winner"]["origin"],
        "evolved_train_mae": mae(win, "train"),
        "evolved_val_mae": mae(win, "validation"),
        "delta_val_mae": delta,
        "evolved_val_repeat_sd": win["validation"]["repeat_sd"],
        "evolved_val_coverage": win["validation"]["coverage"],
        "evolved_val_signed_error": win["validation"]["signed_error"],
        "ceiling_val_mae": entry["ceiling"]["validation"]["mae"],
        "ceiling_val_pairs": entry["ceiling"]["validation"]["n_pairs"],
        "evolved_val_mae_ceiling_targets": entry["ceiling"]["validation"].get("judge_mae_same_targets"),
        "evolved_val_pairs_ceiling_targets": entry["ceiling"]["validation"].get("judge_pairs", 0),
        "n_train_targets": entry["n_targets"]["train"],
        "n_val_targets": entry["n_targets"]["validation"],
        "drift": audit.get("flag"),
        **_verdict_columns("vs_initial", entry["verdicts"]["best_initial"]),
        **_verdict_columns("vs_none", entry["verdicts"]["no_guidance"]),
        **_verdict_columns("vs_median", entry["verdicts"].get("training_median")),
        "no_better_than_constant": entry.get("no_better_than_constant"),
        "selection": entry["selection"]["rule"],
        "attempts": entry["evolution"]["attempts"],
        "accepted": entry["evolution"]["accepted"],
        "accepted_asked": entry["evolution"].get("accepted_asked"),
        "pruned": entry["evolution"]["pruned"],
        "rejected": entry["evolution"]["rejected"],
        "judge_calls": entry["calls_made"],
        "judge_cache_hits": entry["cached_calls"],
        **holdout_columns(entry.get("holdout")),
    }


def _verdict_columns(prefix: str, v: dict | None) -> dict:
    v = v or {}
    return {f"{prefix}_diff": v.get("estimate"), f"{prefix}_low": v.get("low"), f"{prefix}_high": v.get("high"),
            f"{prefix}_verdict": v.get("verdict"), f"{prefix}_p": v.get("p_value"),
            f"{prefix}_holm_survives": v.get("holm_survives")}


def _macro(records: list[dict]) -> dict:
    """Unweighted means over criteria of every numeric Table 5 column, with the count used."""
    out: dict = {}
    for col in TABLE5_COLUMNS:
        values = {r["criterion"]: r[col] for r in records}
        if col in ("number", "n_train_targets", "n_val_targets", "attempts", "accepted", "pruned", "rejected",
                   "judge_calls", "judge_cache_hits", "accepted_asked", "ceiling_val_pairs",
                   "evolved_val_pairs_ceiling_targets") \
                or col.endswith(("_low", "_high", "_p", "_holm_survives")) or not all(
            v is None or isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.values()
        ):
            continue
        mean, n = macro_mean(values)
        out[col] = {"mean": _nan_to_none(mean), "n_criteria": n}
    return out


def _ci(stat: StatInterval | None, digits: int = 3) -> str:
    if stat is None:
        return "—"
    return format_interval(stat.estimate, stat.low, stat.high, digits=digits)


def _ci_defined(stat: StatInterval | None, digits: int = 3) -> str:
    """As :func:`_ci`, but ``undefined`` when the statistic was computed and has no value (a
    constant side: never printed as 0.000); ``—`` when it was not computed at all."""
    if stat is not None and stat.estimate is None:
        return "undefined"
    return _ci(stat, digits)


AGREEMENT_LABELS = {
    "no-guidance": "no guidance", "best-initial": "best initial", "training-median": "training median",
    "winner": "evolved", "ceiling": "physician vs physician",
}


def _ceiling(r: Table5Row, why_none: str | None = None) -> str:
    """``0.300 (judge 0.412; 40 / 96 pairs)``: the ceiling and the judge on the same targets."""
    if r.ceiling_val_mae is None:
        if why_none and why_none.startswith("each target was rated by one rater"):
            return "— (none: each target has one rater)"
        return "— (no target has two physicians)"
    if r.evolved_val_mae_ceiling_targets is None:
        return f"{_fmt(r.ceiling_val_mae, 3)} ({r.ceiling_val_pairs} pairs)"
    return (f"{_fmt(r.ceiling_val_mae, 3)} (judge {_fmt(r.evolved_val_mae_ceiling_targets, 3)}; "
            f"{r.ceiling_val_pairs} / {r.evolved_val_pairs_ceiling_targets} pairs)")


def _pair(a: float | None, b: float | None) -> str:
    return f"{_fmt(a, 3)} / {_fmt(b, 3)}"


def _table5_line(report: CalibrationReport, r: Table5Row) -> str:
    evolved = _pair(r.evolved_train_mae, r.evolved_val_mae)
    if r.evolved_origin != "mutation":
        evolved += " (an initial prompt won)"
    if r.no_better_than_constant:
        evolved += " **no better than a constant**"
    entry = report.criteria.get(r.criterion)
    why = entry.ceiling.validation.why_none if entry is not None else None
    coverage = "—" if r.evolved_val_coverage is None else f"{r.evolved_val_coverage:.2f}"
    return (f"| {md_inline(r.number or '')} | {md_inline(r.name or r.criterion)} | "
            f"{_pair(r.no_guidance_train_mae, r.no_guidance_val_mae)} | "
            f"{_pair(r.best_initial_train_mae, r.best_initial_val_mae)} | {_pair(r.median_train_mae, r.median_val_mae)} | "
            f"{evolved} | {_fmt(r.delta_val_mae, 3)} | {_fmt(r.evolved_val_repeat_sd, 3)} | "
            f"{coverage} | {_fmt(r.evolved_val_signed_error, 3)} | {_ceiling(r, why)} | "
            f"{md_inline(r.drift or 'not audited')} |")


def _macro_line(report: CalibrationReport) -> str:
    def mm(col: str) -> str:
        v = report.macro.get(col)
        return _fmt(v.mean, 3) if v is not None else "—"

    return (f"| | **macro mean** ({len(report.table5)} criteria) | {mm('no_guidance_train_mae')} / {mm('no_guidance_val_mae')} | "
            f"{mm('best_initial_train_mae')} / {mm('best_initial_val_mae')} | {mm('median_train_mae')} / {mm('median_val_mae')} | "
            f"{mm('evolved_train_mae')} / {mm('evolved_val_mae')} | {mm('delta_val_mae')} | {mm('evolved_val_repeat_sd')} | "
            f"{mm('evolved_val_coverage')} | {mm('evolved_val_signed_error')} | {mm('ceiling_val_mae')} | |")


def render_table5(report: CalibrationReport) -> list[str]:
    """Markdown lines of Table 5 (per criterion and macro means)."""
    out = [
        "## Table 5 — judge guidance calibration",
        "",
        "MAE against every individual physician rating, re-scored with fresh seeds; train / validation. "
        "Δ val = evolved − best initial on validation (negative: the evolved guidance agrees better), each MAE over "
        "its own scored calls; the paired verdicts below use only the pairs both scored, so where some calls failed "
        "the two can differ a little. "
        "SD = repeat-to-repeat SD of the validation MAE; coverage = share of validation calls with a numeric score; "
        "signed = mean(judge − physician) on validation. Ceiling val = physician-vs-physician MAE on the validation "
        "targets rated by two or more physicians, then the evolved judge's MAE on those same targets and the pair counts "
        "behind each (the judge's MAE in the evolved column pools every target, so it does not compare with the ceiling). "
        "*No better than a constant*: the evolved judge's validation MAE is not below the training median's - always "
        "answering that one number agrees as well with the physicians.",
        "",
    ]
    table = ["| # | criterion | no guidance | best initial | training median | evolved | Δ val | SD | coverage | signed | ceiling val (judge) | drift |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    table += [_table5_line(report, r) for r in report.table5]
    if len(report.table5) > 1:
        table.append(_macro_line(report))
    if not any(r.number for r in report.table5):  # a rubric without criterion numbers: no empty # column
        table = ["|" + line.split("|", 2)[2] for line in table]
    return out + table + [""]


def verdict_text(v: PairedVerdict | None) -> str:
    """``-0.120 [-0.200, -0.030] better (p = 0.004)`` (``—`` when undefined; ``same candidate``
    when the winner is that candidate). A better/worse verdict that does not survive Holm's
    correction over the report's comparisons says so; ``too few cases to tell`` gives the count."""
    if v is None:
        return "—"
    if v.verdict == "same candidate":
        return "same candidate"
    text = f"{format_interval(v.estimate, v.low, v.high)} {v.verdict}"
    if v.verdict == "too few cases to tell":
        return f"{text} ({count_noun(v.n_cases, 'case')})"
    if v.p_value is not None:
        text += f" (p = {v.p_value:.3f})"
    if v.holm_survives is False:
        text += " - not after Holm's correction"
    return text


def verdict_warnings(report: CalibrationReport) -> list[str]:
    """Plain-words warnings about winners: worse than no guidance, an evolved winner worse than
    or not distinguishable from the best initial prompt although an evolved prompt was
    selected, a winner no better than a constant (the training median) and a winner the drift
    audit flagged ``drift`` or ``review``; then the warnings the run gave before it started
    (:func:`~evolve.runs.run_warnings`) and an accepted budget not met (:func:`shortfall_warnings`)."""
    out = []
    for r in report.table5:
        out += _criterion_warnings(r)
    shortfall = shortfall_warnings(report)
    return out + [w for w in report.warnings if w not in shortfall] + shortfall  # then the run's own (run_warnings)


def _labelled(criterion: str, name: str | None) -> str:
    """``correctness (Factual correctness of the claim)``: the id users type, then the name."""
    return criterion if not name or name == criterion else f"{criterion} ({name})"


def _criterion_warnings(r: Table5Row) -> list[str]:
    name = _labelled(r.criterion, r.name)
    out = []
    holm = " (it does not survive Holm's correction over the report's comparisons)" \
        if r.vs_none_holm_survives is False else ""
    if r.vs_none_verdict == "worse":
        out.append(f"criterion {name}: the selected guidance agrees WORSE with the physicians than no guidance on "
                   f"validation (MAE difference {_fmt(r.vs_none_diff, 3)}, 95% CI [{_fmt(r.vs_none_low, 3)}, "
                   f"{_fmt(r.vs_none_high, 3)}]){holm}; prefer no guidance for this criterion.")
    evolved = r.evolved_origin == "mutation"
    if evolved and r.vs_initial_verdict == "worse":
        out.append(f"criterion {name}: the evolved winner is worse than the best initial prompt on validation; "
                   "keep the initial prompt.")
    elif evolved and r.vs_initial_verdict in ("no distinguishable difference", "too few cases to tell"):
        out.append(f"criterion {name}: the winner is not distinguishable from the best initial prompt although an "
                   f"evolved prompt was selected (validation MAE difference {_fmt(r.vs_initial_diff, 3)}, "
                   f"{r.vs_initial_verdict}); the evidence does not show that evolution helped.")
    if r.no_better_than_constant:
        out.append(f"criterion {name}: the judge is no better than a constant: its validation MAE "
                   f"{_fmt(r.evolved_val_mae, 3)} is not below the {_fmt(r.median_val_mae, 3)} of always "
                   "answering the training median; do not use its scores for this criterion.")
    if r.drift in ("drift", "review"):
        out.append(f"criterion {name}: the drift audit flagged the winning guidance '{r.drift}'; read audit.md "
                   "before using it.")
    return out


def comparisons_text(comparisons: Comparisons | None) -> str | None:
    """``6 paired comparisons in this report; ...``: how many were made and how many better/worse
    verdicts do not survive Holm's correction over all of them (None with fewer than two)."""
    c = comparisons
    if c is None or c.n < 2:
        return None
    text = f"{c.n} paired comparisons in this report, each at level {c.alpha:g}; with Holm's correction over all {c.n}, "
    if not c.definitive:
        return text + "nothing changes: no verdict is better or worse."
    if not c.not_surviving:
        return text + f"all {c.definitive} better/worse verdicts survive."
    return text + (f"{c.not_surviving} of {c.definitive} better/worse verdicts do not survive (marked \"not after Holm's "
                   "correction\"): read them as possibly due to chance among many comparisons.")


def _verdict_line(report: CalibrationReport, r: Table5Row) -> str:
    v = report.criteria[r.criterion].verdicts
    winner = r.evolved.split(":", 1)[1] + ("" if r.evolved_origin == "mutation" else " (initial)")
    return (f"| {md_inline(r.name or r.criterion)} | {md_code(winner)} | {r.selection} | "
            f"{verdict_text(v.best_initial)} | {verdict_text(v.no_guidance)} | {verdict_text(v.training_median)} | "
            f"{r.attempts} | {_accepted_cell(r.accepted, r.accepted_asked)} | {r.pruned} | {r.rejected} | "
            f"{r.judge_calls} | {r.judge_cache_hits} |")


def render_verdicts(report: CalibrationReport) -> list[str]:
    """Markdown lines: paired verdicts on validation and the evolution budget per criterion."""
    out = [
        "## Paired verdicts and budget",
        "",
        "Winner minus the other candidate in validation MAE on the same targets, repeats and raters (negative: the "
        "winner agrees better); the training median is the constant predictor scored on the winner's own calls. "
        "Each difference is tested by a sign-flip permutation test over case clusters (exact when there are few), and its "
        "95% interval holds the shifts that test does not reject. *better* / *worse* only when p < 0.05 (the interval "
        f"is on one side of 0); otherwise *no distinguishable difference*. With fewer than {MIN_CASES} validation cases "
        "the verdict is *too few cases to tell*, whatever the numbers. "
        "Attempts = mutation attempts; accepted = mutants judged on every training target that reached min_coverage; "
        "pruned = mutants stopped by racing; rejected = invalid, duplicate, failed or low-coverage proposals; "
        "accepted is shown against the budget asked when it fell short. Judge calls = the distinct judge requests the "
        "criterion needed (whether answered by the endpoint, a batch or an imported batch file); cache hits = answers "
        "that repeat one of them, which the response cache gave: the same figures whether the run went straight "
        "through or was resumed. What the run's processes paid is in the usage section.",
        "",
        "| criterion | winner | selection | vs best initial | vs no guidance | vs training median | attempts | accepted | "
        "pruned | rejected | judge calls | cache hits |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    out += [_verdict_line(report, r) for r in report.table5]
    out.append("")
    if (text := comparisons_text(report.comparisons)) is not None:
        out += [text, ""]
    warnings = verdict_warnings(report)
    out += [f"**Warning:** {md_inline(w)}" for w in warnings]
    return out + ([""] if warnings else [])


def _calls_cell(r: BaselineRow) -> str:
    """``120``, or ``90 + 30 from cache`` when the response cache answered some of the calls."""
    cached = r.cached_calls
    return f"{r.calls - cached} + {cached} from cache" if cached else str(r.calls)


def _accepted_cell(accepted: int, asked: int | None) -> str:
    """``8``, or ``5 of 8 asked`` when the accepted budget was not met."""
    return f"{accepted} of {asked} asked" if asked is not None and accepted < asked else str(accepted)


def render_agreement(report: CalibrationReport, split: str = "validation") -> list[str]:
    """Markdown lines: every agreement statistic with its case-clustered 95% interval."""
    out = [
        f"## Agreement on {split} targets (95% case-clustered bootstrap intervals, {report.bootstrap.n_boot} replicates)",
        "",
        "Class-balanced MAE averages the MAE within each physician score; QWK = quadratic weighted kappa; "
        "α = Krippendorff's alpha (ordinal; each judge–physician pair is a unit); ρ = Spearman. "
        "*undefined*: the statistic has no value on these pairs (QWK and ρ when the physicians' ratings or the judge's "
        "scores are all one value); — : not computed (a constant predictor has no QWK, α or rank correlation).",
        "",
        "| criterion | row | MAE | class-balanced MAE | QWK | α (ordinal) | ρ | pairs | cases |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for criterion, c in report.criteria.items():
        for key, label in AGREEMENT_LABELS.items():
            by_split = c.agreement.get(key)
            st = getattr(by_split, split) if by_split is not None else {}
            if not st:
                continue
            out.append(
                f"| {md_inline(c.name or criterion)} | {label} | {_ci(st.get('mae'))} | "
                f"{_ci(st.get('class_balanced_mae'))} | "
                f"{_ci_defined(st.get('qwk'))} | {_ci_defined(st.get('krippendorff_alpha'))} | "
                f"{_ci_defined(st.get('spearman'))} | "
                f"{st['mae'].n_pairs} | {st['mae'].n_clusters} |"
            )
    return out + [""]


def render_exclusions(report: CalibrationReport) -> list[str]:
    """Markdown lines listing structurally inapplicable (criterion, component) pairs."""
    if not report.exclusions:
        return []
    by: dict[str, list[str]] = {}
    for e in report.exclusions:
        label = f"{md_inline(e.component)} ({e.split}: {e.n_targets} targets"
        label += f", {e.n_ratings} physician ratings kept aside)" if e.n_ratings else ")"
        by.setdefault(e.criterion, []).append(label)
    out = [
        "## Structural exclusions",
        "",
        "Components a criterion does not apply to are never sent to the judge; they are not zeros "
        "and are not in any MAE above (consilium paper, rubric).",
        "",
    ]
    out += [f"- {md_code(crit)}: " + "; ".join(items) for crit, items in by.items()]
    return out + [""]


def _header(report: CalibrationReport) -> list[str]:
    conditions = report.conditions
    out = [
        f"# Calibration report — run {md_code(report.run_id)}",
        "",
        f"Pack {md_code(report.pack)}, rubric {md_code(report.rubric.id)} v{md_inline(report.rubric.version)}"
        + (f", targets of condition {', '.join(md_code(c) for c in conditions)} only" if conditions else "")
        + ". MAE = mean absolute error between judge scores and every individual physician rating "
        "(pooled over re-evaluation repeats with fresh seeds); signed = mean(judge − physician); "
        "SD = sample SD of per-repeat MAE; coverage = share of judge calls with a numeric score, then how many "
        "calls the judge declared not evaluable (n.e.) and how many failed (failed: endpoint error, cut or invalid "
        "answer) - a decline and a failure are not the same thing. "
        "Recompute any number from `scores.csv` (phase `reeval`) and the pack's ratings.",
        "",
    ]
    if report.without_winner:
        out += [f"**No winner** (no candidate reached `min_coverage`; see `journal.jsonl`): "
                f"{', '.join(md_code(c) for c in report.without_winner)}. The tables below cover the other criteria.", ""]
    return out


def render_markdown(report: CalibrationReport) -> str:
    """Render :func:`build_report` output as Markdown: Table 5, agreement, exclusions, details."""
    out = _header(report)
    out += render_table5(report)
    out += render_holdout(report)
    out += render_verdicts(report)
    out += render_agreement(report)
    out += render_exclusions(report)
    for criterion, c in report.criteria.items():
        out += _render_criterion(criterion, c)
    out += render_usage(report.usage)
    out += render_prefix_share(report.prefix_cached_share, "scores.csv")
    return "\n".join(out)


def _render_criterion(criterion: str, c: CriterionReport) -> list[str]:
    """A criterion's details: every row, the ceiling, evolution counts, calls and the winner's text."""
    pairs = c.row("training-median")
    train_pairs = pairs.train.n_pairs if pairs is not None else 0
    val_pairs = pairs.validation.n_pairs if pairs is not None else 0
    out = [f"## Criterion {md_code(criterion)}", "",
           f"{c.n_targets.train} training and {c.n_targets.validation} validation targets, "
           f"{c.n_raters} raters: each MAE rests on {train_pairs} training and "
           f"{val_pairs} validation ratings per repeat.", "",
           "| candidate | train MAE | val MAE | train signed | val signed | train SD | val SD | train cov | val cov | calls | tokens (in/out) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in c.rows:
        tr, va = r.train, r.validation
        label = md_inline(r.label) + (" (best initial)" if r.best_initial else "")
        if r.kind == "winner":
            label = f"**{label}**"
        out.append(
            f"| {label} | {_fmt(tr.mae)} | {_fmt(va.mae)} | {_fmt(tr.signed_error, 3)} | "
            f"{_fmt(va.signed_error, 3)} | {_fmt(tr.repeat_sd, 3)} | {_fmt(va.repeat_sd, 3)} | "
            f"{_cov(tr)} | {_cov(va)} | {_calls_cell(r)} | {r.prompt_tokens}/{r.completion_tokens} |"
        )
    ce = c.ceiling
    out.append(f"| physician vs physician (ceiling) | {_fmt(ce.train.mae)} | {_fmt(ce.validation.mae)} | | | | | | | | |")
    out += _render_no_ceiling(ce)
    out += _render_judge_as_rater(ce.validation.judge_as_rater)
    return out + _render_evolution(c)


def _render_evolution(c: CriterionReport) -> list[str]:
    e, w = c.evolution, c.winner
    made = e.judge_calls - e.judge_cache_hits
    return [
        "",
        f"Evolution: {count_noun(e.attempts, 'mutation attempt')}, {e.accepted} accepted "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(e.status_counts.items())) or 'none'}); "
        + (f"{e.pruned} pruned by racing ({e.calls_saved} judge calls saved); " if e.pruned else "")
        + f"{e.elites} elites in {e.archive_cells} cells; {e.judge_calls} training judge answers "
        f"({made} distinct requests, {e.judge_cache_hits} repeating one, which the response cache answers); "
        f"mutation tokens {e.mutation_prompt_tokens}/{e.mutation_completion_tokens}.",
        f"All judge answers for this criterion: {c.calls - c.cached_calls} distinct requests and {c.cached_calls} "
        "repeating an earlier one (the response cache answers those; what the run's processes really sent is under "
        f"Calls and tokens), tokens {c.prompt_tokens}/{c.completion_tokens}"
        + (f"; the server's prefix cache served {c.prefix_cached_share:.0%} of the prompt tokens sent."
           if c.prefix_cached_share is not None else "."),
        "",
        f"Winner {md_code(w.candidate_id)} ({w.origin}"
        + (f", parent {md_code(w.parent_id)}" if w.parent_id else "")
        + f"; evolution training MAE {_fmt(w.evolution_train_mae)}):",
        "",
        md_code_block(w.text) if w.text else "(no guidance)",
        "",
    ]


def _render_no_ceiling(ceiling: Ceiling) -> list[str]:
    """A plain sentence for each split without a physician-vs-physician ceiling, saying why."""
    missing = {split: getattr(ceiling, split).why_none for split in ("train", "validation")
               if getattr(ceiling, split).mae is None}
    if not missing:
        return []
    reasons = set(missing.values())
    if len(missing) == 2 and len(reasons) == 1:
        where = "on the training or validation targets"
        text = f"{next(iter(reasons)) or 'no target has two physicians'}"
        return ["", f"No physician-vs-physician ceiling can be computed {where}: {text}. Compare the judge with "
                "the baselines above instead (the training median is the simplest)."]
    return [""] + [f"No physician-vs-physician ceiling on the {split} targets: {why or 'no target has two physicians'}."
                   for split, why in missing.items()]


def _render_judge_as_rater(rows: list[JudgeAsRater]) -> list[str]:
    """The judge as one more rater, leave one physician out (validation, targets with >= 2 physicians)."""
    if not rows:
        return []
    out = ["", "The evolved judge as one more rater (validation targets with two or more physicians): its MAE "
           "against each physician beside the other physicians' MAE against that physician.", "",
           "| physician | targets | judge vs physician (pairs) | other physicians vs physician (pairs) |", "|---|---|---|---|"]
    out += [f"| {md_inline(r.rater_id)} | {r.n_targets} | {_fmt(r.judge_mae, 3)} ({r.judge_pairs}) | "
            f"{_fmt(r.peers_mae, 3)} ({r.peer_pairs}) |" for r in rows]
    return out


def agreement_records(report: CalibrationReport) -> list[dict]:
    """Flatten the per-criterion agreement statistics into rows of :data:`AGREEMENT_COLUMNS`."""
    rows = []
    for criterion, c in report.criteria.items():
        ids: dict[str, str] = {r.kind: r.candidate_id for r in c.rows if r.kind != "initial"}
        best = c.row("initial")
        ids["best-initial"] = best.candidate_id if best is not None else ""
        for key, splits in c.agreement.items():
            for split in ("train", "validation"):
                stats = getattr(splits, split)
                rows += [{"criterion": criterion, "row": key, "candidate_id": ids.get(key, ""), "split": split,
                          "statistic": name, **stats[name].model_dump()} for name in STATISTICS if name in stats]
    return rows


def write_report(run_dir: Path, *, n_boot: int | None = None, seed: int = 0, html: bool = True,
                 prompts_root: Path | str | None = None, settings: ReportSettings | None = None,
                 holdout: bool = True) -> CalibrationReport:
    """Build the report and write it into ``run_dir``.

    Files: ``report.json`` (everything; :class:`~evolve.outputs.CalibrationReport`),
    ``report.md`` (Table 5, agreement with intervals, structural exclusions, per-criterion
    details), ``report.html`` (the same tables after the figures of
    :func:`~evolve.report.calibration_html`; unless ``html`` is False), ``table5.csv``
    (:data:`TABLE5_COLUMNS`, criteria then a ``macro`` row) and ``agreement.csv``
    (:data:`AGREEMENT_COLUMNS`), and the judge file ``judge.json``
    (:func:`~evolve.report.build_judge_file`; so reporting a run made before judge files existed
    gives it one). ``prompts_root`` and ``holdout``: as for :func:`build_report`. ``settings``: bootstrap
    replicates and figures (default: :meth:`~evolve.report.ReportSettings.from_env`, 2,000
    replicates with figures unless ``EVOLVE_REPORT_REPLICATES`` / ``EVOLVE_REPORT_FIGURES`` say
    otherwise); ``n_boot``, when given, replaces its replicates.

    Returns:
        The report, as written to ``report.json``.
    """
    run_dir = Path(run_dir)
    folder = CalibrationFolder(run_dir)
    with folder.exclusive():  # before reading: a run still being written is refused, naming its writer
        settings = report_settings(settings, n_boot)
        inputs = read_inputs(run_dir, prompts_root)  # once for the report and the judge file
        report = _report_of(inputs, n_boot=settings.replicates, seed=seed, holdout=holdout)
        folder.write(folder.REPORT_JSON, report.model_dump_json(indent=2) + "\n")
        markdown = render_markdown(report)
        folder.write(folder.REPORT_MD, markdown)
        if html:
            folder.write(folder.REPORT_HTML, calibration_html(report, markdown, figures=settings.figures))
        table = pd.DataFrame([r.model_dump() for r in report.table5], columns=TABLE5_COLUMNS)
        macro: dict = {col: v.mean for col, v in report.macro.items()}
        macro.update(criterion="macro", name=f"macro mean over {len(table)} criteria")
        folder.write(folder.TABLE5, pd.concat([table, pd.DataFrame([macro], columns=TABLE5_COLUMNS)], ignore_index=True).to_csv(index=False))
        folder.write(folder.AGREEMENT, pd.DataFrame(agreement_records(report), columns=AGREEMENT_COLUMNS).to_csv(index=False))
        write_judge_file(folder / folder.JUDGE, judge_file_of(inputs, report))
    return report
