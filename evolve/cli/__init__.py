"""The ``evolve`` command line. Each command parses options, calls one library function and
returns an exit code (0 ok, 2 a user-fixable error, 130 interrupted)."""

from evolve.cli import _bench, _calibrate, _ratings  # noqa: F401  (their commands register on the apps of _app)
from evolve.cli._app import app, main
from evolve.cli._batch import batch_app
from evolve.cli._compare import compare
from evolve.cli._config import config_app
from evolve.cli._judge import judge
from evolve.cli._otb import otb_app
from evolve.cli._rubric import rubric_app

app.add_typer(otb_app, name="otb")
app.add_typer(rubric_app, name="rubric")
app.command("compare")(compare)
app.command("judge")(judge)
app.add_typer(config_app, name="config")
app.add_typer(batch_app, name="batch")

__all__ = ["app", "main"]
