"""Time evolve.stats.agreement_table (all six statistics, case-clustered bootstrap) on synthetic pairs.

Usage::

    python bench/stats_bootstrap.py [--pairs 10000] [--cases 200] [--n-boot 2000] [--seed 0]

Prints one JSON object: the seconds of one ``agreement_table`` call, the median seconds of a
plain ``mae`` on the same pairs, their ratio (both measured in this one run), and, for
comparison, ``cluster_bootstrap`` with the plain ``mae`` statistic (one statistic, one call
per replicate). Numbers depend on the CPU and on whatever else runs on it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import pandas as pd

from evolve.stats import agreement_table, cluster_bootstrap, mae


def synthetic_pairs(n_pairs: int, n_cases: int, seed: int) -> pd.DataFrame:
    """0-3 judge vs rater scores with a per-case judge shift, cases of unequal size."""
    rng = np.random.default_rng(seed)
    case = rng.integers(0, n_cases, n_pairs)
    shift = rng.normal(0.0, 0.6, n_cases)[case]
    rater = rng.integers(0, 4, n_pairs)
    judge = np.clip(np.rint(rater + shift + rng.normal(0.0, 0.7, n_pairs)), 0, 3).astype(int)
    return pd.DataFrame({"case_id": [f"case-{c:04d}" for c in case], "judge": judge, "rater": rater})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    pairs = synthetic_pairs(args.pairs, args.cases, args.seed)
    judge, rater = pairs["judge"].to_numpy(), pairs["rater"].to_numpy()

    mae_times = []
    for _ in range(51):
        t = time.perf_counter()
        mae(judge, rater)
        mae_times.append(time.perf_counter() - t)
    plain = statistics.median(mae_times)

    t = time.perf_counter()
    table = agreement_table(pairs, [0, 1, 2, 3], n_boot=args.n_boot, seed=args.seed)
    full = time.perf_counter() - t

    t = time.perf_counter()
    cluster_bootstrap(pairs, mae, n_boot=args.n_boot, seed=args.seed)
    generic = time.perf_counter() - t

    result = {
        "pairs": args.pairs,
        "cases": int(pairs["case_id"].nunique()),
        "n_boot": args.n_boot,
        "plain_mae_s": round(plain, 6),
        "agreement_table_s": round(full, 3),
        "agreement_table_over_plain_mae_ratio": round(full / max(plain, 1e-12)),
        "cluster_bootstrap_mae_only_s": round(generic, 3),
        "estimates": {name: round(iv.estimate, 4) for name, iv in table.items()},
        "mae_interval": [round(table["mae"].low, 4), round(table["mae"].high, 4)],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
