"""Racing and noise-aware selection against a simulated judge whose truth is known.

Usage::

    python bench/racing.py --grid          # both budgets x both noise levels, 20 worlds each, target table
    python bench/racing.py                 # the paper's scale: 25 accepted of <= 50 attempts, 20 worlds
    python bench/racing.py --accepted 8 --attempts 16 --cases 60 --seeds 40   # the quick preset's scale
    python bench/racing.py --grid --budgets quick --set racing.margin_sd=0   # another default protocol

The world (all invented, no model, no network): a synthetic K-QA-style pack (one target per case,
truth 0-2, two physicians who agree most of the time) and an OpenAI-compatible *simulated* endpoint
behind the fake provider:

* the **judge** answers the truth with probability ``p = base(target) + gain * quality(guidance)``
  and a lenient wrong score otherwise, drawn from a hash of (seed, target, guidance) - seed noise;
  ``quality`` counts "good" minus "bad" tip tokens in the guidance (``tip-01`` ... ``tip-12``), so a
  search can find better guidance, and the noise-free (expected) MAE of any guidance is known;
* the **mutator** copies its parent's tokens and adds or removes one at random (from its seed).

Two protocols run on the same worlds and seeds: ``paper`` (``--racing off --selection paper``: every
accepted mutant judged on every training target with 2 seeds; winner = lowest training MAE) and
``default`` (evolve's defaults: one training seed, racing, robust selection). For each, the
tables give judge calls made (sent to the endpoint: ``client.usage["judge"].calls``, checked
against the rows of ``scores.csv`` that are not cache hits) apart from cache hits, by phase; the
winner's true validation MAE; how often the winner is truly worse than the best initial prompt
(the false-winner rate), split into evolved winners truly worse than the best initial prompt and
runs that kept the truly worse of the initial prompts; the report's paired validation verdict
of the winner against the best initial prompt and how often a ``better`` is false (the winner
truly not better); how many pruned mutants were truly better on validation than the run's
winner; and how often the accepted budget was not met. The two initial prompts are equally
good on average and differ only by how their tips happen to suit the validation targets, so
when a run keeps an initial prompt, training evidence cannot tell which of the two is better on
validation: about half of such runs count as false winners whatever the rule.

The last table checks issue 25 item 4's targets per cell (fewer judge calls than the paper
protocol; true validation MAE not shown worse, paired by world with a bootstrap interval; false
``better`` verdicts <= 5%) and reports the rest. Everything is measured in this one process;
ratios compare the two protocols run side by side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evolve.calibration import calibrate  # noqa: E402
from evolve.config import resolve_config  # noqa: E402
from evolve.data import Case, PackManifest, Rating, RatingPack, RubricRef, Target, load_pack, write_pack  # noqa: E402
from evolve.llm import ChatRequest, Client, FakeProvider, ResponseCache  # noqa: E402
from evolve.splits import make_splits, write_splits  # noqa: E402
from evolve.stats import paired_mae_difference  # noqa: E402

GOOD, BAD = {f"tip-{i:02d}" for i in (1, 2, 3, 4)}, {f"tip-{i:02d}" for i in (5, 6, 7, 8)}
TOKENS = sorted(GOOD | BAD | {f"tip-{i:02d}" for i in (9, 10, 11, 12)})
INITIAL = {"initial_1": ["tip-01", "tip-05", "tip-09"], "initial_2": ["tip-02", "tip-06"]}  # both of quality 0.5
NOISE = {"low": (0.35, 0.65), "high": (0.15, 0.45)}  # range of the per-target base accuracy
GAIN = 0.45  # accuracy added by perfect guidance
OWN_DRAW = 0.2  # share of judge answers drawn afresh for each guidance text (the rest shared per target and seed)
REWRITE = 0.3  # share of mutations that add three random tips at once
INTERACTION = 0.15  # largest accuracy change one tip makes on one target beyond its mean effect


def quality(text: str) -> float:
    """0..1: 0.5 plus 0.125 per good tip minus 0.125 per bad tip."""
    tips = set(re.findall(r"tip-\d\d", text))
    return float(np.clip(0.5 + 0.125 * (len(tips & GOOD) - len(tips & BAD)), 0.0, 1.0))


def _uniform(*parts: object) -> float:
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _wrong(truth: int) -> int:
    return truth + 1 if truth < 2 else 1  # a lenient judge


@dataclass
class World:
    """The synthetic pack and the simulated endpoint that judges it."""

    truth: dict[str, int]
    base: dict[str, float]
    ratings: dict[str, list[int]]

    @classmethod
    def make(cls, seed: int, n_cases: int, noise: str) -> World:
        rng = np.random.default_rng(seed)
        lo, hi = NOISE[noise]
        truth, base, ratings = {}, {}, {}
        for i in range(n_cases):
            tid = f"T{i:03d}"
            truth[tid] = int(rng.integers(0, 3))
            base[tid] = float(rng.uniform(lo, hi))
            other = truth[tid] if rng.random() < 0.7 else int(np.clip(truth[tid] + rng.choice([-1, 1]), 0, 2))
            ratings[tid] = [truth[tid], other]
        return cls(truth, base, ratings)

    def pack(self) -> RatingPack:
        cases, targets, ratings = [], [], []
        for tid in self.truth:
            cid = f"case-{tid}"
            cases.append(Case(case_id=cid, title=f"Invented question {tid}", text=f"Invented patient question {tid}?",
                              reference_answer="Invented reference."))
            targets.append(Target(target_id=tid, case_id=cid, component="answer", text=f"Invented answer [{tid}]",
                                  statement=f"Invented statement {tid}", model="simulated", condition="Must_have"))
            for k, score in enumerate(self.ratings[tid]):
                ratings.append(Rating(case_id=cid, target_id=tid, rater_id=f"rater-{k + 1}", criterion="entailment",
                                      score=score))
        manifest = PackManifest(name="simulated", description="INVENTED data for bench/racing.py",
                                rubric=RubricRef(id="kqa-entailment", version="1"))
        return RatingPack(path=None, manifest=manifest, cases=tuple(cases), targets=tuple(targets), ratings=tuple(ratings))

    def p_right(self, tid: str, text: str) -> float:
        """Accuracy of the judge on one target: the target's base, the guidance's quality, and a
        tip-by-target interaction (a tip helps on some targets and hurts on others), so guidance
        can fit the training targets without being better on validation - as real guidance can."""
        tips = re.findall(r"tip-\d\d", text)
        interaction = sum(INTERACTION * (2 * _uniform("tip x target", tip, tid) - 1) for tip in set(tips))
        return float(np.clip(self.base[tid] + GAIN * quality(text) + interaction, 0.02, 0.98))

    def true_mae(self, text: str, targets: list[str]) -> float:
        """Expected MAE over judge noise against every rating of ``targets`` (noise-free truth)."""
        total = n = 0.0
        for tid in targets:
            p, t = self.p_right(tid, text), self.truth[tid]
            for r in self.ratings[tid]:
                total += p * abs(t - r) + (1 - p) * abs(_wrong(t) - r)
                n += 1
        return total / n

    def respond(self, request: ChatRequest) -> str:
        user = request.messages[-1].content
        if request.tag == "mutation":
            parent = user.split("<<<CURRENT GUIDANCE>>>", 1)[1].split("<<<END CURRENT GUIDANCE>>>", 1)[0]
            tips = sorted(set(re.findall(r"tip-\d\d", parent)))
            rng = np.random.default_rng(request.seed)
            absent = [t for t in TOKENS if t not in tips]
            if rng.random() < REWRITE:  # an overhaul: several tips at once, often for the worse
                tips = sorted(set(tips) | set(rng.choice(TOKENS, size=3, replace=False).tolist()))
            elif tips and (not absent or rng.random() < 0.4):
                tips.remove(tips[int(rng.integers(len(tips)))])
            else:
                tips.append(absent[int(rng.integers(len(absent)))])
            return json.dumps({"analysis": "simulated", "guidance": guidance_text(tips)})
        tid = re.search(r"\[(T\d+)\]", user).group(1)  # type: ignore[union-attr]
        guidance = user.split("GUIDANCE FOR THIS CRITERION:", 1)[1].split("\n\nReply", 1)[0] if "GUIDANCE" in user else ""
        # common random numbers: mostly one draw per (seed, target) whatever the guidance - a
        # judge reads a target much the same way under small guidance changes - and sometimes a
        # draw of its own
        own = _uniform("own?", request.seed, tid, guidance.strip()) < OWN_DRAW
        u = _uniform(request.seed, tid, guidance.strip()) if own else _uniform(request.seed, tid)
        right = u < self.p_right(tid, guidance)
        score = self.truth[tid] if right else _wrong(self.truth[tid])
        return json.dumps({"rationale": "simulated", "score": str(score)})


def guidance_text(tips: list[str]) -> str:
    return "Apply these checks: " + ", ".join(sorted(tips)) + "." if tips else "Apply the rubric as written."


def _prompts_root(tmp: Path) -> Path:
    """A copy of judge_prompts whose K-QA initial guidance carries tip tokens."""
    root = tmp / "judge_prompts"
    shutil.copytree(ROOT / "judge_prompts", root)
    for name, tips in INITIAL.items():
        (root / "kqa-entailment" / "guidance" / "entailment" / f"{name}.md").write_text(guidance_text(tips) + "\n")
    return root


PROTOCOLS: dict[str, dict] = {
    # consilium paper, calibration: every accepted mutant judged on every training target with 2 seeds; lowest training MAE wins
    "paper": {"racing": {"enabled": False}, "selection": {"rule": "paper"}, "budget": {"train_repeats": 2}},
    # evolve's defaults: racing, robust selection, one training seed (a second did not help: issue 11)
    "default": {"budget": {"train_repeats": 1}},
}


def run_once(world: World, tmp: Path, prompts: Path, seed: int, protocol: str, args: argparse.Namespace) -> dict:
    folder = tmp / f"{protocol}-{seed}"
    write_pack(world.pack(), folder / "pack")
    splits = make_splits(load_pack(folder / "pack"), holdout_fraction=0.0, validation_fraction=args.validation_fraction, seed=seed)
    write_splits(splits, folder / "splits")
    overrides = {
        "run_id": "run", "pack": folder / "pack", "splits": folder / "splits", "archives_dir": folder, "seed": seed,
        "prompts_root": prompts, "audit": False, "parallel_criteria": 1,
        **PROTOCOLS[protocol],
        "budget": {"accepted": args.accepted, "max_attempts": args.attempts, "batch_size": 2,
                   "max_train_targets": 10**6, "max_validation_targets": 10**6, **PROTOCOLS[protocol].get("budget", {})},
    }
    config = resolve_config(preset="quick", overrides=overrides)
    with Client(FakeProvider(world.respond), cache=ResponseCache(":memory:"), max_concurrency=4) as client:
        calibrate(config, client=client)
        calls, hits = client.usage["judge"].calls, client.usage["judge"].cache_hits
    scores = pd.read_csv(folder / "run" / "scores.csv", usecols=["phase", "cached"])
    if int((~scores["cached"]).sum()) != calls or int(scores["cached"].sum()) != hits:
        raise SystemExit(f"count mismatch: client made {calls} calls and {hits} cache hits, scores.csv has "
                         f"{int((~scores['cached']).sum())} and {int(scores['cached'].sum())}")
    search = int(((scores["phase"] != "reeval") & ~scores["cached"]).sum())
    by_phase = scores[~scores["cached"]].groupby("phase").size().to_dict()
    cands = pd.read_csv(folder / "run" / "candidates.csv", keep_default_na=False, dtype=str)
    val = list(splits.validation)
    val_targets = [t for t in world.truth if f"case-{t}" in set(val)]
    winner = cands[cands["selected"] == "True"].iloc[0]
    init_true = min(world.true_mae(t, val_targets) for t in cands.loc[cands["origin"] == "initial", "text"])
    mutants = cands[cands["origin"] == "mutation"]
    winner_true = world.true_mae(winner["text"], val_targets)
    verdict, verdict_false = _validation_verdict(world, folder / "run", cands, winner, val_targets)
    pruned_true = [world.true_mae(t, val_targets) for t in mutants.loc[mutants["status"] == "pruned", "text"]]
    accepted = int((mutants["status"] == "accepted").sum())
    return {
        "protocol": protocol, "seed": seed, "judge_calls": int(calls), "cache_hits": int(hits), "search_calls": search,
        "accepted": accepted, "shortfall": accepted < args.accepted,
        "pruned_better": sum(m < winner_true - 1e-12 for m in pruned_true),
        "better_verdict": verdict == "better", "false_better_verdict": verdict_false,
        "winner_true_mae": world.true_mae(winner["text"], val_targets), "best_initial_true_mae": init_true,
        "winner_evolved": winner["origin"] == "mutation",
        "pool_best_true_mae": min(world.true_mae(t, val_targets) for t in cands.loc[cands["status"] == "accepted", "text"]),
        "attempts": len(mutants), "pruned": int((mutants["status"] == "pruned").sum()),
        **{f"calls_{phase}": int(n) for phase, n in by_phase.items()},
    }


BUDGETS = {"quick": (8, 16, 60), "paper": (25, 50, 100)}  # accepted, attempts, targets (one per case)


@dataclass
class Cell:
    """One measured cell: a budget and a noise level, both protocols on the same worlds."""

    accepted: int
    attempts: int
    cases: int
    noise: str

    @property
    def label(self) -> str:
        return f"{self.accepted} of <= {self.attempts}, {self.cases} targets, {self.noise} noise"


def run_cell(cell: Cell, args: argparse.Namespace) -> pd.DataFrame:
    """Every protocol on ``args.seeds`` worlds of one cell; one row per (protocol, world)."""
    run_args = argparse.Namespace(**{**vars(args), "accepted": cell.accepted, "attempts": cell.attempts})
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        prompts = _prompts_root(tmp)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            world = World.make(1000 + seed, cell.cases, cell.noise)
            for protocol in args.protocols:
                rows.append(run_once(world, tmp, prompts, seed, protocol, run_args))
            if args.rows:  # every finished world kept, so an interrupted bench can still be summarized
                _save_rows(args.rows, cell, rows[-len(args.protocols):])
    return _derived(pd.DataFrame(rows))


def _save_rows(path: Path, cell: Cell, rows: list[dict]) -> None:
    extra = {"accepted_asked": cell.accepted, "attempts_allowed": cell.attempts, "cases": cell.cases, "noise": cell.noise}
    columns = [*extra, *(k for k in rows[0] if not k.startswith("calls_")),
               *(f"calls_{phase}" for phase in ("evolution", "noise", "finalist", "reeval"))]
    frame = pd.DataFrame([{**extra, **r} for r in rows]).reindex(columns=columns)  # one column order in every append
    frame.to_csv(path, mode="a", header=not path.exists(), index=False)


def _derived(frame: pd.DataFrame) -> pd.DataFrame:
    """The per-run flags the summary averages."""
    frame["false_winner"] = frame["winner_true_mae"] > frame["best_initial_true_mae"] + 1e-12
    frame["false_evolved"] = frame["false_winner"] & frame["winner_evolved"]
    frame["worse_initial_kept"] = frame["false_winner"] & ~frame["winner_evolved"]
    frame["gain_vs_initial"] = frame["best_initial_true_mae"] - frame["winner_true_mae"]
    frame["any_pruned_better"] = frame["pruned_better"] > 0
    return frame


def _bootstrap(diff: np.ndarray, n: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    boots = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(n)]
    return float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def summarize(frame: pd.DataFrame, cell: Cell, seconds: float) -> dict:
    """Print one cell's tables; return its target figures (default protocol against paper)."""
    summary = frame.groupby("protocol", sort=False).agg(
        runs=("seed", "size"), judge_calls=("judge_calls", "mean"), cache_hits=("cache_hits", "mean"),
        search_calls=("search_calls", "mean"),
        winner_true_mae=("winner_true_mae", "mean"), best_initial_true_mae=("best_initial_true_mae", "mean"),
        gain_vs_initial=("gain_vs_initial", "mean"), false_winner_rate=("false_winner", "mean"),
        false_evolved_rate=("false_evolved", "mean"), worse_initial_kept_rate=("worse_initial_kept", "mean"),
        evolved_winner_rate=("winner_evolved", "mean"), attempts=("attempts", "mean"), accepted=("accepted", "mean"),
        shortfall_rate=("shortfall", "mean"), pruned=("pruned", "mean"), pruned_better=("pruned_better", "mean"),
        pruned_better_runs=("any_pruned_better", "mean"), better_verdicts=("better_verdict", "mean"),
        false_better_verdicts=("false_better_verdict", "mean"),
    )
    print(f"\n== {cell.label}: {frame['seed'].nunique()} worlds x {frame['protocol'].nunique()} protocols; {seconds:.0f} s")
    print(summary.T.to_string(float_format=lambda x: f"{x:.3f}"))
    phases = [c for c in frame.columns if c.startswith("calls_")]
    print("judge calls made per phase (mean per run; cache hits excluded):")
    print(frame.groupby("protocol", sort=False)[phases].mean().to_string(float_format=lambda x: f"{x:.0f}"))
    paper, default = summary.loc["paper"], summary.loc["default"]
    paired = frame.pivot(index="seed", columns="protocol", values="winner_true_mae")
    diff = (paired["default"] - paired["paper"]).to_numpy()
    low, high = _bootstrap(diff)
    ratio = paper.judge_calls / default.judge_calls
    print(f"judge calls made, paper / default: {ratio:.2f}x in total, "
          f"{paper.search_calls / default.search_calls:.2f}x in the search (evolution + finalists); cache hits "
          f"(not paid, not counted as calls): paper {paper.cache_hits:.0f}, default {default.cache_hits:.0f} per run")
    print(f"winner's true validation MAE, default - paper (paired by world): {diff.mean():+.4f} "
          f"[{low:+.4f}, {high:+.4f}] (bootstrap over worlds, 95%)")
    print(f"false-winner rate (winner truly worse than the best initial prompt): paper {paper.false_winner_rate:.0%}, "
          f"default {default.false_winner_rate:.0%}; of which an evolved winner (a false 'better'): paper "
          f"{paper.false_evolved_rate:.0%}, default {default.false_evolved_rate:.0%}; the worse initial prompt kept: "
          f"paper {paper.worse_initial_kept_rate:.0%}, default {default.worse_initial_kept_rate:.0%}")
    print(f"validation verdict 'better' than the best initial prompt (the report's): paper "
          f"{paper.better_verdicts:.0%}, default {default.better_verdicts:.0%} of runs; false (the winner truly not "
          f"better): paper {paper.false_better_verdicts:.0%}, default {default.false_better_verdicts:.0%}")
    print(f"pruned mutants truly better (validation) than the run's winner: {default.pruned_better:.2f} per run, "
          f"in {default.pruned_better_runs:.0%} of runs; accepted short of {cell.accepted}: paper "
          f"{paper.shortfall_rate:.0%}, default {default.shortfall_rate:.0%} of runs (mean accepted "
          f"{paper.accepted:.1f} / {default.accepted:.1f})")
    return {"cell": cell.label, "worlds": int(frame["seed"].nunique()), "paper_calls": paper.judge_calls,
            "default_calls": default.judge_calls, "ratio": ratio, "diff": float(diff.mean()), "low": low, "high": high,
            "false_better": default.false_evolved_rate, "false_better_paper": paper.false_evolved_rate,
            "false_verdict": default.false_better_verdicts, "false_verdict_paper": paper.false_better_verdicts,
            "pruned_better_runs": default.pruned_better_runs, "shortfall": default.shortfall_rate}


