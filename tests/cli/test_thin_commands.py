"""Thin commands (issue 26, item 4): no command function over 40 lines, and the options several
commands share (endpoint, spend, plan, output, report) defined once, in :mod:`evolve.cli._options`.

The checks read the source with :mod:`ast`: a command is a function decorated with
``<app>.command(...)`` or registered with ``<app>.command(...)(function)``; its length counts the
``def`` line through its last line, the signature included (decorators not).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.testing import CliRunner

from evolve.cli._options import Given, OptionGroup, flat, grouped

CLI = Path(__file__).resolve().parents[2] / "evolve" / "cli"
OPTIONS_MODULE = "_options.py"
MAX_LINES = 40

SHARED = ("--base-url", "--api-key-env", "--max-concurrency", "--schema-limits", "--local-model", "--context-tokens",
          "--price-in", "--price-out", "--price-cached-in", "--price-batch-in", "--price-batch-out", "--max-usd",
          "--max-tokens", "--batch", "--export-batch", "--plan", "--calls-per-hour", "--run-id", "--archives-dir",
          "--prompts-root", "--n-boot", "--html")
"""The options of the shared groups (endpoint, spend, plan, output, report): only
:mod:`evolve.cli._options` declares them (``--batch`` stands for ``--batch/--no-batch``)."""


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(CLI.glob("*.py"))]


def _is_command_call(node: ast.AST) -> bool:
    """``<something>.command(...)``."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "command"


def _commands() -> list[tuple[str, ast.FunctionDef]]:
    """Every command function of the CLI, decorated or registered by a call."""
    functions: dict[str, tuple[str, ast.FunctionDef]] = {}
    registered: set[str] = set()
    decorated: list[tuple[str, ast.FunctionDef]] = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                functions[node.name] = (path.name, node)
                if any(_is_command_call(d) for d in node.decorator_list):
                    decorated.append((path.name, node))
            elif isinstance(node, ast.Call) and _is_command_call(node.func) and node.args \
                    and isinstance(node.args[0], ast.Name):
                registered.add(node.args[0].id)  # app.command("judge")(judge)
    return decorated + [functions[name] for name in sorted(registered)]


def test_the_commands_are_found() -> None:
    names = {node.name for _, node in _commands()}
    assert {"calibrate", "report", "audit", "bench_run", "otb_run", "judge", "compare", "ratings_import",
            "splits_make"} <= names


def test_no_command_function_is_longer_than_40_lines() -> None:
    long = {f"{module}:{node.name}": node.end_lineno - node.lineno + 1 for module, node in _commands()
            if node.end_lineno - node.lineno + 1 > MAX_LINES}
    assert not long, (f"command functions over {MAX_LINES} lines (signature included): {long}; move option groups to "
                      "evolve/cli/_options.py (OptionGroup) and the work into helpers or evolve/workflows")


def _typer_option_flags(node: ast.AST) -> set[str]:
    """The option strings given to every ``typer.Option(...)`` inside ``node``."""
    flags: set[str] = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "Option":
            for arg in call.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    flags.add(arg.value.split("/")[0])  # --batch/--no-batch: --batch
    return flags


