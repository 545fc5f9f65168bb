"""Public names of a package that import on first use (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_names(package: str, public: dict[str, str]) -> tuple[Callable, Callable]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names ``public`` maps to
    the modules they come from; a name is imported when first asked for, then kept."""

    def __getattr__(name: str):
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(public[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__
