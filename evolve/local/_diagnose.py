"""Why did llama-server die? The cause in words, and the fix, from its exit code and log."""

from __future__ import annotations

import re
import signal

from evolve.local._build import BuildRecord

__all__ = ["explain_exit"]

_REBUILD = "`evolve setup --rebuild`"


def _signal_name(returncode: int) -> str | None:
    """``SIGILL`` for -4 (killed by a signal) or 132 (a shell's 128 + 4); else ``None``."""
    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 160 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _illegal_instruction(build: BuildRecord | None) -> str:
    if build is not None and build.mode == "native":
        how = (f"This is a native build (-march=native): rebuild the portable one with {_REBUILD} "
               "(without --native).")
    elif build is not None and build.isa not in (None, "generic"):
        how = (f"This portable build already uses {build.isa!r}; rebuild for an older baseline, e.g. "
               f"{_REBUILD} --isa avx (or --isa generic, the slowest and safest).")
    else:
        how = f"Rebuild the portable server with {_REBUILD}."
    return ("illegal instruction (SIGILL): the llama-server build uses CPU instructions this machine "
            "refuses. Virtual machines and containers often advertise instructions (AMX, AVX-512) "
            f"they do not let a process run. {how}")


_LOG_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"error while loading shared libraries: (\S+?):|(\S+\.so[.\d]*): cannot open shared object", re.I),
     "a shared library is missing ({lib}): the llama-server install is incomplete or was moved. Run "
     f"{_REBUILD} (the build links the libraries next to the binary)."),
    (re.compile(r"couldn't bind|address already in use", re.I),
     "the port is in use: another process (perhaps another `evolve serve`) listens on it. Stop that "
     "process or choose another port."),
    (re.compile(r"failed to allocate|out of memory|bad_alloc|cannot allocate memory|mmap failed", re.I),
     "out of memory: the model and its context did not fit. Close other programs, use a smaller "
     "context or the default 0.5B model, and start again."),
    (re.compile(r"failed to load model|error loading model|invalid magic|gguf_init_from_file", re.I),
     "the weights could not be loaded (the GGUF file is damaged or not a model). Run `evolve setup`: "
     "it checks the weights against their pinned SHA-256 and fetches them again."),
)

_SIGNAL_CAUSES = {
    "SIGKILL": ("killed with SIGKILL: most often the kernel's out-of-memory killer (see `dmesg | tail`), "
                "or someone ran `kill -9`. Free memory (or use the 0.5B model) and start again."),
    "SIGTERM": ("stopped by SIGTERM from another process (a supervisor, `kill`, or a session that "
                "ended). Nothing is wrong with the build: start again."),
    "SIGINT": "stopped by Ctrl-C (SIGINT). Start again when ready.",
    "SIGHUP": "stopped by SIGHUP (its terminal closed). Start it again, e.g. under nohup.",
    "SIGSEGV": f"crashed (segmentation fault). Rebuild with {_REBUILD}; if it persists, report the log.",
    "SIGABRT": "aborted (SIGABRT, an internal check failed). The log above says which.",
    "SIGBUS": "crashed with SIGBUS: the weights file changed or the disk failed while mapped. Run `evolve setup`.",
}


def explain_exit(returncode: int, log_tail: str, *, build: BuildRecord | None = None) -> str:
    """Name the cause of a llama-server exit in words, with the fix.

    Args:
        returncode: ``Popen.returncode``: negative for a signal (-4 = SIGILL), or an exit code
            (128 + N from a shell also counts as signal N).
        log_tail: The last lines of the server's log (matched for known messages).
        build: The installed build, to tailor the SIGILL fix (native vs portable).

    Returns:
        One sentence or two: cause, then fix. Never only the exit code.
    """
    sig = _signal_name(returncode)
    if sig == "SIGILL":
        return _illegal_instruction(build)
    for pattern, text in _LOG_CAUSES:
        match = pattern.search(log_tail)
        if match:
            lib = next((g for g in match.groups() if g), "a .so file") if match.groups() else ""
            return text.format(lib=lib)
    if sig in _SIGNAL_CAUSES:
        return _SIGNAL_CAUSES[sig]
    if sig is not None:
        return f"killed by {sig}. The log below may say why; start again."
    if returncode == 0:
        return ("stopped cleanly (exit code 0): llama-server ends this way when another process asks it to stop "
                "(SIGTERM from `kill`, `pkill` or a supervisor). Nothing is wrong with the build: start again.")
    return (f"exited with code {returncode} and no cause this toolkit recognises. Read the log below; "
            f"{_REBUILD} reinstalls the server if the binary is at fault.")
