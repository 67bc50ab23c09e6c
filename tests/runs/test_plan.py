"""The cost plan's records: arithmetic, rendering, token counting and measured throughput."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from evolve.runs import CallPlan, PhasePlan, Price, count_tokens, estimate_tokens, measured_calls_per_hour, tokenize_url
from evolve.testing import LoopbackChatServer


def _plan() -> CallPlan:
    return CallPlan(command="evolve calibrate", token_source="estimate: 3.5 characters per token", phases=(
        PhasePlan(phase="initial evaluation", calls_low=100, calls_high=100, prompt_tokens_low=200_000,
                  prompt_tokens_high=200_000, completion_tokens_low=10_000, completion_tokens_high=10_000,
                  cached_prompt_tokens_low=150_000, cached_prompt_tokens_high=150_000, batchable=True),
        PhasePlan(phase="evolution", calls_low=40, calls_high=400, prompt_tokens_low=80_000, prompt_tokens_high=800_000,
                  completion_tokens_low=4_000, completion_tokens_high=40_000, note="racing"),
    ))


def test_totals_add_every_phase_and_batchable_only_when_all_are():
    total = _plan().totals()
    assert (total.calls_low, total.calls_high) == (140, 500)
    assert (total.prompt_tokens_low, total.prompt_tokens_high) == (280_000, 1_000_000)
    assert (total.completion_tokens_low, total.completion_tokens_high) == (14_000, 50_000)
    assert total.cached_prompt_tokens_high == 150_000 and not total.batchable


def test_usd_interactive_batch_and_cached_prices():
    price = Price(2.0, 8.0, cached_input_usd_per_m=0.5, batch_input_usd_per_m=1.0, batch_output_usd_per_m=4.0)
    low, high = _plan().usd(price)
    assert low == pytest.approx((280_000 * 2 + 14_000 * 8) / 1e6)
    assert high == pytest.approx((1_000_000 * 2 + 50_000 * 8) / 1e6)
    # --batch: only the batchable phase (initial evaluation) at batch prices
    b_low, b_high = _plan().usd(price, batch=True)
    assert b_low == pytest.approx((200_000 * 1 + 10_000 * 4 + 80_000 * 2 + 4_000 * 8) / 1e6)
    assert b_high - b_low == pytest.approx(high - low)  # the interactive phase's range is unchanged
    # the cached share of the initial evaluation at the cached price
    c_low, _ = _plan().usd(price, cached=True)
    assert c_low == pytest.approx(low - 150_000 * (2.0 - 0.5) / 1e6)


def test_hours_and_refused_throughput():
    assert _plan().hours(100) == (1.4, 5.0)
    with pytest.raises(ValueError, match="positive"):
        _plan().hours(0)


def test_render_shows_ranges_money_hours_and_how_to_get_what_is_missing():
    text = _plan().render(Price(2.0, 8.0, batch_input_usd_per_m=1.0, batch_output_usd_per_m=4.0), 100,
                          throughput_source="--calls-per-hour")
    lines = text.splitlines()
    assert lines[0] == "Plan of evolve calibrate (no call made)"
    assert lines[1].split() == ["phase", "calls", "prompt", "tokens", "completion", "tokens", "USD", "batch"]
    assert lines[3].split()[:2] == ["evolution", "40-400"] and lines[3].split()[-1] == "no"
    assert lines[4].split()[:2] == ["total", "140-500"]
    assert "$0.6720-$2.40" in lines[4]  # 280k x 2 + 14k x 8 = 0.672; 1M x 2 + 50k x 8 = 2.4
    assert any(line.startswith("USD at 2/8 per million") and "with --batch" in line for line in lines)
    assert "Hours at 100 calls per hour (--calls-per-hour): 1.4-5.0 h." in lines
    bare = _plan().render()
    assert "give --price-in and --price-out" in bare and "give --calls-per-hour" in bare and "USD" not in bare.splitlines()[1]
    assert "or plan with --resume RUN" in bare
    resumed = _plan().render(throughput_source="measured in archives/r/journal.jsonl")  # a resume with none measured
    assert "Hours: nothing was measured in archives/r/journal.jsonl yet" in resumed and "--resume RUN" not in resumed


def test_a_phase_refuses_a_low_end_above_its_high_end():
    with pytest.raises(ValidationError, match="calls_low"):
        PhasePlan(phase="x", calls_low=3, calls_high=2)
    with pytest.raises(ValidationError, match="cached"):
        PhasePlan(phase="x", calls_low=1, calls_high=1, prompt_tokens_low=5, prompt_tokens_high=5,
                  cached_prompt_tokens_low=6, cached_prompt_tokens_high=6)


def test_of_calls_scales_the_mean_sizes_and_the_completion_range():
    p = PhasePlan.of_calls("x", 10, 20, prompt_tokens_per_call=100.5, completion_tokens_per_call=(5, 50), cached_share=0.5)
    assert (p.prompt_tokens_low, p.prompt_tokens_high) == (1005, 2010)
    assert (p.completion_tokens_low, p.completion_tokens_high) == (50, 1000)
    assert (p.cached_prompt_tokens_low, p.cached_prompt_tokens_high) == (502, 1005)


def test_the_servers_tokenizer_counts_a_sample_and_the_ratio_covers_the_rest():
    with LoopbackChatServer(lambda body: "unused", tokenize=lambda text: list(range(len(text) // 2))) as server:
        assert tokenize_url(server.base_url) == server.base_url[: -len("/v1")] + "/tokenize"
        texts = ["ab" * 10, "abcd" * 10, "x" * 100]
        counts, source = count_tokens(texts, base_url=server.base_url)
        assert counts == [10, 20, 50] and source.startswith("the server's tokenizer (POST ")
        assert server.tokenized == texts and server.bodies == []  # no completion request
        many = ["y" * 40] * 10
        counts, source = count_tokens(many, base_url=server.base_url, sample=3)
        assert counts == [20] * 10 and "on 3 of 10 prompts" in source and "2.00 characters per token" in source


def test_without_a_tokenizer_the_estimate_is_stated():
    with LoopbackChatServer(lambda body: "unused") as server:  # /tokenize answers 404
        counts, source = count_tokens(["z" * 35], base_url=server.base_url)
        assert counts == [10] and source.startswith("estimate: 3.5 characters per token") and "did not answer" in source
        assert server.tokenized == ["z" * 35] and server.bodies == []
    assert count_tokens(["z" * 36]) == ([11], "estimate: 3.5 characters per token")
    assert estimate_tokens("") == 0


def test_measured_throughput_leaves_out_pauses(tmp_path):
    journal = tmp_path / "journal.jsonl"
    assert measured_calls_per_hour(journal) is None  # no journal: nothing measured, nothing created
    assert not journal.exists()
    events = [{"t": 0.0, "event": "calls", "counts": {"judge": [1, 0]}},
              {"t": 10.0, "event": "calls", "counts": {"judge": [2, 5]}},
              {"t": 20.0, "event": "calls", "counts": {"judge": [0, 3]}},  # cache hits only: not a call
              {"t": 5000.0, "event": "calls", "counts": {"judge": [1, 0]}},  # after a pause: not timed
              {"t": 5030.0, "event": "calls", "counts": {"mutation": [3, 0], "judge": [1, 0]}}]
    journal.write_text("\n".join(json.dumps(e) for e in events) + "\n{torn")
    # 2 calls in 10 s, then 4 calls in 30 s: 6 calls in 40 s
    assert measured_calls_per_hour(journal) == pytest.approx(6 * 3600 / 40)


def test_cached_keys_reads_a_cache_without_creating_or_changing_it(tmp_path):
    from evolve.llm import ChatResponse, ResponseCache
    from evolve.runs import cached_keys

    path = tmp_path / "cache.sqlite"
    assert cached_keys(path, ["k1"]) == set() and not path.exists()  # no cache: nothing found, nothing created
    cache = ResponseCache(path)
    cache.put("k1", ChatResponse(text="x"))
    cache.close()
    before = path.read_bytes()
    assert cached_keys(path, ["k1", "k2", "k1"]) == {"k1"}
    assert path.read_bytes() == before
    assert cached_keys(path, [f"k{i}" for i in range(1200)]) == {"k1"}  # asked in chunks
