"""Progress that shows what costs money: the meter's arithmetic (tokens, USD spent and
expected, cached calls free), and the engines reporting every finished call's tokens."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from evolve.calibration import calibrate
from evolve.config import resolve_config
from evolve.consilium import run_bench
from evolve.errors import ConfigError
from evolve.llm import ChatResponse, Client, ResponseCache
from evolve.otb import generate_otb, judge_otb
from evolve.runs import CallMeter, EndpointSettings, Price, on_call, price_of, report_step
from evolve.testing import FakeProvider
from tests.conftest import fake_endpoint
from tests.consilium.bench_support import make_client, make_config, standin_backend, standin_endpoint, write_cases
from tests.otb.test_run_judge import Endpoint as OtbEndpoint
from tests.otb.test_run_judge import _config as otb_config
from tests.otb.test_run_judge import files  # noqa: F401 (a fixture)

PRICE = Price(input_usd_per_m=1000.0, output_usd_per_m=5000.0)  # 50 in + 10 out tokens: $0.05 + $0.05


class Recorder:
    """A progress hook that keeps every phase and every advance."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, str, int, str]] = []
        self.steps: list[tuple[str, int, int, int, bool]] = []
        self.prefix_cached: list[int] = []  # cached_prompt_tokens of each advance, in step order
        self.batch: list[bool] = []  # whether each advance was of Batch API calls
        self._lock = threading.Lock()

    def phase(self, description: str, total: int, key: str = "", unit: str = "calls") -> None:
        with self._lock:
            self.phases.append((key, description, total, unit))

    def advance(self, n: int = 1, key: str = "", prompt_tokens: int = 0, completion_tokens: int = 0,
                cached: bool = False, cached_prompt_tokens: int = 0, batch: bool = False) -> None:
        with self._lock:
            self.steps.append((key, n, prompt_tokens, completion_tokens, cached))
            self.prefix_cached.append(cached_prompt_tokens)
            self.batch.append(batch)


# -- the meter ----------------------------------------------------------------------------------


def test_batch_calls_are_priced_at_the_batch_prices_on_the_bar():
    from evolve.llm import ChatResponse

    price = Price(1.0, 2.0, batch_input_usd_per_m=0.5, batch_output_usd_per_m=1.0)
    hook = Recorder()
    interactive = ChatResponse(text="a", prompt_tokens=1_000_000, completion_tokens=1_000_000)
    batch = interactive.model_copy(update={"batch": True})
    hit = interactive.model_copy(update={"cached": True})
    report_step(hook, "k", [interactive, batch, hit])
    assert [s[1] for s in hook.steps] == [1, 0, 0] and hook.batch == [False, True, False]  # one step, three parts
    meter = CallMeter(price=price)
    for (_, n, p, c, cached), is_batch in zip(hook.steps, hook.batch):
        meter.add(n, prompt_tokens=p, completion_tokens=c, cached=cached, batch=is_batch)
    assert meter.done == 1 and meter.spent_usd() == pytest.approx(3.0 + 1.5)  # the cache hit is free
    only_batch = CallMeter(price=price)
    only_batch.add(1, prompt_tokens=2_000_000, completion_tokens=0, batch=True)
    assert only_batch.spent_usd() == pytest.approx(1.0) and CallMeter(price=Price(1.0, 2.0)).spent_usd() == 0


def test_price_is_usd_per_million_tokens():
    assert Price(2.0, 8.0).usd(1_000_000, 500_000) == pytest.approx(6.0)
    assert PRICE.usd(50, 10) == pytest.approx(0.10)


