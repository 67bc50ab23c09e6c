"""Calibration report (``report.md`` + ``report.json``), rebuilt from a run's saved artifacts.

Nothing here calls a model: every number comes from ``scores.csv``, ``candidates.csv``, the
pack's ratings and the split manifests, so a report can be rebuilt - and checked - at any time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from evolve.calibration._metrics import Agreement, agreement, constant_agreement, median_baseline, rater_ceiling

REPORT_VERSION = 1


def _fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _row(label: str, kind: str, candidate_id: str, tr: Agreement, va: Agreement, calls: int, ptok: int, ctok: int) -> dict:
    return {
        "label": label,
        "kind": kind,
        "candidate_id": candidate_id,
        "train": tr.model_dump(),
        "validation": va.model_dump(),
        "calls": calls,
        "prompt_tokens": ptok,
        "completion_tokens": ctok,
    }


def build_report(run_dir: Path) -> dict:
    """Compute the report of a finished run folder.

    Returns:
        A JSON-able dict: ``{"version", "run_id", "pack", "rubric", "criteria": {criterion:
        {"rows": [...], "ceiling": {...}, "evolution": {...}, "winner": {...}}}, "totals"}``.
        Each row holds train and validation :class:`Agreement` of one of: ``no-guidance``,
        ``initial`` (each initial candidate; ``best_initial`` marks the one with the lowest
        evolution-phase training MAE), ``training-median``, ``winner``.

    Raises:
        RunError: Missing artifacts.
    """
    from evolve.calibration._engine import load_run_config
    from evolve.data import load_pack

    run_dir = Path(run_dir)
    config = load_run_config(run_dir)
    scores = pd.read_csv(run_dir / "scores.csv", dtype={"target_id": str, "case_id": str})
    cands = pd.read_csv(run_dir / "candidates.csv", keep_default_na=False, dtype=str)
    pack = load_pack(config.pack, prompts_root=config.prompts_root)
    ratings = pack.ratings_frame()
    report: dict = {
        "version": REPORT_VERSION,
        "run_id": config.run_id,
        "pack": pack.manifest.name,
        "rubric": {"id": pack.manifest.rubric.id, "version": pack.manifest.rubric.version},
        "criteria": {},
    }
    for criterion, crit_scores in scores.groupby("criterion", sort=False):
        ccands = cands[cands["criterion"] == criterion]
        reeval = crit_scores[crit_scores["phase"] == "reeval"]
        evo = crit_scores[crit_scores["phase"] == "evolution"]
        targets = {
            split: set(reeval.loc[reeval["split"] == split, "target_id"]) for split in ("train", "validation")
        }
        crit_ratings = ratings[ratings["criterion"] == criterion]
        split_ratings = {s: crit_ratings[crit_ratings["target_id"].isin(t)] for s, t in targets.items()}

        def ag(cid: str, split: str) -> Agreement:
            frame = reeval[(reeval["candidate_id"] == cid) & (reeval["split"] == split)]
            return agreement(frame, split_ratings[split])

        def cost(cid: str) -> tuple[int, int, int]:
            frame = reeval[reeval["candidate_id"] == cid]
            return len(frame), int(frame["prompt_tokens"].sum()), int(frame["completion_tokens"].sum())

        rows = []
        none_id = ccands.loc[ccands["origin"] == "none", "candidate_id"].iloc[0]
        rows.append(_row("no guidance", "no-guidance", none_id, ag(none_id, "train"), ag(none_id, "validation"), *cost(none_id)))
        inits = ccands[ccands["origin"] == "initial"]["candidate_id"].tolist()
        evo_mae = {
            cid: agreement(evo[(evo["candidate_id"] == cid) & (evo["split"] == "train")], split_ratings["train"]).mae
            for cid in inits
        }
        ranked = [cid for cid in inits if evo_mae[cid] is not None]
        best_init = min(ranked, key=lambda c: (evo_mae[c], c)) if ranked else None
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
            mae, n = rater_ceiling(split_ratings[split])
            ceiling[split] = {"mae": mae, "n_pairs": n}
        mutations = ccands[ccands["origin"] == "mutation"]
        status_counts = mutations["status"].value_counts().to_dict()
        report["criteria"][criterion] = {
            "rows": rows,
            "ceiling": ceiling,
            "n_targets": {s: len(t) for s, t in targets.items()},
            "n_raters": int(crit_ratings["rater_id"].nunique()),
            "evolution": {
                "attempts": int(len(mutations)),
                "accepted": int(status_counts.get("accepted", 0) + status_counts.get("low_coverage", 0)),
                "status_counts": {k: int(v) for k, v in status_counts.items()},
                "elites": int((ccands["elite"] == "True").sum()),
                "archive_cells": config.archive.cells,
                "judge_calls": int(len(evo)),
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
            "calls": int(len(crit_scores)),
            "cached_calls": int(crit_scores["cached"].astype(str).eq("True").sum()),
            "prompt_tokens": int(crit_scores["prompt_tokens"].sum()),
            "completion_tokens": int(crit_scores["completion_tokens"].sum()),
        }
    return report


def render_markdown(report: dict) -> str:
    """Render :func:`build_report` output as Markdown (one table per criterion)."""
    out = [
        f"# Calibration report — run `{report['run_id']}`",
        "",
        f"Pack `{report['pack']}`, rubric `{report['rubric']['id']}` v{report['rubric']['version']}. "
        "MAE = mean absolute error between judge scores and every individual physician rating "
        "(pooled over re-evaluation repeats with fresh seeds); signed = mean(judge − physician); "
        "SD = sample SD of per-repeat MAE; coverage = share of judge calls with a numeric score. "
        "Recompute any number from `scores.csv` (phase `reeval`) and the pack's ratings.",
        "",
    ]
    for criterion, c in report["criteria"].items():
        out += [f"## Criterion `{criterion}`", ""]
        pairs = next(r for r in c["rows"] if r["kind"] == "training-median")
        out.append(
            f"{c['n_targets']['train']} training and {c['n_targets']['validation']} validation targets, "
            f"{c['n_raters']} raters: each MAE rests on {pairs['train']['n_pairs']} training and "
            f"{pairs['validation']['n_pairs']} validation ratings per repeat."
        )
        out += [
            "",
            "| candidate | train MAE | val MAE | train signed | val signed | train SD | val SD | train cov | val cov | calls | tokens (in/out) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in c["rows"]:
            tr, va = r["train"], r["validation"]
            label = r["label"] + (" (best initial)" if r.get("best_initial") else "")
            if r["kind"] == "winner":
                label = f"**{label}**"
            out.append(
                f"| {label} | {_fmt(tr['mae'])} | {_fmt(va['mae'])} | {_fmt(tr['signed_error'], 3)} | "
                f"{_fmt(va['signed_error'], 3)} | {_fmt(tr['repeat_sd'], 3)} | {_fmt(va['repeat_sd'], 3)} | "
                f"{tr['coverage']:.2f} | {va['coverage']:.2f} | {r['calls']} | {r['prompt_tokens']}/{r['completion_tokens']} |"
            )
        ce = c["ceiling"]
        out.append(
            f"| physician vs physician (ceiling) | {_fmt(ce['train']['mae'])} | {_fmt(ce['validation']['mae'])} | | | | | | | | |"
        )
        e, w = c["evolution"], c["winner"]
        out += [
            "",
            f"Evolution: {e['attempts']} mutation attempts, {e['accepted']} accepted "
            f"({', '.join(f'{k}: {v}' for k, v in sorted(e['status_counts'].items())) or 'none'}); "
            f"{e['elites']} elites in {e['archive_cells']} cells; {e['judge_calls']} training judge calls; "
            f"mutation tokens {e['mutation_prompt_tokens']}/{e['mutation_completion_tokens']}.",
            f"All judge calls for this criterion: {c['calls']} ({c['cached_calls']} from cache), "
            f"tokens {c['prompt_tokens']}/{c['completion_tokens']}.",
            "",
            f"Winner `{w['candidate_id']}` ({w['origin']}"
            + (f", parent `{w['parent_id']}`" if w["parent_id"] else "")
            + f"; evolution training MAE {_fmt(w['evolution_train_mae'])}):",
            "",
            "> " + (w["text"].replace("\n", "\n> ") if w["text"] else "(no guidance)"),
            "",
        ]
    return "\n".join(out)


def write_report(run_dir: Path) -> dict:
    """Build the report and write ``report.json`` and ``report.md`` into ``run_dir``."""
    run_dir = Path(run_dir)
    report = build_report(run_dir)
    (run_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (run_dir / "report.md").write_text(render_markdown(report), encoding="utf-8")
    return report
