"""A built wheel works outside the checkout: installed into a fresh virtual environment, run from
another folder, it checks the shipped example pack, splits it and calibrates it against a scripted
endpoint, reading the rubric shipped inside the package."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from evolve.testing import LoopbackChatServer
from tests.cli.test_cli_prompts_root import scripted_reply
from tests.conftest import REPO

#: What a source distribution of the project holds (the wheel is built from a copy of these).
SOURCES = ("pyproject.toml", "README.md", "evolve", "judge_prompts")


def _run(args: list, *, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(map(str, args))} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def _build_wheel(tmp: Path, env: dict[str, str]) -> Path:
    """``pip wheel`` of a copy of the sources (the checkout gets no build/ or egg-info)."""
    src = tmp / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", tmp / "dist", src], cwd=tmp, env=env,
                 timeout=600)
    # setuptools' deprecations are builds that stop working on a date (the license table did, 2027-02-18);
    # some print as "_Warning:" (a data folder missing from the packages list)
    warned = re.findall(r".*(?:SetuptoolsDeprecationWarning|_Warning: ).*", built.stdout + built.stderr)
    assert not warned, warned[:3]
    (wheel,) = (tmp / "dist").glob("evolve-*.whl")
    return wheel


def _venv(tmp: Path, env: dict[str, str]) -> Path:
    """A fresh virtual environment outside the checkout that sees the dependencies installed for
    the running tests (nothing is downloaded); skips when none can be made.

    ``--system-site-packages`` alone is not enough: run from a virtual environment (as the README's
    test command is on a fresh machine), it exposes the *base* interpreter's packages, not the
    running environment's. So a ``.pth`` file lists the running interpreter's site-packages; plain
    paths in it are appended to ``sys.path`` after the new environment's own, and ``.pth`` files in
    them are not run, so the checkout's editable install does not leak in."""
    venv = tmp / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                          env=env, capture_output=True, text=True, timeout=300)
    if made.returncode != 0:
        pytest.skip(f"cannot create a virtual environment with {sys.executable} -m venv: {made.stderr.strip()[-300:]}")
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    purelib = _run([bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=tmp, env=env).stdout.strip()
    ours = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if Path(p).is_dir()]
    (Path(purelib) / "_running_tests_site.pth").write_text("\n".join(ours) + "\n", encoding="utf-8")
    return bin_dir


def _clean_env(tmp: Path) -> dict[str, str]:
    """The environment without anything that could point back at the checkout or an endpoint."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "EVOLVE_PROMPTS_ROOT", "EVOLVE_BASE_URL", "EVOLVE_MODEL", "EVOLVE_PROVIDER")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["EVOLVE_CACHE_DIR"] = str(tmp / "cache")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _shipped_rubric_files() -> set[str]:
    return {"evolve/judge_prompts/" + p.relative_to(REPO / "judge_prompts").as_posix()
            for p in (REPO / "judge_prompts").rglob("*") if p.is_file() and p.suffix in (".json", ".md")}


@pytest.mark.slow  # builds the wheel and installs it into a new virtual environment (~30 s of CPU)
def test_wheel_installed_outside_the_checkout_calibrates_the_example(tmp_path):
    env = _clean_env(tmp_path)
    wheel = _build_wheel(tmp_path, env)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "evolve/py.typed" in names
    (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    metadata = zipfile.ZipFile(wheel).read(metadata_name).decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert _shipped_rubric_files() <= names  # every rubric, protocol and initial guidance ships
    assert not [n for n in names if n.startswith(("judge_prompts/", "tests/"))]  # nothing outside the package

    bin_dir = _venv(tmp_path, env)
    _run([bin_dir / "python", "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel], cwd=tmp_path, env=env)
    work = tmp_path / "work"  # outside the checkout: nothing resolves against REPO
    shutil.copytree(REPO / "ratings" / "example", work / "example")
    where = _run([bin_dir / "python", "-c", "import evolve, evolve.rubric as r; print(evolve.__file__); "
                  "print(r.shipped_prompts_root())"], cwd=work, env=env).stdout.split()
    venv = bin_dir.parent.resolve()
    for path in map(Path, where):
        assert path.resolve().is_relative_to(venv), f"{path} is not inside the virtual environment {venv}"
        assert not path.resolve().is_relative_to(REPO)
    assert (Path(where[1]) / "kqa-entailment" / "rubric.json").is_file()

    evolve = bin_dir / "evolve"
    summary = json.loads(_run([evolve, "ratings", "check", "example"], cwd=work, env=env).stdout)
    assert (summary["n_cases"], summary["n_targets"], summary["n_ratings"]) == (4, 8, 16)
    assert summary["rubric"]["id"] == "kqa-entailment"
    made = _run([evolve, "splits", "make", "example"], cwd=work, env=env).stdout
    assert "wrote splits/example" in made and (work / "splits" / "example" / "train.txt").is_file()

    endpoint = LoopbackChatServer(scripted_reply)
    try:
        _run([evolve, "calibrate", "--pack", "example", "--base-url", endpoint.base_url, "--model", "scripted",
              "--run-id", "from-wheel", "--accepted", "1", "--max-attempts", "2", "--batch-size", "1",
              "--min-coverage", "0"], cwd=work, env=env, timeout=600)
        # the calibrated judge on outputs of our own, from the CLI and from Python, as installed
        (work / "new.csv").write_text("case_text,target_text,statement\nIs it safe?,Yes it is.,It is safe.\n"
                                      "Dose?,Take two.,Two tablets.\n", encoding="utf-8")
        scored = _run([evolve, "judge", "new.csv", "--judge", "archives/from-wheel", "--base-url", endpoint.base_url,
                       "--run-id", "judged"], cwd=work, env=env).stdout
        assert "judge mean" in scored and (work / "archives" / "judged" / "items.csv").is_file()
        code = ("import evolve, pandas as pd; s = evolve.load_judge('archives/from-wheel').score(pd.read_csv('new.csv'), "
                f"endpoint={endpoint.base_url!r}, run_id='judged-py'); print(s.criteria['entailment'].n_scored)")
        assert _run([bin_dir / "python", "-c", code], cwd=work, env=env).stdout.split()[-1] == "2"
    finally:
        endpoint.close()
    run = work / "archives" / "from-wheel"
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "entailment" in report and "Winner" in report
    assert any(b.get("response_format", {}).get("json_schema", {}).get("name") == "guidance_revision" for b in endpoint.bodies)
    assert json.loads((run / "config.json").read_text(encoding="utf-8"))["endpoint"]["base_url"] == endpoint.base_url
