"""Fast tests of `LocalServer`'s process handling, with a stand-in for llama-server.

The stand-in (``stand_in_llama_server.py``, the ``fake_binary`` fixture of this folder's
conftest) is a tiny Python HTTP server that answers ``GET /health``; it lets these tests
check start, health polling, early death, stop by PID and SIGKILL escalation in about a
second, without the real binary or weights (those are covered by ``test_server_slow.py``).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import evolve.local._server as server_mod
from evolve.errors import LocalServerError
from evolve.local import LocalServer


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_start_stop_lifecycle(fake_binary: Path, tmp_path: Path) -> None:
    srv = LocalServer(startup_timeout=30)
    assert not srv.running and srv.pid is None
    with srv:
        assert srv.running
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        assert srv.log_path == tmp_path / "cache" / "logs" / f"llama-server-{srv.port}.log"
        pid = srv.pid
        assert pid is not None and not _gone(pid)
        assert srv.start() == srv.base_url  # already running: no second process
        assert srv.pid == pid
        assert pid in server_mod._LIVE  # the atexit hook would stop it
    assert not srv.running
    assert _gone(pid)
    assert pid not in server_mod._LIVE
    srv.stop()  # idempotent
    log = srv.log_path.read_text()
    for flag in ("-t 2", "-np 2", "-c 16384", "-fa off", "--no-ui", "--host 127.0.0.1"):
        assert flag in log


def test_extra_args_and_options_reach_the_command(fake_binary: Path, tmp_path: Path) -> None:
    log_path = tmp_path / "custom.log"
    srv = LocalServer(
        threads=1, parallel=4, context=8192, flash_attn=True, extra_args=["--seed", "7"],
        log_path=log_path, startup_timeout=30,
    )
    cmd = srv.command()
    assert cmd[0] == str(fake_binary)
    assert cmd[cmd.index("-np") + 1] == "4" and cmd[cmd.index("-fa") + 1] == "on"
    assert cmd[-2:] == ["--seed", "7"]
    with srv:
        assert srv.log_path == log_path
    assert "--seed 7" in log_path.read_text()


def test_early_exit_reports_log_tail(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LLAMA_MODE", "die")
    srv = LocalServer(startup_timeout=30)
    with pytest.raises(LocalServerError, match="failed to load model") as excinfo:
        srv.start()
    assert "code 3" in str(excinfo.value)
    assert not srv.running


def test_auto_port_retries_after_bind_race(
    fake_binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLAMA_MODE", "bind_once")
    monkeypatch.setenv("FAKE_LLAMA_MARKER", str(tmp_path / "bound-once"))
    srv = LocalServer(startup_timeout=30)
    first_port = srv.port
    with srv:
        assert srv.port != first_port
        assert srv.base_url.endswith(f":{srv.port}/v1")


def test_stop_escalates_to_sigkill(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LLAMA_MODE", "ignore_term")
    srv = LocalServer(startup_timeout=30, stop_timeout=0.5)
    srv.start()
    pid = srv.pid
    assert pid is not None
    srv.stop()
    assert _gone(pid)


def test_port_in_use_is_reported(fake_binary: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(LocalServerError, match=f"Port {port}"):
            LocalServer(port=port).start()


def test_missing_weights_say_run_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "empty"))
    with pytest.raises(LocalServerError, match="evolve setup"):
        LocalServer().start()
