"""Every ``evolve`` command and option the README shows exists in the command line.

The README's code blocks and inline code are searched for ``evolve ...`` command lines; each
one's subcommand path must be a command of :data:`evolve.cli.app` and each of its ``--options``
one that command takes. An option written alone (```--price-in```) must be taken by at least one
command (or be an option of a ``bench/`` script, or of pip, llama-server or vLLM, listed). A
renamed or removed option then fails here instead of in a user's terminal.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main

from evolve.cli import app

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "bench" / "README.md"]


@functools.cache
def _root() -> Any:
    """The command line as click sees it (typer's own copy of click: read by duck typing); built
    once, not once per command line checked."""
    return typer.main.get_command(app)


def _subcommands(command: Any) -> dict[str, Any]:
    """A group's subcommands by name; {} for a command."""
    return dict(getattr(command, "commands", None) or {})


def _options(command: Any) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-")}


def _all_commands(group: Any) -> list[Any]:
    found: list[Any] = []
    for sub in _subcommands(group).values():
        found += [sub, *_all_commands(sub)]
    return found


def _command_lines(text: str) -> list[str]:
    """``evolve ...`` command lines of the code blocks (continuations joined, shell operators
    split) and of the inline code."""
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
            for part in re.split(r"&&|\|\||;|\|", line):
                part = part.strip().lstrip("(").strip()
                if part.startswith("evolve "):
                    lines.append(part)
    for span in re.findall(r"`(evolve [^`]+)`", text):
        lines += [p.strip() for p in re.split(r"&&|\|\||;|\|", span) if p.strip().startswith("evolve ")]
    return lines


def _resolve(root: Any, words: list[str]) -> tuple[Any, list[str], str]:
    """The command that ``words`` (after ``evolve``) name, the words left, and its path."""
    command, path = root, ["evolve"]
    while _subcommands(command) and words and words[0] in _subcommands(command):
        command, path, words = _subcommands(command)[words[0]], [*path, words[0]], words[1:]
    return command, words, " ".join(path)


def _checks() -> list[tuple[str, str]]:
    return [(doc.name, line) for doc in DOCS for line in _command_lines(doc.read_text(encoding="utf-8"))]


@pytest.mark.parametrize(("doc", "line"), _checks())
def test_a_command_in_the_docs_exists_with_its_options(doc: str, line: str) -> None:
    try:
        words = shlex.split(line)[1:]
    except ValueError:  # an unbalanced quote in prose: the words up to it still count
        words = line.split()[1:]
    command, rest, path = _resolve(_root(), words)
    if subs := _subcommands(command):
        shown = [w for w in rest if re.fullmatch(r"[a-z][a-z-]*", w)]
        assert not shown, f"{doc}: `{line}`: {path} has no subcommand {shown[0]!r} (it has {sorted(subs)})"
    known = _options(command) | {"--help"}
    for word in rest:
        option = word.split("=", 1)[0]
        if re.fullmatch(r"--[a-z][a-z0-9-]*", option):
            assert option in known, f"{doc}: `{line}`: {path} takes no option {option} (it takes {sorted(known)})"


def test_every_option_named_alone_is_taken_by_some_command() -> None:
    root = _root()
    taken = set().union(*(_options(c) for c in _all_commands(root)), _options(root))
    text = "\n".join(doc.read_text(encoding="utf-8") for doc in DOCS)
    named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", text))
    benches = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "bench").glob("*.py"))
    of_benches = {o for o in named if f'"{o}"' in benches}  # an option of a bench/ script
    of_others = {"--system-site-packages", "--no-deps", "--cache-ram", "--parallel", "--ctx-size", "--no-kv-unified",  # pip's, llama-server's
                 "--data-parallel-address", "--data-parallel-rpc-port", "--enable-prefix-caching"}  # vLLM's
    missing = sorted(named - taken - of_benches - of_others)
    assert not missing, f"the README names options no command takes: {missing}"


def test_the_checks_see_the_readme_commands() -> None:
    lines = [line for doc, line in _checks() if doc == "README.md"]
    assert len(lines) > 100 and any(line.startswith("evolve calibrate --pack ratings/kqa") for line in lines)