def test_spent_and_expected_count_cached_calls_free_and_assume_the_rest_paid():
    meter = CallMeter(total=10, price=PRICE)
    meter.add(prompt_tokens=50, completion_tokens=10)
    meter.add(prompt_tokens=50, completion_tokens=10)
    meter.add(prompt_tokens=50, completion_tokens=10, cached=True)
    assert (meter.done, meter.cached, meter.remaining, meter.tokens) == (3, 1, 7, 180)
    assert (meter.billed_prompt_tokens, meter.billed_completion_tokens) == (100, 20)
    assert meter.tokens_to_go() == 7 * 60  # mean 60 tokens a call so far x 7 left
    assert meter.spent_usd() == pytest.approx(0.20)  # the cached call cost nothing
    assert meter.expected_usd() == pytest.approx(0.20 + 7 * 0.10)  # the 7 left at the mean size, paid
    assert meter.describe("judge calls") == (
        "3/10 judge calls (1 cached), 7 left · 180 tokens, ~420 to go · $0.20 spent, ~$0.90 expected")


def test_a_finished_phase_expects_what_it_spent_and_an_unpriced_one_shows_no_money():
    meter = CallMeter(total=2, price=PRICE)
    meter.add(2, prompt_tokens=100, completion_tokens=20)
    assert meter.tokens_to_go() == 0 and meter.expected_usd() == pytest.approx(meter.spent_usd()) == pytest.approx(0.20)
    free = CallMeter(total=4)
    free.add(prompt_tokens=1500, completion_tokens=500)
    assert free.spent_usd() is None and free.expected_usd() is None
    assert free.describe("mutation calls") == "1/4 mutation calls, 3 left · 2.0k tokens, ~6.0k to go"
    assert "$" not in free.describe()


def test_before_the_first_call_nothing_is_estimated_and_all_work_has_no_total():
    meter = CallMeter(total=10, price=PRICE)
    assert meter.tokens_to_go() is None and meter.expected_usd() is None and meter.spent_usd() == 0.0
    assert meter.describe("judge calls") == "0/10 judge calls, 10 left · 0 tokens · $0.00 spent"
    run = CallMeter(price=Price(0.15, 0.60))
    run.add(3, prompt_tokens=1_200_000, completion_tokens=300_000)
    assert run.remaining is None and run.expected_usd() is None and run.tokens_to_go() is None
    assert run.spent_usd() == pytest.approx(0.18 + 0.18)
    assert run.describe() == "3 calls · 1.5M tokens · $0.36 spent"
    small = CallMeter(price=PRICE)
    small.add(prompt_tokens=0, completion_tokens=0)
    small.add(prompt_tokens=1, completion_tokens=0)
    assert small.describe().endswith("$0.0010 spent")  # two significant digits below a dollar
    big = CallMeter(price=PRICE)
    big.add(prompt_tokens=1_234_500, completion_tokens=0)
    assert big.describe().endswith("$1,234.50 spent")


def test_prices_come_in_pairs():
    assert price_of(None, None) is None
    assert price_of(0.15, 0.6) == Price(0.15, 0.6)
    assert price_of(0, 0) == Price(0, 0)  # a free endpoint still shows $0.00
    with pytest.raises(ConfigError, match="both prices"):
        price_of(0.15, None)
    with pytest.raises(ConfigError, match="negative"):
        price_of(-1, 1)
    assert EndpointSettings(provider="fake", price_in=0.15, price_out=0.6).price_in == 0.15
    with pytest.raises(ValidationError, match="go together"):
        EndpointSettings(provider="fake", price_in=0.15)
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        EndpointSettings(provider="fake", price_in=-0.1, price_out=0.6)


def test_a_config_file_carries_the_prices(tmp_path, tiny_pack_dir, tiny_splits_dir):
    file = tmp_path / "c.json"
    file.write_text('{"endpoint": {"provider": "fake", "price_in": 0.15, "price_out": 0.6}}')
    given = {"run_id": "r", "pack": tiny_pack_dir, "splits": tiny_splits_dir}
    config = resolve_config(preset="quick", config_file=file, environ={}, overrides=given)
    assert (config.endpoint.price_in, config.endpoint.price_out) == (0.15, 0.6)
    options = resolve_config(preset="quick", config_file=file, environ={},  # the options win
                             overrides={**given, "endpoint": {"price_in": 3.0, "price_out": 15.0}})
    assert (options.endpoint.price_in, options.endpoint.price_out) == (3.0, 15.0)
    file.write_text('{"endpoint": {"provider": "fake", "price_in": 0.15}}')
    with pytest.raises(ConfigError, match="'endpoint'.*go together"):
        resolve_config(preset="quick", config_file=file, environ={}, overrides=given)


