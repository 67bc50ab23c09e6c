"""Coverage of physician-anchored (PPI++) intervals against the naive judge-mean interval, on a
simulated judge of known bias and noise and simulated physician ratings.

Usage::

    python bench/ppi_coverage.py [--draws 1000] [--seed 0] [--setting NAME ...]

Each setting is a world: cases with a few outputs each; a physician rates an output 0-3
(an integer: the rounded, clipped sum of a case effect and an output effect); the judge scores
it three times on the same 0-3 scale, from the physician's underlying value plus the setting's
bias, a judge error shared by the case and noise per call, and its mean over the repeats is the
item's judge score. Each draw samples a rated set (physician and judge) and a larger judged set
(judge only) and computes, at nominal 95%:

- naive: the judge's raw mean of the judged set with a case-clustered interval;
- classical: the physicians' mean of the rated set alone (``ppi_mean(..., lam=0)``);
- PPI++: :func:`evolve.stats.ppi_mean` (power-tuned, case-clustered).

Coverage is the share of draws whose interval contains the physicians' true mean on the judged
kind of outputs (computed once per setting on 400,000 simulated outputs). ``eff. n`` is the
estimator's own ``effective_n`` (mean over draws); ``emp. n`` is the same figure measured:
rated items times the variance of the classical estimates over draws over that of the PPI++
estimates. The ``diff-*`` settings check :func:`evolve.stats.ppi_mean_difference` for two systems
answering the same cases: anchored by one shared rated sample (the estimate is then the judge's
raw difference, valid only as far as the judge's mean error is the same on both systems'
outputs) or by a rated sample of each system.
The last line per setting says whether PPI++ coverage reached 93%.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evolve.stats import PPIEstimate, ppi_mean, ppi_mean_difference

TARGET = 0.93
REPEATS = 3


@dataclass(frozen=True)
class World:
    """One simulated setting (score points on the 0-3 scale)."""

    name: str
    what: str
    bias: float = 0.3          # judge minus physician on the underlying value
    slope: float = 1.0         # judge's response to the physician's value (< 1: bias depends on the truth)
    case_error: float = 0.2    # SD of a judge error shared by all outputs of a case
    noise: float = 0.5         # SD of the judge's error per call
    rated_cases: int = 30
    judged_cases: int = 150
    items: tuple[int, int] = (1, 4)  # outputs per case, uniform between these (inclusive)
    system_shift: float = 0.0  # difference settings: system B's outputs are better by this
    separate_rated: bool = False  # difference settings: each system has its own rated sample

    def sample(self, rng: np.random.Generator, n_cases: int, shift: float = 0.0, prefix: str = "c",
               cases: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
        """``n_cases`` cases with their outputs: case_id, physician (0-3 integer), judge (mean of repeats).

        ``cases`` (outputs per case, case effects) lets a second system answer the same cases.
        """
        sizes, effect = cases if cases is not None else self.cases(rng, n_cases)
        case = np.repeat(np.arange(n_cases), sizes)
        n = len(case)
        latent = 1.6 + shift + effect[case] + rng.normal(0, 0.7, n)
        physician = np.clip(np.rint(latent), 0, 3)
        centre = 1.5 + self.slope * (latent - 1.5) + self.bias + rng.normal(0, self.case_error, n_cases)[case]
        calls = np.clip(np.rint(centre[:, None] + rng.normal(0, self.noise, (n, REPEATS))), 0, 3)
        return pd.DataFrame({"case_id": [f"{prefix}{i}" for i in case], "physician": physician,
                             "judge": calls.mean(axis=1)})

    def cases(self, rng: np.random.Generator, n_cases: int) -> tuple[np.ndarray, np.ndarray]:
        """Outputs per case and each case's effect on the physicians' score (SD 0.7)."""
        return rng.integers(self.items[0], self.items[1] + 1, size=n_cases), rng.normal(0, 0.7, n_cases)

    def truth(self, shift: float = 0.0) -> float:
        """The physicians' mean over 400,000 simulated outputs of this kind (item-weighted)."""
        big = self.sample(np.random.default_rng(12345), 160_000, shift)
        return float(big["physician"].mean())


WORLDS = [
    World("lenient", "judge +0.3 above the physician, call noise 0.5"),
    World("truth-dependent", "judge compresses the scale (slope 0.5) and adds +0.3: its bias depends on the truth",
          slope=0.5),
    World("noisy", "judge -0.4 below, call noise 1.2 and case error 0.5: a weak judge", bias=-0.4, noise=1.2,
          case_error=0.5),
    World("case-error", "judge +0.3, a large error shared within each case (SD 0.6)", case_error=0.6),
    World("few-rated", "as lenient, but only 12 rated cases (the minimum is 10)", rated_cases=12),
    World("diff-shared", "A minus B, both answering the same 150 cases, B better by 0.3; one rated sample (30 cases, "
          "drawn like A's outputs) anchors both; judge +0.3 on both, but clipping at 0 and 3 makes its mean error "
          "0.03 smaller on B's better outputs", system_shift=0.3),
    World("diff-separate", "as diff-shared, but each system has its own 30 rated cases", system_shift=0.3,
          separate_rated=True),
]


