"""Start, watch and stop the embedded ``llama-server`` process."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import httpx

from evolve.errors import LocalServerError, ServerDiedError
from evolve.local._build import read_build_record
from evolve.local._diagnose import explain_exit
from evolve.local._install import server_binary
from evolve.local._models import (
    DEFAULT_CONTEXT,
    DEFAULT_LOCAL_MODEL,
    DEFAULT_PARALLEL,
    cache_dir,
    get_model_spec,
    model_path,
)

__all__ = ["LocalServer", "running_llama_servers", "serve"]

HOST = "127.0.0.1"

#: Environment variable llama-server reads its API key from (kept off the command line, which
#: the log and the process list show).
API_KEY_ENV = "LLAMA_API_KEY"

#: Server logs kept in ``cache_dir()/logs`` (older ones are deleted when a server starts).
KEEP_LOGS = 20

# Children still running, by PID; stopped by the atexit hook below.
_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LIVE_LOCK = threading.Lock()


def _kill_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the child's process group, then SIGKILL it after ``timeout`` seconds."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)


@atexit.register
def _stop_all_at_exit() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE.values())
    for proc in procs:
        _kill_group(proc, timeout=5.0)


def _parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when this thread dies.

    This covers a parent killed by SIGKILL, which ``atexit`` cannot. Linux ties the signal to
    the *thread* that forked, so it is only used from the main thread (a worker thread that
    exits would otherwise take the server down with it).
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    try:
        prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    sigterm = int(signal.SIGTERM)

    def hook() -> None:
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)

    return hook


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _port_in_use(port: int) -> bool:
    """Whether something listens on ``port`` (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # like llama-server itself: a port whose old connections linger in TIME_WAIT is free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def _tail(path: Path, max_bytes: int = 4000, max_lines: int = 30) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-max_lines:])


def _prune_logs(directory: Path, keep: int = KEEP_LOGS) -> None:
    """Delete all but the ``keep`` newest ``llama-server-*.log`` files in ``directory``."""
    logs = []
    for path in directory.glob("llama-server-*.log"):
        with contextlib.suppress(OSError):
            logs.append((path.stat().st_mtime, path))
    for _, path in sorted(logs, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            path.unlink()


def _explain(code: int, log_path: Path, binary: Path | None) -> str:
    """The cause of an exit in words, the fix, and the log's last lines."""
    tail = _tail(log_path)
    build = read_build_record(binary) if binary is not None else None
    return f"{explain_exit(code, tail, build=build)}\nLast lines of {log_path}:\n{tail}"


def running_llama_servers() -> list[int]:
    """PIDs of llama-server processes already running on this machine (Linux /proc; else [])."""
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "llama-server":
                pids.append(int(comm.parent.name))
        except OSError:
            continue
    return sorted(pids)


class LocalServer:
    """One ``llama-server`` child process serving an embedded model on 127.0.0.1.

    The server speaks the OpenAI chat-completions protocol at :attr:`base_url` (any API key
    works; the ``model`` field of requests is ignored). Use it as a context manager so the
    process is always stopped::

        with LocalServer() as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="local")

    The child runs in its own process group, its output goes to :attr:`log_path`, and it is
    stopped when this interpreter exits (``atexit``; on Linux also when the parent is killed).
    An ``api_key`` reaches the child through its environment (``LLAMA_API_KEY``), never its
    command line, so it is in no log and not in the process list. Only the
    :data:`KEEP_LOGS` newest server logs are kept.

    Args:
        model: A key of ``LOCAL_MODELS``; its weights must already be installed
            (``evolve setup``).
        port: TCP port on 127.0.0.1; ``None`` picks a free one.
        threads: CPU threads for generation (``-t``).
        parallel: Request slots served concurrently (``-np``); the context is split between
            them, so keep ``context >= parallel * 4096`` for long notes.
        context: Total context size in tokens (``-c``).
        extra_args: More ``llama-server`` arguments, appended last (they win over the
            defaults).
        startup_timeout: Seconds to wait for ``GET /health`` to answer 200.
        log_path: File receiving the server's stdout and stderr; default
            ``cache_dir()/logs/llama-server-<port>.log``.
        flash_attn: Use flash attention (``-fa on``). Off by default: on CPU it reads prompts
            faster but halves generation speed at long context, and judging is many short
            answers over one cached note.
        stop_timeout: Seconds to wait after SIGTERM before SIGKILL.
        api_key: Key the server requires as a bearer token; ``None`` accepts any request.
        binary: A ``llama-server`` executable to run instead of the installed one (e.g. another
            build, as ``bench/server_speed.py`` compares).

    Raises:
        ConfigError: If ``model`` is unknown.
    """

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        port: int | None = None,
        threads: int = 2,
        parallel: int = DEFAULT_PARALLEL,
        context: int = DEFAULT_CONTEXT,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 300.0,
        log_path: Path | None = None,
        flash_attn: bool = False,
        stop_timeout: float = 10.0,
        api_key: str | None = None,
        binary: Path | None = None,
    ) -> None:
        self.model = model
        self.spec = get_model_spec(model)
        self._auto_port = port is None
        self._port = _free_port() if port is None else int(port)
        self.threads = threads
        self.parallel = parallel
        self.context = context
        self.extra_args = tuple(str(a) for a in extra_args)
        self.startup_timeout = startup_timeout
        self.flash_attn = flash_attn
        self.stop_timeout = stop_timeout
        self._api_key = api_key
        self._binary: Path | None = Path(binary) if binary is not None else None
        self._log_path_arg = Path(log_path) if log_path is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self.startup_seconds: float | None = None

    # -- properties ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """TCP port the server listens on (127.0.0.1)."""
        return self._port

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:8080/v1``."""
        return f"http://{HOST}:{self._port}/v1"

    @property
    def pid(self) -> int | None:
        """PID of the child process, or ``None`` if it was never started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path:
        """File receiving the server's output."""
        if self._log_path_arg is not None:
            return self._log_path_arg
        return cache_dir() / "logs" / f"llama-server-{self._port}.log"

    @property
    def running(self) -> bool:
        """Whether the child process is alive (not necessarily healthy yet)."""
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        """The ``llama-server`` command line :meth:`start` runs.

        Raises:
            LocalServerError: If the server binary is not installed.
        """
        return [
            str(self._binary or server_binary()),
            "-m", str(model_path(self.spec)),
            "--host", HOST,
            "--port", str(self._port),
            "-t", str(self.threads),
            "-np", str(self.parallel),
            "-c", str(self.context),
            "-fa", "on" if self.flash_attn else "off",
            "--alias", self.model if isinstance(self.model, str) else self.spec.name,
            "--no-ui",
            *self.extra_args,
        ]

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> str:
        """Start the server and wait until it has loaded the model.

        Returns:
            :attr:`base_url` (ends in ``/v1``).

        Raises:
            LocalServerError: If the binary or weights are missing (run ``evolve setup``), the
                port is taken, the process exits during startup (the message carries the tail
                of its log) or ``/health`` is not ready within ``startup_timeout`` seconds.
        """
        if self.running:
            return self.base_url
        weights = model_path(self.spec)
        if not weights.is_file():
            raise LocalServerError(
                f"Weights for local model {self.model!r} are not installed (expected "
                f"{weights}). Run `evolve setup --model {self.model}` first."
            )
        attempts = 3 if self._auto_port else 1
        for attempt in range(1, attempts + 1):
            try:
                return self._start_once()
            except _BindError:
                if attempt == attempts:
                    raise LocalServerError(
                        f"llama-server could not bind a port on {HOST} after {attempts} tries. "
                        f"See {self.log_path}."
                    ) from None
                self._port = _free_port()
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self) -> str:
        if _port_in_use(self._port):
            if not self._auto_port:
                raise LocalServerError(
                    f"Port {self._port} on {HOST} is already in use (another `evolve serve`?). "
                    f"Stop that process or choose another port."
                )
            raise _BindError
        cmd = self.command()
        self._binary = Path(cmd[0])  # the build record read on death must be this binary's
        log_path = self.log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        _prune_logs(log_path.parent)
        env = dict(os.environ)
        env.pop(API_KEY_ENV, None)
        if self._api_key is not None:
            env[API_KEY_ENV] = self._api_key
        t0 = time.monotonic()
        with log_path.open("wb") as log_fh:
            log_fh.write(("$ " + " ".join(cmd) + "\n").encode())
            log_fh.flush()
            try:
                proc = subprocess.Popen(
                    cmd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log_fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_parent_death_hook(),  # noqa: PLW1509 - only calls prctl
                    close_fds=True,
                )
            except OSError as exc:
                raise LocalServerError(
                    f"Could not run {cmd[0]} ({exc}). Reinstall the server with `evolve setup`."
                ) from exc
        self._proc = proc
        self._stopping = False
        with _LIVE_LOCK:
            _LIVE[proc.pid] = proc
        try:
            self._wait_healthy(proc, t0)
        except BaseException:
            _kill_group(proc, self.stop_timeout)
            raise
        self.startup_seconds = time.monotonic() - t0
        return self.base_url

    def _wait_healthy(self, proc: subprocess.Popen[bytes], t0: float) -> None:
        url = f"http://{HOST}:{self._port}/health"
        deadline = t0 + self.startup_timeout
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            while True:
                code = proc.poll()
                if code is not None:
                    tail = _tail(self.log_path)
                    if self._auto_port and "couldn't bind" in tail:
                        raise _BindError
                    raise LocalServerError(
                        f"llama-server exited during startup (code {code}): "
                        f"{_explain(code, self.log_path, self._binary)}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    if client.get(url).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise LocalServerError(
                        f"llama-server did not become healthy within {self.startup_timeout:.0f} s "
                        f"(GET {url}). Raise `startup_timeout` on a slow machine. Last lines of "
                        f"{self.log_path}:\n{_tail(self.log_path)}"
                    )
                time.sleep(0.25)

    def death(self, grace: float = 1.0) -> ServerDiedError | None:
        """The error to stop a run with if the server has died on its own, else ``None``.

        A dropped connection can reach the client a moment before the process is reaped, so
        this waits up to ``grace`` seconds for a dying process to exit.

        Args:
            grace: Seconds to wait for the process to finish exiting.
        """
        proc = self._proc
        if proc is None:
            return None
        try:
            code = proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            return None
        if self._stopping:
            return None
        return ServerDiedError(
            f"The embedded llama-server (pid {proc.pid}) died during the run: "
            f"{_explain(code, self.log_path, self._binary)}"
        )

    def stop(self) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL after ``stop_timeout`` s.

        Safe to call more than once or on a server that never started.
        """
        if self._proc is not None:
            self._stopping = True
            _kill_group(self._proc, self.stop_timeout)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalServer(model={self.model!r}, base_url={self.base_url!r}, pid={self.pid}, {state})"


class _BindError(Exception):
    """The auto-picked port was taken between choosing it and binding it."""


def serve(
    model: str = DEFAULT_LOCAL_MODEL,
    port: int = 8080,
    *,
    threads: int = 2,
    parallel: int = DEFAULT_PARALLEL,
    context: int = DEFAULT_CONTEXT,
    extra_args: Sequence[str] = (),
    startup_timeout: float = 300.0,
    log_path: Path | None = None,
    flash_attn: bool = False,
    log: Callable[[str], None] = print,
) -> None:
    """Run the embedded server in the foreground until Ctrl-C (or SIGTERM/SIGHUP), then stop it.

    Backs the ``evolve serve`` command. Arguments are those of :class:`LocalServer`.

    Args:
        model: A key of ``LOCAL_MODELS``.
        port: TCP port on 127.0.0.1.
        threads: CPU threads (``-t``).
        parallel: Concurrent request slots (``-np``).
        context: Total context in tokens (``-c``), split between slots.
        extra_args: Extra ``llama-server`` arguments.
        startup_timeout: Seconds to wait for the model to load.
        log_path: Server log file; default ``cache_dir()/logs/llama-server-<port>.log``.
        flash_attn: Use flash attention (``-fa on``).
        log: Receives status lines.

    Raises:
        LocalServerError: If the server cannot start or exits on its own while serving.
    """
    srv = LocalServer(
        model, port=port, threads=threads, parallel=parallel, context=context,
        extra_args=extra_args, startup_timeout=startup_timeout, log_path=log_path,
        flash_attn=flash_attn,
    )
    # SIGTERM and SIGHUP stop the server as cleanly as Ctrl-C does.
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        def _interrupt(signum: int, frame: object) -> None:
            raise KeyboardInterrupt

        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                previous[sig] = signal.signal(sig, _interrupt)
    try:
        log(f"Starting {srv.spec.name} on {HOST}:{srv.port} (log: {srv.log_path}) ...")
        url = srv.start()
        log(
            f"Serving at {url} (pid {srv.pid}, ready in {srv.startup_seconds:.1f} s; any API "
            f"key works). Press Ctrl-C to stop."
        )
        while srv.running:
            time.sleep(0.5)
        raise srv.death() or LocalServerError(f"llama-server (pid {srv.pid}) exited on its own.")
    except KeyboardInterrupt:
        log("Stopping llama-server ...")
    finally:
        srv.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
    log("llama-server stopped.")
