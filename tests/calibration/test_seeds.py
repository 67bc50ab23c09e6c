"""Seeds are hashed from (run seed, phase, criterion, repeat): no two run seeds share one."""

from __future__ import annotations

import pandas as pd

from evolve.calibration import derive_seed
from evolve.stats import agreement


def test_two_run_seeds_share_no_judge_or_mutation_seed():
    """Before: --seed 42 and --seed 43 shared half their re-evaluation seeds (42+1000+1 == 43+1000+0)."""
    def seeds(run_seed: int) -> set[int]:
        return {derive_seed(run_seed, phase, crit, r) for phase in ("evolution", "finalist", "reeval", "mutation")
                for crit in ("c1", "c2", "c3") for r in range(40)}

    a, b = seeds(42), seeds(43)
    assert len(a) == len(b) == 4 * 3 * 40  # distinct within a run too
    assert not a & b
    assert derive_seed(42, "reeval", "c1", 0) == derive_seed(42, "reeval", "c1", 0)  # stable: resumes replay it
    assert all(0 <= s < 2**31 - 1 for s in a)


def test_repeat_sd_is_empty_not_zero_with_one_repeat():
    ratings = pd.DataFrame({"case_id": ["k"] * 2, "target_id": ["t1", "t2"], "rater_id": ["r"] * 2,
                            "criterion": ["c"] * 2, "score": [1.0, 2.0], "not_evaluable": [False] * 2, "comment": [""] * 2})
    one = pd.DataFrame({"criterion": ["c"] * 2, "target_id": ["t1", "t2"], "repeat": [0, 0], "outcome": ["score"] * 2,
                        "score": [1.0, 3.0]})
    two = pd.concat([one, one.assign(repeat=1, score=[2.0, 2.0])])
    assert agreement(one, ratings).repeat_sd is None
    # per-repeat MAE: (0 + 1) / 2 = 0.5 and (1 + 0) / 2 = 0.5 -> SD 0.0, a measured zero
    assert agreement(two, ratings).repeat_sd == 0.0
