"""``evolve compare``: runs side by side, written to ``reports/<name>/``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer

from evolve.cli._app import _fail, out
from evolve.cli._options import BootSeedOption, CompareHtmlOption, NBootOption, RunPromptsRootOption
from evolve.errors import ConfigError, EvolveError


def _default_name(run_dirs: list[Path]) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "-vs-".join(Path(d).name for d in run_dirs))[:120]


def compare(
    run_dirs: list[Path] = typer.Argument(..., help="Two or more calibration run folders (same pack and split), or bench "
                                                    "run folders (same case file); the first is the reference."),
    name: Optional[str] = typer.Option(None, "--name", help="Folder under --reports-dir (default: RUN_A-vs-RUN_B...)."),
    reports_dir: Path = typer.Option(Path("reports"), "--reports-dir", help="Where cross-run reports go."),
    html: CompareHtmlOption = True,
    n_boot: NBootOption = None,
    seed: BootSeedOption = 0,
    prompts_root: RunPromptsRootOption = None,
) -> None:
    """Compare runs side by side: validation agreement of each run and paired differences with 95% intervals on the
    targets they share (no model calls). No verdict on fewer than 20 shared pairs or 8 cases, nor when the runs share
    no targets (it says how to make them share); better/worse verdicts that do not survive Holm's correction are
    marked. Writes report.md, report.json, differences.csv and report.html."""
    from evolve.report import comparison_count_text, difference_verdict, write_comparison

    if name is not None and (Path(name).name != name or name in (".", "..")):
        _fail(ConfigError(f"--name {name!r} must be a plain folder name (it goes under {reports_dir}/), e.g. --name qwen-05-vs-15."))
    out_dir = reports_dir / (name or _default_name(run_dirs))
    try:
        comparison = write_comparison(run_dirs, out_dir, n_boot=n_boot, seed=seed, html=html, prompts_root=prompts_root)
    except EvolveError as exc:
        _fail(exc)
    for note in comparison.notes:
        out.print(f"note: {note}")
    for d in comparison.differences:
        iv = "—" if d.estimate is None else f"{d.estimate:+.3f}" + (
            "" if d.low is None or d.high is None else f" [{d.low:+.3f}, {d.high:+.3f}]")
        out.print(f"{d.criterion}: {d.what} {d.run} − {d.versus}: {iv} ({difference_verdict(d)})")
    if (text := comparison_count_text(comparison)) is not None:
        out.print(text)
    out.print(f"wrote {out_dir}/report.md, report.json, differences.csv{' and report.html' if html else ''}")
