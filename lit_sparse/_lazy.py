"""Public names of a package that import on first use (PEP 562 ``__getattr__``).

A package names each public name once, as an explicit re-export (``from module import name as
name``) at its top level or, to import it on first use, in an ``if TYPE_CHECKING:`` block. Editors,
type checkers and ruff read those lines; :func:`reexported` reads them from the package's source."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import sys
from collections.abc import Callable


def reexported(package: str) -> dict[str, str]:
    """Name -> module of each ``from module import name as name`` of ``package`` (its source's top
    level and ``if TYPE_CHECKING:`` block): its public names, for ``__all__``."""
    body = ast.parse(sys.modules[package].__loader__.get_source(package)).body
    blocks = [
        node.body
        for node in body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    ]
    return {
        alias.name: statement.module
        for statement in itertools.chain(body, *blocks)
        if isinstance(statement, ast.ImportFrom)
        for alias in statement.names
        if alias.asname == alias.name
    }


def lazy_names(
    package: str, more: dict[str, str] | None = None, *, subpackages: bool = False
) -> tuple[Callable, Callable, list[str]]:
    """``package``'s ``__getattr__``, ``__dir__`` and ``__all__``: each name it re-exports in its
    ``TYPE_CHECKING`` block, and each of ``more`` (name -> module), is imported when first asked
    for, then kept; with ``subpackages``, submodules too."""
    public = {**reexported(package), **(more or {})}

    def __getattr__(name: str):
        if name in public:
            value = getattr(importlib.import_module(public[name]), name)
        elif (
            subpackages
            and not name.startswith("_")
            and importlib.util.find_spec(f"{package}.{name}") is not None
        ):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__, sorted(public)
