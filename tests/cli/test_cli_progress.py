"""The progress line of long commands: the unit that costs, tokens, and - with --price-in and
--price-out, or prices in the run's configuration - USD spent and expected (scripted loopback
endpoint on 127.0.0.1, the shipped INVENTED OpenTumorBoard example)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.testing import LoopbackChatServer
from tests.otb.test_cli_otb import EXAMPLE, respond

runner = CliRunner()
WIDE = {"COLUMNS": "200"}  # one progress line per bar


@pytest.mark.parametrize("command", [["calibrate"], ["bench", "run"], ["bench", "judge"], ["otb", "run"], ["otb", "judge"]])
def test_every_command_that_draws_progress_takes_prices_per_million_tokens(command):
    result = runner.invoke(app, [*command, "--help"], env=WIDE)
    assert result.exit_code == 0
    text = " ".join(result.output.split())  # the help wraps its lines
    assert "--price-in" in text and "--price-out" in text
    assert "USD per million tokens" in text


def test_progress_shows_calls_tokens_and_money_spent_and_expected(tmp_path):
    server = LoopbackChatServer(respond)  # 50 prompt + 10 completion tokens a call
    env = {**WIDE, "EVOLVE_CACHE_DIR": str(tmp_path / "cache")}
    base = ["otb", "run", "--board", str(EXAMPLE / "task1_example.jsonl"), "--turn", str(EXAMPLE / "task2_example.jsonl"),
            "--base-url", server.base_url, "--model", "scripted", "--max-items", "10",
            "--archives-dir", str(tmp_path / "archives")]
    try:
        # $1,000 / $5,000 per million tokens: 50 in + 10 out cost $0.05 + $0.05 = $0.10 a call
        priced = runner.invoke(app, [*base, "--run-id", "priced", "--price-in", "1000", "--price-out", "5000"], env=env)
        assert priced.exit_code == 0, priced.output
        assert "generating" in priced.output and "judging" in priced.output
        assert "7/7 generation calls, 0 left · 420 tokens · $0.70 spent, ~$0.70 expected" in priced.output
        assert "10/10 judge calls, 0 left · 600 tokens · $1.00 spent, ~$1.00 expected" in priced.output
        assert "all work" in priced.output and "17 calls · 1.0k tokens · $1.70 spent" in priced.output
        run = tmp_path / "archives" / "priced"
        stored = json.loads((run / "run_config.json").read_text())["endpoint"]
        assert (stored["price_in"], stored["price_out"]) == (1000.0, 5000.0)

        # judging again: the run's prices, every call from the cache, free
        again = runner.invoke(app, ["otb", "judge", str(run)], env=env)
        assert again.exit_code == 0, again.output
        assert "10/10 judge calls (10 cached), 0 left · 600 tokens · $0.00 spent, ~$0.00 expected" in again.output

        # a resume takes other prices (they change no result); kept answers are free
        resumed = runner.invoke(app, ["otb", "run", "--resume", str(run), "--no-judge", "--price-in", "2",
                                      "--price-out", "8"], env=env)
        assert resumed.exit_code == 0, resumed.output
        assert "7/7 generation calls (7 cached), 0 left · 420 tokens · $0.00 spent, ~$0.00 expected" in resumed.output

        # no price: calls and tokens, no money
        plain = runner.invoke(app, [*base, "--run-id", "plain", "--no-judge"], env=env)
        assert plain.exit_code == 0, plain.output
        assert "7/7 generation calls (7 cached), 0 left · 420 tokens" in plain.output and "$" not in plain.output

        # one price alone is refused before any call
        calls = len(server.bodies)
        half = runner.invoke(app, [*base, "--run-id", "half", "--price-in", "1"], env=env)
        assert half.exit_code == 2 and "go together" in half.output and len(server.bodies) == calls
    finally:
        server.close()