def _declares_option(node: ast.AST | None) -> bool:
    return node is not None and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                                    and c.func.attr == "Option" for c in ast.walk(node))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def test_the_shared_option_groups_are_defined_once() -> None:
    found = []
    commands = {(module, node.lineno) for module, node in _commands()}
    for path, tree in _modules():
        if path.name == OPTIONS_MODULE:
            continue
        from_options = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                        and node.module == "evolve.cli._options" for alias in node.names}
        found += [f"{path.name}: typer.Option({flag!r})" for flag in sorted(_typer_option_flags(tree) & set(SHARED))]
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):  # a parameter named like a shared option, declared here
                args = node.args.args + node.args.kwonlyargs
                defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults + node.args.kw_defaults
                for arg, default in zip(args, defaults):
                    if _flag(arg.arg) not in SHARED:
                        continue
                    own = _declares_option(default) or _declares_option(arg.annotation) or (
                        (path.name, node.lineno) in commands and isinstance(arg.annotation, ast.Name) and arg.annotation.id not in from_options)
                    if own:
                        found.append(f"{path.name}: {node.name}({arg.arg})")
            elif isinstance(node, ast.Dict):  # an OptionGroup member named like a shared option
                found += [f"{path.name}: group member {key.value!r}" for key, value in zip(node.keys, node.values)
                          if isinstance(key, ast.Constant) and isinstance(key.value, str) and _flag(key.value) in SHARED
                          and _declares_option(value)]
    assert not found, f"shared options declared outside evolve/cli/{OPTIONS_MODULE}: {found}"
    defined = _typer_option_flags(ast.parse((CLI / OPTIONS_MODULE).read_text(encoding="utf-8")))
    implicit = {"--base-url", "--api-key-env", "--max-concurrency", "--local-model", "--run-id", "--archives-dir",
                "--n-boot"}  # named after their parameter
    assert set(SHARED) <= defined | implicit


EXTRA = OptionGroup({"colour": Annotated[Optional[str], typer.Option(help="A colour.")],
                     "size": Annotated[int, typer.Option("--size", help="A size.")]}, {"size": 3})


def test_an_option_group_reaches_the_command_as_one_value_in_place() -> None:
    seen: dict = {}
    app = typer.Typer()

    @app.command()
    @grouped
    def paint(name: str = typer.Argument(...), extra: Given = EXTRA, loud: bool = typer.Option(False)) -> None:
        """Paint."""
        seen.update(flat(locals()), extra=extra)

    runner = CliRunner()
    result = runner.invoke(app, ["x", "--colour", "red", "--loud"])
    assert result.exit_code == 0, result.output
    assert seen["extra"] == {"colour": "red", "size": 3} and seen["extra"].colour == "red"
    assert {k: seen[k] for k in ("name", "colour", "size", "loud")} == {"name": "x", "colour": "red", "size": 3, "loud": True}
    help_text = runner.invoke(app, ["--help"]).output
    assert help_text.index("--colour") < help_text.index("--size") < help_text.index("--loud")
    assert "A colour." in help_text and "[default: 3]" in help_text


def test_a_group_can_drop_replace_and_add_members() -> None:
    other = Annotated[Optional[str], typer.Option(help="Another colour.")]
    group = EXTRA.but(drop=("size",), colour=other, shade=other)
    assert list(group.options) == ["colour", "shade"] and group.options["colour"] is other
    assert list(EXTRA.options) == ["colour", "size"]  # the original is unchanged


def test_main_builds_only_the_named_command_and_every_screen_reads_the_same() -> None:
    """``evolve.cli.main`` builds the command the command line names (and, when it names none,
    every command without its options): the help screens and errors are those of the full app."""
    import typer.main

    from evolve.cli import app
    from evolve.cli._app import _only

    runner = CliRunner()
    for args in (["--help"], ["calibrate", "--help"], ["bench", "--help"], ["bench", "run", "--help"], ["calibrat"],
                 ["ratings"], ["judge", "--no-such-option"], ["otb", "nosuch"]):
        full, pruned = runner.invoke(app, args, terminal_width=100), runner.invoke(_only(app, args), args, terminal_width=100)
        assert (pruned.exit_code, pruned.output) == (full.exit_code, full.output), args
    built = typer.main.get_command(_only(app, ["bench", "run", "--help"]))
    assert list(built.commands) == ["bench"] and list(built.commands["bench"].commands) == ["run"]  # type: ignore[attr-defined]
    built = typer.main.get_command(_only(app, ["--help"]))
    assert "calibrate" in built.commands and not built.commands["calibrate"].params  # type: ignore[attr-defined]
