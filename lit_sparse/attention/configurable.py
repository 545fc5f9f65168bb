"""Plugins and schedules: constructor arguments kept as same-named attributes, so each writes
itself back as ``{"class_path", "init_args"}`` and compares by those options."""

from __future__ import annotations

import inspect
from typing import Any


def plain(value: Any) -> Any:
    """``value`` as YAML/JSON data: a :class:`Configurable` as its ``to_config()``."""
    if isinstance(value, Configurable):
        return value.to_config()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


class Configurable:
    """Keeps each constructor argument as an attribute of the same name."""

    def _options(self) -> dict[str, Any]:
        params = inspect.signature(type(self).__init__).parameters.values()
        named = (p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
        return {name: getattr(self, name) for name in named if name != "self"}

    def init_args(self) -> dict[str, Any]:
        """The constructor's arguments as plain data (nested objects as their configs)."""
        return {name: plain(value) for name, value in self._options().items()}

    def to_config(self) -> dict[str, Any]:
        cls = type(self)
        return {"class_path": f"{cls.__module__}.{cls.__qualname__}", "init_args": self.init_args()}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.init_args() == self.init_args()

    __hash__ = None  # mutable options: equal objects need not stay equal

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._options().items())
        return f"{type(self).__name__}({args})"
