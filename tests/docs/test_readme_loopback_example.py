"""The README's loopback endpoint for a whole calibration serves one, as printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evolve.cli import app
from tests.conftest import readme_python_block


def test_the_readme_loopback_endpoint_serves_a_calibration_without_a_failed_call(
        tmp_path: Path, tiny_pack_dir: Path, tiny_splits_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    scope: dict = {}
    exec(compile(readme_python_block("loopback-example"), "README.md (loopback example)", "exec"), scope)  # noqa: S102 - the README's own code
    server = scope["server"]
    try:
        done = CliRunner().invoke(app, [
            "calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir), "--run-id", "readme",
            "--archives-dir", str(tmp_path / "archives"), "--base-url", server.base_url, "--model", "any",
            "--accepted", "1", "--max-attempts", "2", "--batch-size", "1"])
    finally:
        server.close()
    assert done.exit_code == 0, done.output
    run = tmp_path / "archives" / "readme"
    by_tag = json.loads((run / "report.json").read_text())["usage"]["by_tag"]
    assert {tag: row["failures"] for tag, row in by_tag.items()} == {
        "judge": 0, "mutation": 0, "audit": 0, "audit_embedding": 1}  # the one refused: no embeddings served
    assert by_tag["judge"]["calls"] > 0 and by_tag["mutation"]["calls"] > 0 and by_tag["audit"]["calls"] > 0
    # the progress line's "N calls (M cached)" counts cache hits among its calls; the usage table
    # counts them apart (as its text says): the two add up (the audit draws no bar)
    shown = re.search(r"all work\s.*?([\d,]+) calls \(([\d,]+) cached\)", done.output)
    assert shown is not None, done.output[-2000:]
    steps = [by_tag[tag] for tag in ("judge", "mutation")]
    assert int(shown[1].replace(",", "")) == sum(t["calls"] + t["failures"] + t["cache_hits"] for t in steps)
    assert int(shown[2].replace(",", "")) == sum(t["cache_hits"] for t in steps) > 0
    assert "counted apart from the calls" in (run / "report.md").read_text()
    assert (pd.read_csv(run / "candidates.csv")["status"] == "accepted").any()  # the mutant's answer was read
