"""Public names of a package that import on first use (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable


def lazy_names(
    package: str, public: dict[str, str], *, subpackages: bool = False
) -> tuple[Callable, Callable]:
    """``package``'s ``__getattr__`` and ``__dir__``: each name of ``public`` (name -> module) is
    imported when first asked for, then kept; with ``subpackages``, submodules too."""

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

    return __getattr__, __dir__