@dataclass
class Tally:
    """Per-setting sums over draws."""

    draws: int = 0
    refused: int = 0
    cover: dict[str, int] = field(default_factory=dict)
    width: dict[str, float] = field(default_factory=dict)
    ppi: list[float] = field(default_factory=list)
    classical: list[float] = field(default_factory=list)
    lam: float = 0.0
    eff_n: float = 0.0
    n_rated: float = 0.0

    def add(self, key: str, low: float | None, high: float | None, truth: float) -> None:
        assert low is not None and high is not None
        self.cover[key] = self.cover.get(key, 0) + int(low <= truth <= high)
        self.width[key] = self.width.get(key, 0.0) + (high - low)


def _single(world: World, rng: np.random.Generator, truth: float, tally: Tally) -> None:
    rated = world.sample(rng, world.rated_cases, prefix="r")
    judged = world.sample(rng, world.judged_cases, prefix="u")[["case_id", "judge"]]
    est = ppi_mean(rated, judged)
    if est.refused:
        tally.refused += 1
        return
    classical = ppi_mean(rated, judged, lam=0.0)
    _record(tally, est, truth)
    tally.add("classical", classical.low, classical.high, truth)


def _difference(world: World, rng: np.random.Generator, truth: float, tally: Tally) -> None:
    rated = world.sample(rng, world.rated_cases, prefix="r")
    rated_b = world.sample(rng, world.rated_cases, shift=world.system_shift, prefix="s") if world.separate_rated else rated
    # the same cases answered by both systems: one case effect, system B's outputs shifted up
    shared = world.cases(rng, world.judged_cases)
    a = world.sample(rng, world.judged_cases, prefix="u", cases=shared)
    b = world.sample(rng, world.judged_cases, shift=world.system_shift, prefix="u", cases=shared)
    est = ppi_mean_difference(rated, a[["case_id", "judge"]], rated_b, b[["case_id", "judge"]])
    if est.refused:
        tally.refused += 1
        return
    _record(tally, est, truth)


def _record(tally: Tally, est: PPIEstimate, truth: float) -> None:
    assert est.estimate is not None
    tally.draws += 1
    tally.add("naive", est.judge_low, est.judge_high, truth)
    tally.add("ppi", est.low, est.high, truth)
    tally.ppi.append(est.estimate)
    tally.lam += est.lam or 0.0
    tally.n_rated += est.n_rated
    if est.rated_mean is not None and est.effective_n is not None:  # classical estimate: the rated mean(s)
        tally.classical.append(est.rated_mean)
        tally.eff_n += est.effective_n


def run(world: World, draws: int, seed: int) -> dict:
    """Coverage, widths and effective n of one setting over ``draws`` draws."""
    rng = np.random.default_rng([seed, WORLDS.index(world)])
    diff = world.system_shift != 0.0
    truth = world.truth() - world.truth(world.system_shift) if diff else world.truth()
    tally = Tally()
    for _ in range(draws):
        (_difference if diff else _single)(world, rng, truth, tally)
    d = max(tally.draws, 1)
    row: dict[str, Any] = {"setting": world.name, "truth": truth, "draws": tally.draws, "refused": tally.refused,
           "lam": tally.lam / d, "n_rated": tally.n_rated / d}
    for key in ("naive", "classical", "ppi"):
        row[f"{key}_cover"] = tally.cover[key] / d if key in tally.cover else math.nan
        row[f"{key}_width"] = tally.width[key] / d if key in tally.width else math.nan
    if tally.classical:
        row["eff_n"] = tally.eff_n / d
        row["emp_n"] = row["n_rated"] * float(np.var(tally.classical)) / float(np.var(tally.ppi))
    else:
        row["eff_n"] = row["emp_n"] = math.nan
    return row


def _fmt(x: float, spec: str) -> str:
    return "-" if isinstance(x, float) and math.isnan(x) else format(x, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=1000, help="draws per setting (>= 500 for the issue's check)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--setting", action="append", choices=[w.name for w in WORLDS],
                        help="run only these settings (repeatable)")
    args = parser.parse_args()
    worlds = [w for w in WORLDS if not args.setting or w.name in args.setting]
    print(f"PPI coverage bench: {args.draws} draws per setting, nominal 95%, target >= {TARGET:.0%} for PPI++\n")
    for w in worlds:
        print(f"- {w.name}: {w.what}; {w.rated_cases} rated cases, {w.judged_cases} judged cases, "
              f"{w.items[0]}-{w.items[1]} outputs per case")
    header = ("| setting | true mean | naive cover | naive width | classical cover | classical width | PPI++ cover "
              "| PPI++ width | mean lam | rated items | eff. n | emp. n |")
    print("\n" + header + "\n|" + "---|" * 12)
    rows, start = [], time.perf_counter()
    for w in worlds:
        r = run(w, args.draws, args.seed)
        rows.append(r)
        print(f"| {r['setting']} | {r['truth']:.3f} | {_fmt(r['naive_cover'], '.1%')} | {_fmt(r['naive_width'], '.3f')} "
              f"| {_fmt(r['classical_cover'], '.1%')} | {_fmt(r['classical_width'], '.3f')} "
              f"| {_fmt(r['ppi_cover'], '.1%')} | {_fmt(r['ppi_width'], '.3f')} | {r['lam']:.2f} "
              f"| {r['n_rated']:.0f} | {_fmt(r['eff_n'], '.0f')} | {_fmt(r['emp_n'], '.0f')} |", flush=True)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    for r in rows:
        met = r["ppi_cover"] >= TARGET
        print(f"{r['setting']}: PPI++ coverage {r['ppi_cover']:.1%} over {r['draws']} draws "
              f"({r['refused']} refused) vs naive {r['naive_cover']:.1%}: target >= {TARGET:.0%} "
              f"{'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
