"""Every numeric option has bounds, and an output limit never exceeds what the endpoint can hold
(issue 24 item 5: ``judge.max_tokens: 1000000000`` was sent to the endpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from evolve.cli import app
from evolve.config import CalibrationConfig, resolve_config
from evolve.consilium import BenchConfig, resolve_bench_config
from evolve.errors import BudgetError, ConfigError
from evolve.llm import MAX_OUTPUT_TOKENS, ChatRequest, Message
from evolve.otb import OtbConfig, resolve_otb_config
from evolve.workflows._reference import config_keys

NO_ENV: dict[str, str] = {}
HOSTED = {"base_url": "http://127.0.0.1:9/v1"}  # context unknown: only the hard cap applies


def _calibration(**overrides):
    return resolve_config(overrides={"run_id": "r", "pack": "p", "splits": "s", **overrides}, environ=NO_ENV)


def _bench(tmp_path: Path, **overrides):
    return resolve_bench_config(overrides={"run_id": "r", "cases": tmp_path / "c.jsonl", **overrides}, environ=NO_ENV)


def _otb(tmp_path: Path, **overrides):
    return resolve_otb_config(overrides={"run_id": "r", "board": tmp_path / "task1.jsonl", **overrides}, environ=NO_ENV)


@pytest.mark.parametrize("model", [CalibrationConfig, BenchConfig, OtbConfig], ids=lambda m: m.__name__)
def test_every_numeric_key_has_an_upper_bound(model) -> None:
    unbounded = [k.path for k in config_keys(model)
                 if k.type.split(" ")[0] in ("int", "float") and "<" not in k.bounds]
    assert not unbounded, f"give these keys an upper bound (le=...): {unbounded}"


def test_huge_judge_max_tokens_is_refused_with_key_value_and_range() -> None:
    with pytest.raises(ConfigError) as err:
        _calibration(judge={"max_tokens": 1_000_000_000}, endpoint=HOSTED)
    message = str(err.value)
    assert "'judge.max_tokens'" in message and "1000000000 is out of range" in message
    assert f"at least 16 and at most {MAX_OUTPUT_TOKENS}" in message and "Fix the value" in message


@pytest.mark.parametrize(("overrides", "shown"), [
    ({"budget": {"accepted": 10**9, "max_attempts": 10**9}}, "'budget.accepted': 1000000000 is out of range"),
    ({"seed": -1}, "'seed': -1 is out of range: it must be at least 0 and at most 2147483647"),
    ({"mutation": {"temperature": 7.0}}, "'mutation.temperature': 7.0 is out of range: it must be at least 0.0 and at most 2.0"),
    ({"endpoint": {"timeout_s": 10**8}}, "'endpoint.timeout_s': 100000000 is out of range: it must be more than 0 and at most 86400"),
    ({"endpoint": {"context_tokens": 10**12}}, "'endpoint.context_tokens'"),
    ({"archive": {"length_bins": 10**6}}, "'archive.length_bins'"),
])
def test_out_of_range_calibration_values_are_named(overrides, shown) -> None:
    with pytest.raises((ConfigError, BudgetError), match="out of range") as err:
        _calibration(**overrides)
    assert shown in str(err.value)


@pytest.mark.parametrize(("overrides", "shown"), [
    ({"budget": {"accpted": 3}}, "'budget.accpted': unknown key 'accpted': did you mean 'accepted'? the keys here are "
                                 "accepted, max_attempts,"),
    ({"run_idd": "x"}, "'run_idd': unknown key 'run_idd': did you mean 'run_id'?"),
    ({"endpoint": {"zzz": 1}}, "'endpoint.zzz': unknown key 'zzz': the keys here are provider, base_url,"),
])
def test_an_unknown_key_is_named_with_the_nearest_and_the_keys_it_could_be(overrides, shown) -> None:
    with pytest.raises(ConfigError) as err:
        _calibration(**overrides)
    assert shown in str(err.value) and str(err.value).endswith(
        "Correct or remove the key in the config file (Python: the config= dict).")


def test_judge_max_tokens_above_the_embedded_slot_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        _calibration(judge={"max_tokens": 9000})
    message = str(err.value)
    assert "judge.max_tokens is 9000 tokens, more than the whole context of one request (8192 tokens" in message
    assert "endpoint.context_tokens" in message and "at most 8192" in message


def test_declared_context_is_the_ceiling_of_both_limits() -> None:
    with pytest.raises(ConfigError, match=r"mutation.max_tokens is 5000 tokens.*4096 tokens: endpoint.context_tokens"):
        _calibration(endpoint={**HOSTED, "context_tokens": 4096}, mutation={"max_tokens": 5000})
    config = _calibration(endpoint={**HOSTED, "context_tokens": 32768}, judge={"max_tokens": 20000})
    assert config.judge.max_tokens == 20000
    assert _calibration(endpoint=HOSTED, judge={"max_tokens": 100_000}).judge.max_tokens == 100_000  # context unknown


def test_paper_and_quick_presets_still_fit_the_embedded_slot() -> None:
    for preset in ("paper", "quick"):
        resolve_config(preset=preset, overrides={"run_id": "r", "pack": "p", "splits": "s"}, environ=NO_ENV)


def test_bench_and_otb_judge_limits_are_bounded(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"field 'judge.max_tokens': 1000000000 is out of range"):
        _bench(tmp_path, judge={"max_tokens": 10**9})
    with pytest.raises(ConfigError, match=r"judge.max_tokens is 9000 tokens, more than the whole context"):
        _bench(tmp_path, judge={"max_tokens": 9000})
    with pytest.raises(ConfigError, match=r"judge.max_tokens_board is 50000 tokens"):
        _otb(tmp_path, endpoint={**HOSTED, "context_tokens": 32768}, judge={"max_tokens_board": 50000})
    with pytest.raises(ConfigError, match=r"'decoding.max_tokens_board': 1000000000 is out of range"):
        _otb(tmp_path, decoding={"max_tokens_board": 10**9})
    with pytest.raises(ConfigError, match=r"'generation.limits.opinion': 1000000000 is out of range"):
        _bench(tmp_path, generation={"limits": {"opinion": 10**9}})
    paper = resolve_bench_config(preset="paper", overrides={"run_id": "r", "cases": tmp_path / "c.jsonl"}, environ=NO_ENV)
    assert paper.generation.limits.opinion == 16000  # generation limits: the hard cap only


def test_chat_request_refuses_an_unsendable_limit() -> None:
    with pytest.raises(ValidationError):
        ChatRequest(model="m", messages=(Message(role="user", content="x"),), max_tokens=MAX_OUTPUT_TOKENS + 1)
    with pytest.raises(ValidationError):
        ChatRequest(model="m", messages=(Message(role="user", content="x"), ), temperature=-0.5)


@pytest.mark.parametrize("argv", [
    ["serve", "--port", "70000"],
    ["splits", "make", "ratings/example", "--seed", "99999999999999999999"],
    ["bench", "judge", "nowhere", "--repeats", "1000"],
    ["bench", "run", "--cases", "nowhere.jsonl", "--max-rounds", "9"],
    ["compare", "a", "b", "--n-boot", "1000000000"],
])
def test_cli_numeric_options_outside_their_range_are_refused(argv) -> None:
    result = CliRunner().invoke(app, argv)
    text = " ".join(result.output.replace("│", " ").split())  # the error box wraps long lines
    assert result.exit_code == 2
    assert f"Invalid value for '{argv[-2]}': {argv[-1]} is out of range: it must be from" in text
    assert "Traceback" not in result.output


def test_cli_calibrate_option_out_of_range_names_the_key(tmp_path) -> None:
    result = CliRunner().invoke(app, ["calibrate", "--pack", "ratings/example", "--splits", str(tmp_path),
                                      "--run-id", "r", "--archives-dir", str(tmp_path), "--batch-size", "5000"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "budget.batch_size" in result.output and "5000 is out of range" in result.output
