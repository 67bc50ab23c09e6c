"""Table 5's judge calls are distinct requests: the same after a kill and resume."""

import pandas as pd

from evolve.report._report import repeated_requests


def test_a_repeated_request_is_a_cache_hit_whatever_the_cached_flag_says():
    scores = pd.DataFrame({
        "prompt_hash": ["a", "b", "a", "a", "", ""],
        "seed": [1, 1, 1, 2, 1, 1],
        # a resumed run: the killed process paid for row 0, so the resume read it from the cache
        "cached": ["True", "False", "True", "False", "False", "False"],
    })
    assert repeated_requests(scores).tolist() == [False, False, True, False, False, False]


def test_runs_without_prompt_hashes_fall_back_on_the_cached_flag():
    scores = pd.DataFrame({"cached": ["True", "False"]})
    assert repeated_requests(scores).tolist() == [True, False]