def targets(row: dict) -> list[tuple[str, str, bool | None]]:
    """Issue 25 item 4's targets for one cell: (name, measured, met; None = reported only)."""
    shown_worse = row["low"] > 0
    return [
        ("fewer judge calls than the paper protocol", f"{row['paper_calls']:.0f} / {row['default_calls']:.0f} = "
         f"{row['ratio']:.2f}x", row["ratio"] > 1),
        ("true validation MAE not shown worse", f"{row['diff']:+.4f} [{row['low']:+.4f}, {row['high']:+.4f}]",
         not shown_worse),
        ("false 'better' verdicts on validation <= 5% of runs",
         f"{row['false_verdict']:.0%} (paper {row['false_verdict_paper']:.0%})", row["false_verdict"] <= 0.05),
        ("evolved winner truly worse than the best initial prompt", f"{row['false_better']:.0%} (paper "
         f"{row['false_better_paper']:.0%})", None),
        ("runs where a pruned mutant was truly better than the winner", f"{row['pruned_better_runs']:.0%}", None),
        ("runs short of the accepted budget (warned)", f"{row['shortfall']:.0%}", None),
    ]


def print_targets(rows: list[dict]) -> None:
    print("\nissue 25 item 4 targets, default protocol against the paper protocol:")
    print("| cell (worlds) | target | measured | |")
    print("|---|---|---|---|")
    for row in rows:
        for name, measured, met in targets(row):
            verdict = "reported" if met is None else ("met" if met else "NOT met")
            print(f"| {row['cell']} ({row['worlds']}) | {name} | {measured} | {verdict} |")


