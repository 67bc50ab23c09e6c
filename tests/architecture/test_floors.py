"""The package's floors: every import between subpackages goes down (or sideways), never up.

Walks every ``import`` in ``evolve/`` (those inside functions too) with :mod:`ast`, so a lazy
import cannot hide a dependency. The floors are the ones ``evolve/runs/__init__.py`` draws.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "evolve"

#: Floor of each subpackage or top-level module; an import may only reach the same floor or below.
FLOORS = {
    "errors": 0, "records": 0, "layering": 0, "lazy": 0,
    "llm": 1, "local": 1, "markdown": 1, "stats": 1,
    "runs": 2, "rubric": 2, "testing": 2,
    "archive": 3, "data": 3,
    "judge": 4, "splits": 4,
    "config": 5, "calibrated": 5, "outputs": 5,
    "calibration": 6, "consilium": 6, "audit": 6, "otb": 6, "scoring": 6,
    "report": 7, "workflows": 7,
    "cli": 8,
}
ENGINES = ("calibration", "consilium", "audit", "otb", "scoring")
ABOVE_ENGINES = ("report", "workflows", "cli")


@functools.cache  # parsed once: the parametrisation and two tests read it
def _edges() -> frozenset[tuple[str, str]]:
    edges = set()
    for path in PACKAGE.rglob("*.py"):
        src = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if src == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "evolve" and len(parts) > 1 and parts[1] != src:
                    edges.add((src, parts[1]))
    return frozenset(edges)


def _cycle(edges: AbstractSet[tuple[str, str]]) -> list[str] | None:
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_subpackage_has_a_floor() -> None:
    names = {p.name.removesuffix(".py") for p in PACKAGE.iterdir() if p.name != "__init__.py"
             and (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert names == set(FLOORS), "give new subpackages a floor here and in evolve/runs/__init__.py"


def test_no_import_cycle() -> None:
    assert _cycle(_edges()) is None


@pytest.mark.parametrize(("src", "dst"), sorted(_edges()))
def test_imports_go_down(src: str, dst: str) -> None:
    assert FLOORS[dst] <= FLOORS[src], f"evolve.{src} (floor {FLOORS[src]}) imports evolve.{dst} (floor {FLOORS[dst]})"


def test_engines_import_no_reporter_or_workflow() -> None:
    bad = [(s, d) for s, d in _edges() if s in ENGINES and d in ABOVE_ENGINES]
    assert not bad


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({("a", "b"), ("b", "c"), ("c", "a")}) == ["a", "b", "c", "a"]
