"""Embedded-model tests share `installed_local_model` from tests/conftest.py; fast ones use
`fake_binary`, a stand-in llama-server (``stand_in_llama_server.py``) with fake weights."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import evolve.local._server as server_mod
from evolve.local import model_path

STAND_IN = Path(__file__).with_name("stand_in_llama_server.py")


@pytest.fixture
def fake_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable stand-in for llama-server (behaviour by ``FAKE_LLAMA_MODE``), fake weights
    in a fresh ``EVOLVE_CACHE_DIR``, and ``server_binary()`` pointing at the stand-in."""
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    weights = model_path("qwen2.5-coder-0.5b")
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"GGUF")
    script = tmp_path / "llama-server"
    script.write_text(f"#!{sys.executable}\n{STAND_IN.read_text()}")
    script.chmod(0o755)
    monkeypatch.setattr(server_mod, "server_binary", lambda: script)
    return script
