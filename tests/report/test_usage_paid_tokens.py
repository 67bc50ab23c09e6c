"""The "Calls and tokens" table says what was paid: the tokens of calls sent, with what the run
represents (cache hits included) beside it, and totals of every count."""

from __future__ import annotations

from pathlib import Path

from evolve.outputs import CallCounts, Usage
from evolve.report import render_usage, usage_report
from evolve.runs import CALL_COUNTS, Event, Journal


def _calls(**counts: int) -> list[int]:
    return [counts.get(name, 0) for name in CALL_COUNTS]


def test_totals_hold_every_count_and_the_table_gives_paid_tokens(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(Event.CALLS, session="a", counts={
        "judge": _calls(calls=2, cache_hits=3, prompt_tokens=500, completion_tokens=50, billed_prompt_tokens=200,
                        billed_completion_tokens=20, cached_prompt_tokens=80),
        "mutation": _calls(calls=1, prompt_tokens=40, completion_tokens=10, billed_prompt_tokens=40,
                           billed_completion_tokens=10)})
    usage = usage_report(journal)
    total = usage["total"]
    assert (total["billed_prompt_tokens"], total["billed_completion_tokens"], total["cached_prompt_tokens"]) == (240, 30, 80)
    lines = render_usage(usage)
    text = "\n".join(lines)
    assert "| step | calls | answered | failed | cache hits | retries | paid prompt tokens | paid completion tokens |" in text
    assert "| judge | 2 | 2 | 0 | 3 | 0 | 200 | 20 |" in lines and "| **total** | 3 | 3 | 0 | 3 | 0 | 240 | 30 |" in lines
    assert "with the cache hits' the run represents 540 prompt and 60 completion tokens" in text
    assert "a model failure where the report counts outcomes" in text


def test_a_run_wholly_from_the_cache_paid_nothing_and_an_old_journal_says_what_its_tokens_are() -> None:
    cached = CallCounts(cache_hits=174, prompt_tokens=8700, completion_tokens=1740)
    lines = render_usage(Usage(by_tag={"judge": cached}, total=cached))
    assert "| judge | 0 | 0 | 0 | 174 | 0 | 0 | 0 |" in lines
    old = CallCounts(calls=4, prompt_tokens=400, completion_tokens=40)  # before paid tokens were journaled
    lines = render_usage(Usage(by_tag={"judge": old}, total=old))
    assert "| judge | 4 | 4 | 0 | 0 | 0 | 400 | 40 |" in lines and "Tokens include the cache hits'" in "\n".join(lines)