def test_a_step_charges_only_its_calls_not_served_from_the_cache():
    hook = Recorder()
    fresh, cached = ChatResponse(text="a", prompt_tokens=50, completion_tokens=10), \
        ChatResponse(text="b", prompt_tokens=40, completion_tokens=5, cached=True)
    report_step(hook, "k", [fresh, cached, fresh])
    report_step(hook, "k", [cached])
    report_step(hook, "k", [fresh], reused=True)  # read back from the run folder: free now
    report_step(hook, "k", [])  # a failed call
    on_call(hook, "j")(0, cached)
    assert hook.steps == [("k", 1, 100, 20, False), ("k", 0, 40, 5, True), ("k", 1, 40, 5, True),
                          ("k", 1, 50, 10, True), ("k", 1, 0, 0, False), ("j", 1, 40, 5, True)]
    meter = CallMeter(total=5, price=PRICE)
    for _, n, p, c, was_cached in hook.steps[:4]:
        meter.add(n, prompt_tokens=p, completion_tokens=c, cached=was_cached)
    assert (meter.done, meter.cached, meter.tokens) == (3, 2, 100 + 20 + 45 + 45 + 60)
    assert meter.spent_usd() == pytest.approx(PRICE.usd(100, 20))


def test_prompt_tokens_from_the_prefix_cache_are_charged_the_cached_input_price():
    price = Price(0.40, 1.60, cached_input_usd_per_m=0.10)
    hook = Recorder()
    warm = ChatResponse(text="a", prompt_tokens=1000, completion_tokens=100, cached_prompt_tokens=900)
    cold = ChatResponse(text="b", prompt_tokens=1000, completion_tokens=100)
    replayed = ChatResponse(text="c", prompt_tokens=1000, completion_tokens=100, cached_prompt_tokens=900, cached=True)
    report_step(hook, "k", [warm, cold, replayed])
    assert hook.steps == [("k", 1, 2000, 200, False), ("k", 0, 1000, 100, True)]
    assert hook.prefix_cached == [900, 0]  # the replayed call is free whatever its prefix
    meter = CallMeter(total=4, price=price)
    for (_, n, p, c, was_cached), prefix in zip(hook.steps, hook.prefix_cached):
        meter.add(n, prompt_tokens=p, completion_tokens=c, cached=was_cached, cached_prompt_tokens=prefix)
    assert meter.billed_cached_prompt_tokens == 900
    # 1,100 prompt tokens at 0.40, 900 at 0.10, 200 completion tokens at 1.60 (USD per million)
    assert meter.spent_usd() == pytest.approx((1100 * 0.40 + 900 * 0.10 + 200 * 1.60) / 1e6)
    # the 3 steps to come, at the mean step so far (3,000 / 300 tokens), are priced as if nothing
    # were cached: at most what they cost
    assert meter.expected_usd() == pytest.approx(meter.spent_usd() + price.usd(3000 * 3, 300 * 3))
    without = CallMeter(total=4, price=Price(0.40, 1.60))  # no cached-input price: the input price
    without.add(1, prompt_tokens=2000, completion_tokens=200, cached_prompt_tokens=900)
    assert without.spent_usd() == pytest.approx(Price(0.40, 1.60).usd(2000, 200))


# -- the engines report tokens ------------------------------------------------------------------


def _calibration_config(tmp_path: Path, pack: Path, splits: Path, run_id: str):
    return resolve_config(preset="quick", environ={}, overrides={
        "run_id": run_id, "pack": pack, "splits": splits, "archives_dir": tmp_path / "archives",
        "cache_path": tmp_path / "cache.sqlite", "endpoint": {"provider": "fake"},
        "budget": {"accepted": 2, "max_attempts": 4, "batch_size": 2, "train_repeats": 1, "reeval_repeats": 2}})


