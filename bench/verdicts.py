"""Paired verdicts of the calibration report against a simulated judge whose truth is known.

Usage::

    python bench/verdicts.py                          # both budgets: quick (40 worlds), paper (12 worlds)
    python bench/verdicts.py --budget quick --worlds 80

The world is ``bench/racing.py``'s (invented pack, simulated judge and mutator behind the fake
provider; no model, no network), with one change: targets are grouped into cases (one or two
targets per case, sharing part of their difficulty), as in K-QA, so that a validation sample of
8 targets holds 6-8 case clusters. For every world a calibration runs with evolve's default
protocol, then the report (:func:`evolve.report.build_report`) is built, and each of its paired
verdicts - the winner against the best initial prompt, against no guidance and against the
training median, on validation - is checked against the truth: the expected (noise-free) MAE
difference of the two on the same validation targets, which the world knows exactly (the
training median is a constant, so its MAE has no noise at all). A definitive verdict is wrong
when it says *better* and the winner is truly not better (difference >= 0), or *worse* and it is
truly not worse. ``too few cases to tell`` and ``no distinguishable difference`` are never wrong,
only uninformative; the table counts them.

Budgets: ``quick`` is the quick preset as shipped (2 accepted mutants of <= 4 attempts, 10
training and 8 validation targets); ``paper`` has the paper's validation size (every validation
target of a 100-target world: about 50 targets in about 38 cases) with a smaller search than the
paper's 25 accepted mutants (8 of <= 16 attempts) to keep the run time down - the verdicts
depend on the validation sample, not on how long the search ran. The last line per budget says
whether wrong definitive verdicts are <= 5% (issue 22 item 5).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import racing  # noqa: E402  (bench/ is not a package; racing.py puts the repository on sys.path)
from racing import NOISE, World, _prompts_root  # noqa: E402

from evolve.calibration import calibrate  # noqa: E402
from evolve.config import resolve_config  # noqa: E402
from evolve.data import Case, PackManifest, Rating, RatingPack, RubricRef, Target, load_pack, write_pack  # noqa: E402
from evolve.llm import Client, FakeProvider, ResponseCache  # noqa: E402
from evolve.report import VERDICTS, build_report  # noqa: E402
from evolve.splits import make_splits, write_splits  # noqa: E402

BUDGETS: dict[str, dict] = {
    # the quick preset as shipped
    "quick": {"targets": 60, "worlds": 40, "budget": {}},
    # the paper's validation size (all validation targets), a smaller search than the paper's
    "paper": {"targets": 100, "worlds": 12,
              "budget": {"accepted": 8, "max_attempts": 16, "max_train_targets": 10**6, "max_validation_targets": 10**6}},
}
TWIN_SHARE = 0.3  # share of cases holding two targets (K-QA: 8 validation targets in 6-7 cases)
CASE_SPREAD = 0.05  # SD of a target's base accuracy around its case's


@dataclass
class CaseWorld(World):
    """:class:`racing.World` with targets grouped into cases: the targets of a case share most of
    their base accuracy (a case is read well or badly as a whole)."""

    case_of: dict[str, str]

    @classmethod
    def make_cases(cls, seed: int, n_targets: int, noise: str) -> CaseWorld:
        rng = np.random.default_rng(seed)
        lo, hi = NOISE[noise]
        truth, base, ratings, case_of = {}, {}, {}, {}
        case, left, case_base = -1, 0, 0.0
        for i in range(n_targets):
            if left == 0:
                case, left, case_base = case + 1, 2 if rng.random() < TWIN_SHARE else 1, float(rng.uniform(lo, hi))
            left -= 1
            tid = f"T{i:03d}"
            case_of[tid] = f"case-{case:03d}"
            truth[tid] = int(rng.integers(0, 3))
            base[tid] = float(np.clip(case_base + rng.normal(0.0, CASE_SPREAD), 0.02, 0.98))
            other = truth[tid] if rng.random() < 0.7 else int(np.clip(truth[tid] + rng.choice([-1, 1]), 0, 2))
            ratings[tid] = [truth[tid], other]
        return cls(truth, base, ratings, case_of)

    def pack(self) -> RatingPack:
        cases, targets, ratings = {}, [], []
        for tid, cid in self.case_of.items():
            cases.setdefault(cid, Case(case_id=cid, title=f"Invented question {cid}", text=f"Invented patient question {cid}?",
                                       reference_answer="Invented reference."))
            targets.append(Target(target_id=tid, case_id=cid, component="answer", text=f"Invented answer [{tid}]",
                                  statement=f"Invented statement {tid}", model="simulated", condition="Must_have"))
            ratings += [Rating(case_id=cid, target_id=tid, rater_id=f"rater-{k + 1}", criterion="entailment", score=score)
                        for k, score in enumerate(self.ratings[tid])]
        manifest = PackManifest(name="simulated", description="INVENTED data for bench/verdicts.py",
                                rubric=RubricRef(id="kqa-entailment", version="1"))
        return RatingPack(path=None, manifest=manifest, cases=tuple(cases.values()), targets=tuple(targets),
                          ratings=tuple(ratings))

    def constant_mae(self, value: float, targets: list[str]) -> float:
        """MAE of always answering ``value`` against every rating of ``targets`` (no noise)."""
        errors = [abs(value - r) for tid in targets for r in self.ratings[tid]]
        return float(np.mean(errors))


def run_world(world: CaseWorld, tmp: Path, prompts: Path, seed: int, budget: str) -> list[dict]:
    """One calibration (default protocol) and its report; one row per paired verdict."""
    folder = tmp / f"{budget}-{seed}"
    write_pack(world.pack(), folder / "pack")
    splits = make_splits(load_pack(folder / "pack"), holdout_fraction=0.0, validation_fraction=0.5, seed=seed)
    write_splits(splits, folder / "splits")
    overrides = {"run_id": "run", "pack": folder / "pack", "splits": folder / "splits", "archives_dir": folder,
                 "seed": seed, "prompts_root": prompts, "audit": False, "parallel_criteria": 1,
                 "budget": {"batch_size": 2, **BUDGETS[budget]["budget"]}}
    config = resolve_config(preset="quick", overrides=overrides)
    with Client(FakeProvider(world.respond), cache=ResponseCache(":memory:"), max_concurrency=4) as client:
        calibrate(config, client=client)
    run = folder / "run"
    report = build_report(run, n_boot=100)
    entry = report["criteria"]["entailment"]
    scores = pd.read_csv(run / "scores.csv", dtype={"target_id": str})
    val = sorted(set(scores.loc[(scores["phase"] == "reeval") & (scores["split"] == "validation"), "target_id"]))
    cands = pd.read_csv(run / "candidates.csv", keep_default_na=False, dtype=str).set_index("candidate_id")
    winner = world.true_mae(cands.loc[entry["winner"]["candidate_id"], "text"], val)
    best = next(r["candidate_id"] for r in entry["rows"] if r.get("best_initial"))
    median = next(r for r in entry["rows"] if r["kind"] == "training-median")
    median_value = float(median["label"].split("(", 1)[1].rstrip(")"))
    truth = {"best_initial": winner - world.true_mae(cands.loc[best, "text"], val),
             "no_guidance": winner - world.true_mae("", val),
             "training_median": winner - world.constant_mae(median_value, val)}
    rows = []
    for key, _ in VERDICTS:
        v = entry["verdicts"].get(key)
        if not v or v["verdict"] == "same candidate":
            continue
        rows.append({"budget": budget, "world": seed, "versus": key, "verdict": v["verdict"], "estimate": v["estimate"],
                     "p_value": v["p_value"], "holm_survives": v["holm_survives"], "n_cases": v["n_cases"],
                     "n_targets": len(val), "true_difference": truth[key]})
    return rows


def wrong(row: pd.Series) -> bool:
    """A definitive verdict the truth contradicts (a true difference of exactly 0 contradicts both)."""
    if row["verdict"] == "better":
        return bool(row["true_difference"] >= -1e-12)
    if row["verdict"] == "worse":
        return bool(row["true_difference"] <= 1e-12)
    return False


def summarise(frame: pd.DataFrame, budget: str, worlds: int, seconds: float) -> None:
    definitive = frame[frame["verdict"].isin(["better", "worse"])]
    bad = definitive[definitive.apply(wrong, axis=1)]
    share = len(bad) / len(definitive) if len(definitive) else 0.0
    holm = definitive[definitive["holm_survives"].eq(True)]
    holm_bad = holm[holm.apply(wrong, axis=1)] if len(holm) else holm
    cases = frame.groupby("world")["n_cases"].max()
    print(f"\n{budget} budget: {worlds} worlds, {frame.groupby('world')['n_targets'].first().mean():.0f} validation targets "
          f"in {cases.min()}-{cases.max()} cases (mean {cases.mean():.1f}); {seconds:.0f} s")
    print(f"  comparisons: {len(frame)} (winner vs best initial {int((frame['versus'] == 'best_initial').sum())}, "
          f"vs no guidance {int((frame['versus'] == 'no_guidance').sum())}, "
          f"vs training median {int((frame['versus'] == 'training_median').sum())})")
    print(f"  definitive verdicts (better/worse): {len(definitive)}; of which surviving Holm's correction: {len(holm)}")
    print(f"  wrong definitive verdicts: {len(bad)} ({share:.1%}); among those surviving Holm: {len(holm_bad)}")
    counts = frame["verdict"].value_counts()
    print(f"  too few cases to tell: {int(counts.get('too few cases to tell', 0))}; "
          f"no distinguishable difference: {int(counts.get('no distinguishable difference', 0))}")
    if len(bad):
        print("  the wrong ones:")
        print(bad[["world", "versus", "verdict", "estimate", "p_value", "n_cases", "true_difference"]]
              .to_string(index=False, float_format=lambda x: f"{x:+.3f}"))
    print(f"  wrong definitive verdicts <= 5%: {'met' if share <= 0.05 else 'NOT met'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", choices=[*BUDGETS, "both"], default="both")
    ap.add_argument("--worlds", type=int, default=None, help="worlds per budget (default: 40 quick, 12 paper)")
    ap.add_argument("--noise", choices=sorted(NOISE), default="high")
    args = ap.parse_args()
    budgets = list(BUDGETS) if args.budget == "both" else [args.budget]
    print(f"bench/verdicts.py: the report's paired verdicts against the simulated truth (bench/racing.py's world, "
          f"{racing.GAIN} accuracy from perfect guidance, noise {args.noise}; targets in cases of 1-2)")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        prompts = _prompts_root(tmp)
        for budget in budgets:
            worlds = args.worlds or BUDGETS[budget]["worlds"]
            start, rows = time.perf_counter(), []
            for seed in range(worlds):
                world = CaseWorld.make_cases(2000 + seed, BUDGETS[budget]["targets"], args.noise)
                rows += run_world(world, tmp, prompts, seed, budget)
            summarise(pd.DataFrame(rows), budget, worlds, time.perf_counter() - start)


if __name__ == "__main__":
    main()