def _validation_verdict(world: World, run: Path, cands: pd.DataFrame, winner: pd.Series,
                        val_targets: list[str]) -> tuple[str, bool]:
    """The report's paired verdict, winner - best initial prompt on validation (the re-evaluation's
    calls, :func:`evolve.stats.paired_mae_difference`), and whether a ``better`` is false (the
    winner's true validation MAE is not below the best initial prompt's)."""
    best = cands[cands["best_initial"] == "True"]
    if best.empty or best.iloc[0]["candidate_id"] == winner["candidate_id"]:
        return "same candidate", False
    scores = pd.read_csv(run / "scores.csv", dtype={"candidate_id": str, "target_id": str, "case_id": str})
    val = scores[(scores["phase"] == "reeval") & (scores["split"] == "validation")]
    ratings = pd.DataFrame([{"case_id": f"case-{t}", "target_id": t, "rater_id": f"rater-{k + 1}",
                             "criterion": "entailment", "score": r}
                            for t in val_targets for k, r in enumerate(world.ratings[t])])
    other = best.iloc[0]
    d = paired_mae_difference(val[val["candidate_id"] == winner["candidate_id"]],
                              val[val["candidate_id"] == other["candidate_id"]], ratings)
    truly_better = world.true_mae(winner["text"], val_targets) < world.true_mae(other["text"], val_targets) - 1e-12
    return d.verdict, d.verdict == "better" and not truly_better


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20, help="worlds (and run seeds) per protocol (>= 20 for the claim)")
    ap.add_argument("--noise", choices=sorted(NOISE), default="high")
    ap.add_argument("--cases", type=int, default=100, help="targets (one per case)")
    ap.add_argument("--validation-fraction", type=float, default=0.5)
    ap.add_argument("--accepted", type=int, default=25, help="accepted mutants per criterion (the paper's 25)")
    ap.add_argument("--attempts", type=int, default=50)
    ap.add_argument("--grid", action="store_true",
                    help="both budgets (quick: 8 of <= 16, 60 targets; paper: 25 of <= 50, 100 targets) at both noise "
                         "levels; --accepted/--attempts/--cases/--noise are then ignored")
    ap.add_argument("--budgets", default="quick,paper", help="with --grid: which budgets (comma-separated)")
    ap.add_argument("--first-seed", type=int, default=0, help="worlds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--rows", type=Path, help="append one row per run to this CSV as each world finishes")
    ap.add_argument("--summarize", type=Path, nargs="+", metavar="CSV",
                    help="no runs: print the tables of rows saved by --rows (several files are pooled)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=JSON",
                    help="override a setting of the default protocol, e.g. selection.finalists=2")
    args = ap.parse_args()
    args.protocols = list(PROTOCOLS)
    for item in args.set:
        key, value = item.split("=", 1)
        section, field = key.split(".", 1)
        PROTOCOLS["default"].setdefault(section, {})[field] = json.loads(value)
    if args.grid:
        cells = [Cell(*BUDGETS[b], noise) for b in args.budgets.split(",") for noise in ("low", "high")]
    else:
        cells = [Cell(args.accepted, args.attempts, args.cases, args.noise)]
    print(f"bench/racing.py: default protocol {json.dumps(PROTOCOLS['default'])}")
    rows = []
    if args.summarize:
        saved = pd.concat([pd.read_csv(p) for p in args.summarize], ignore_index=True)
        for (asked, allowed, cases, noise), frame in saved.groupby(["accepted_asked", "attempts_allowed", "cases", "noise"],
                                                                   sort=False):
            frame = frame.drop_duplicates(["seed", "protocol"])  # a world saved twice counts once
            frame = frame.groupby("seed").filter(lambda g: g["protocol"].nunique() == len(PROTOCOLS))  # whole worlds
            rows.append(summarize(_derived(frame.drop(columns=[c for c in frame if c.startswith("calls_")
                                                              and frame[c].isna().all()])),
                                  Cell(int(asked), int(allowed), int(cases), str(noise)), 0.0))
        print_targets(rows)
        return
    for cell in cells:
        start = time.perf_counter()
        frame = run_cell(cell, args)
        rows.append(summarize(frame, cell, time.perf_counter() - start))
    print_targets(rows)


if __name__ == "__main__":
    main()
