"""Cached-input and batch prices (issue 25): what a call costs when the server served part of
its prompt from its prefix cache, or when it went through a Batch API."""

from __future__ import annotations

import pytest

from evolve.errors import ConfigError
from evolve.runs import Price, price_of


def test_cached_prompt_tokens_are_charged_the_cached_input_price():
    price = Price(2.0, 8.0, cached_input_usd_per_m=0.5)
    # 1M prompt tokens of which 600k cached: 400k at $2/M + 600k at $0.5/M; 100k out at $8/M
    assert price.usd(1_000_000, 100_000, cached_prompt_tokens=600_000) == pytest.approx(0.8 + 0.3 + 0.8)


def test_without_a_cached_price_cached_tokens_cost_the_ordinary_input_price():
    assert Price(2.0, 8.0).usd(1_000_000, 0, cached_prompt_tokens=600_000) == pytest.approx(2.0)


def test_cached_tokens_are_clipped_to_the_prompt():
    assert Price(2.0, 8.0, cached_input_usd_per_m=0.0).usd(100, 0, cached_prompt_tokens=500) == 0.0


def test_batch_calls_use_batch_prices_and_fall_back_to_the_interactive_ones():
    price = Price(2.0, 8.0, batch_input_usd_per_m=1.0, batch_output_usd_per_m=4.0)
    assert price.usd(1_000_000, 1_000_000, batch=True) == pytest.approx(5.0)
    assert price.usd(1_000_000, 1_000_000) == pytest.approx(10.0)
    assert Price(2.0, 8.0).usd(1_000_000, 1_000_000, batch=True) == pytest.approx(10.0)


def test_a_batch_call_charges_cached_tokens_at_the_cheaper_of_cached_and_batch_input():
    price = Price(2.0, 8.0, cached_input_usd_per_m=1.5, batch_input_usd_per_m=1.0, batch_output_usd_per_m=4.0)
    assert price.usd(1_000_000, 0, cached_prompt_tokens=1_000_000, batch=True) == pytest.approx(1.0)
    assert price.usd(1_000_000, 0, cached_prompt_tokens=1_000_000) == pytest.approx(1.5)


def test_price_of_takes_the_optional_prices_and_checks_them():
    assert price_of(2, 8, cached_in=0.5, batch_in=1, batch_out=4) == Price(2, 8, 0.5, 1, 4)
    with pytest.raises(ConfigError, match="price_cached_in needs the ordinary prices"):
        price_of(None, None, cached_in=0.5)
    with pytest.raises(ConfigError, match="both batch prices"):
        price_of(2, 8, batch_in=1)
    with pytest.raises(ConfigError, match="price_cached_in -1"):
        price_of(2, 8, cached_in=-1)
