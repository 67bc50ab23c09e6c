"""``evolve batch``: answers of an offline batch runner (vLLM ``run_batch``, a Batch API output
file downloaded by hand) read into the response cache."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from evolve.cli._app import _fail, out, sub_app
from evolve.errors import EvolveError

if TYPE_CHECKING:
    from evolve.workflows._batch import BatchExport

batch_app = sub_app("Batch files: answers of an offline batch runner (vLLM run-batch) "
                        "into the response cache. Write the requests with --export-batch on calibrate or judge.")

VLLM_COMMAND = "python -m vllm.entrypoints.openai.run_batch -i {requests} -o results.jsonl --model MODEL"
"""The vLLM command that answers a request file offline (the model served under the run's --model)."""


@batch_app.command("import")
def import_(
    output: Path = typer.Argument(..., help="The batch output JSONL (vLLM run_batch's -o file, or a Batch API output "
                                  "or error file)."),
    requests: Path = typer.Option(..., "--requests", help="The request JSONL it answers (written by --export-batch)."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Folder of the response cache "
                                             "(default: $EVOLVE_CACHE_DIR, else ~/.cache/evolve)."),
) -> None:
    """Store each answer of OUTPUT in the response cache, checked as an interactive answer is (complete, and fitting
    the JSON schema sent): the run that then sends those requests (same --base-url, --model and options as the export)
    pays nothing for them."""
    from evolve.workflows._batch import import_batch

    try:
        summary = import_batch(output, requests, cache_path=cache_dir / "responses.sqlite" if cache_dir else None)
    except EvolveError as exc:
        _fail(exc)
    out.print(summary.describe())


def export_note(export: BatchExport, path: Path) -> str:
    """What ``--export-batch`` prints: the counts and the vLLM command that answers the file."""
    cached = (f"{export.cached} request(s) left out: the response cache already answers them, so the run takes them "
              "from there.") if export.cached else ""
    if not export.written:
        return (f"nothing to export: the response cache already answers all {export.cached} request(s), and {path} was "
                "not written. Run the same command without --export-batch: those calls come from the cache.")
    return (f"wrote {export.written} request line(s) to {path}. {cached}".rstrip() + " Answer them offline with vLLM, "
            "e.g.\n  " + VLLM_COMMAND.format(requests=path)
            + f"\nthen: evolve batch import results.jsonl --requests {path}\nand run the same command without "
            "--export-batch (against the same --base-url and --model): those calls come from the cache.")
