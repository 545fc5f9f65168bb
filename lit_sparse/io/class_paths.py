"""A config's ``class_path`` (``package.module.Name``) as the object it names."""

from __future__ import annotations

import importlib
from typing import Any


def import_class(class_path: Any) -> Any:
    """The object ``class_path`` names, or None when it is no dotted path or does not import."""
    if not isinstance(class_path, str) or "." not in class_path:
        return None
    module, _, name = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except (ImportError, ValueError):
        return None


def names_subclass(value: Any, base: type) -> bool:
    """Whether a config value (an instance or a ``{class_path, ...}`` group) is a ``base``."""
    if isinstance(value, base):
        return True
    cls = import_class(value.get("class_path") if hasattr(value, "get") else None)
    return isinstance(cls, type) and issubclass(cls, base)