def test_calibration_reports_every_judge_and_mutation_call_with_its_tokens(tmp_path, tiny_pack_dir, tiny_splits_dir):
    provider = FakeProvider(fake_endpoint, prompt_tokens=100, completion_tokens=20)
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite"), max_concurrency=2, backoff_initial=0.01) as client:
        hook = Recorder()
        calibrate(_calibration_config(tmp_path, tiny_pack_dir, tiny_splits_dir, "first"), client=client, progress=hook)
        calls = provider.calls
        again = Recorder()  # the same run under another id: every call from the cache
        calibrate(_calibration_config(tmp_path, tiny_pack_dir, tiny_splits_dir, "again"), client=client, progress=again)
    assert {unit for *_, unit in hook.phases} == {"judge calls", "mutation calls"}
    assert any(d.endswith("mutation") for _, d, _, _ in hook.phases)
    assert len(hook.steps) == sum(total for _, _, total, _ in hook.phases)  # every call of every phase, once
    # every call with its tokens; the ones the run asks twice (re-evaluation reuses selection's
    # fresh seed) come from the cache, free
    assert set(hook.steps) == {("entailment", 1, 100, 20, False), ("entailment", 1, 100, 20, True)}
    assert sum(not cached for *_, cached in hook.steps) == calls
    assert provider.calls == calls
    assert len(again.steps) == len(hook.steps) and set(again.steps) == {("entailment", 1, 100, 20, True)}


def test_bench_generation_reports_each_pipeline_run_with_the_tokens_of_its_calls(tmp_path):
    backend, _ = standin_backend()
    config = make_config(tmp_path, write_cases(tmp_path / "cases.jsonl", n=2))
    client, provider = make_client(tmp_path, standin_endpoint)
    try:
        hook = Recorder()
        run_bench(config, client=client, backend=backend, progress=hook)
        resumed = Recorder()
        run_bench(config, client=client, backend=backend, progress=resumed, resume=True)
    finally:
        client.close()
    assert hook.phases == [("generate", "generating", 4, "pipeline runs")]
    # per case: the first condition's run carries the role assignment (1 + 3 calls), the second
    # shares the panel (3 calls); the fake provider reports 100 + 20 tokens a call
    assert sorted(hook.steps) == sorted([("generate", 1, 400, 80, False), ("generate", 1, 300, 60, False)] * 2)
    assert sum(p for _, _, p, _, _ in hook.steps) == 100 * provider.calls
    # resumed: every run is read back from the folder, free, with the tokens it took
    assert sorted(resumed.steps) == sorted([("generate", 1, 400, 80, True)] * 4)


def test_otb_generation_and_judging_report_calls_and_a_rerun_is_cached(tmp_path, files):  # noqa: F811
    config = otb_config(tmp_path, files)
    provider = FakeProvider(OtbEndpoint(), prompt_tokens=70, completion_tokens=30)
    with Client(provider, cache=ResponseCache(tmp_path / "cache.sqlite")) as client:
        hook = Recorder()
        generate_otb(config, client=client, progress=hook)
        judge_otb(config.run_dir, client=client, progress=hook)
        again = Recorder()
        generate_otb(config, client=client, progress=again, resume=True)
        judge_otb(config.run_dir, client=client, progress=again)
    assert hook.phases == [("otb", "generating", 5, "generation calls"), ("otb_judge", "judging", 5, "judge calls")]
    assert hook.steps == [("otb", 1, 70, 30, False)] * 5 + [("otb_judge", 1, 70, 30, False)] * 5
    # resumed: the answers are kept (one free step per task: 2 boards, 3 turns), the judge calls
    # come from the cache - but the one reply outside its schema (a judge failure) was never cached: asked again
    assert again.steps[:2] == [("otb", 2, 140, 60, True), ("otb", 3, 210, 90, True)]
    assert sorted(again.steps[2:]) == [("otb_judge", 1, 70, 30, False)] + [("otb_judge", 1, 70, 30, True)] * 4
