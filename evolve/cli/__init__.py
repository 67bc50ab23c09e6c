"""The ``evolve`` command line. Each command parses options, calls one library function and
returns an exit code (0 ok, 2 a user-fixable error, 130 interrupted)."""

from evolve.cli._app import app, main
from evolve.cli._compare import compare
from evolve.cli._otb import otb_app

app.add_typer(otb_app, name="otb")
app.command("compare")(compare)

__all__ = ["app", "main"]
