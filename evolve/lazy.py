"""Members of a package that load on first use (PEP 562), so light commands stay light.

A package whose ``__init__`` re-exports something heavy - the HTTP client, an engine's records -
lists those names with the module that defines them and sets
``__getattr__ = lazy_members(__name__, table, globals())``: ``import package`` then loads none of
them, and ``package.Name`` (or ``from package import Name``) imports the module the first time and
keeps the value. Type checkers read the same names from an ``if TYPE_CHECKING:`` import block.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_members"]


def lazy_members(package: str, table: Mapping[str, str], namespace: MutableMapping[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``table[name]`` on first use of ``name``.

    Args:
        package: The package's ``__name__`` (for the error message).
        table: Member name -> the module that defines it.
        namespace: The package's ``globals()``; a loaded member is stored there, so the next use
            costs nothing.

    Returns:
        The ``__getattr__`` function; it raises ``AttributeError`` for a name not in ``table``.
    """
    def load(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return load
