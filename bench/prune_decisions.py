"""CPU of one racing decision: ``evolve``'s pruning rule against scipy's ``wilcoxon`` alone.

Racing tests a mutant against the best candidate after every batch of training targets
(:func:`evolve.calibration._racing.prune_decision`). Judge errors are averages of small integers,
so the paired differences almost always hold ties or zeros, and for up to 13 of them scipy's
``wilcoxon`` runs an exhaustive sign-flip permutation test through its general machinery. The
rule now enumerates the same sign flips in one matrix product and gives scipy's p-value to the
bit (``tests/calibration/test_racing_noise.py``). This prints, for racing-like differences of
each size, the CPU per decision of both and their ratio, measured in this one run, and checks
that the p-values are identical.

    python bench/prune_decisions.py [--sizes 4 8 10 12 13] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np
from scipy import stats

from evolve.calibration._racing import prune_decision


def _differences(n: int, rng: np.random.Generator) -> np.ndarray:
    """Mutant-minus-best errors in quarter points, mostly worse, with ties and zeros."""
    return rng.choice(np.arange(-2, 7) / 4, size=n)


def _cpu_per_call(fn, repeats: int) -> float:
    start = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 10, 12, 13])
    parser.add_argument("--repeats", type=int, default=3, help="scipy calls per size (evolve's: 100 times as many)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'n':>3} {'scipy ms':>10} {'evolve ms':>10} {'ratio':>8}  same p")
    for n in args.sizes:
        d = _differences(n, rng)
        while d.mean() <= 0:
            d = _differences(n, rng)
        scipy_p = float(stats.wilcoxon(d, alternative="greater", zero_method="zsplit").pvalue)
        _, ours = prune_decision(d, p_threshold=0.05, margin=0.0)
        slow = _cpu_per_call(partial(stats.wilcoxon, d, alternative="greater", zero_method="zsplit"), args.repeats)
        fast = _cpu_per_call(partial(prune_decision, d, p_threshold=0.05, margin=0.0), 100 * args.repeats)
        print(f"{n:>3} {slow * 1e3:>10.2f} {fast * 1e3:>10.3f} {slow / fast:>8.0f}  {ours == scipy_p}")


if __name__ == "__main__":
    main()
