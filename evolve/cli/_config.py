"""``evolve config keys``: every configuration key, from the models."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from evolve.cli._app import _fail, sub_app
from evolve.errors import EvolveError

config_app = sub_app("Configuration: the keys a config file (--config) may hold.")


@config_app.command("keys")
def keys(
    update: Optional[Path] = typer.Option(
        None, "--update", help="Rewrite the generated section of this Markdown file (between its "
                               "<!-- config-keys:start/end --> lines) instead of printing."),
) -> None:
    """Print every key of the calibration, benchmark and OpenTumorBoard configurations: type, bounds, default, the
    presets' values and what it does (generated from the configuration models)."""
    from evolve.runs import atomic_write
    from evolve.workflows import config_reference, replace_marked

    text = config_reference()
    if update is None:
        typer.echo(text, nl=False)
        return
    try:
        atomic_write(update, replace_marked(update.read_text(encoding="utf-8"), text, where=str(update)))
    except OSError as exc:
        _fail(EvolveError(f"{update}: cannot rewrite it ({exc})."))
    except EvolveError as exc:
        _fail(exc)
    typer.echo(f"rewrote the configuration keys in {update}")
