"""The attention registry: one dict from short name to plugin class."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from .base import AttentionPlugin

_REGISTRY: dict[str, type[AttentionPlugin]] = {}


def register_attention(name: str) -> Callable[[type[AttentionPlugin]], type[AttentionPlugin]]:
    """Class decorator: register an ``AttentionPlugin`` subclass under ``name``."""

    def register(cls: type[AttentionPlugin]) -> type[AttentionPlugin]:
        if not (isinstance(cls, type) and issubclass(cls, AttentionPlugin)):
            raise TypeError(f"attention {name!r}: {cls!r} is not an AttentionPlugin subclass")
        if name in _REGISTRY:
            raise ValueError(
                f"attention {name!r} is already registered by {_REGISTRY[name].__qualname__}"
            )
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return register


def list_attention() -> list[str]:
    """Registered attention names, sorted."""
    return sorted(_REGISTRY)


def get_attention(name: str) -> type[AttentionPlugin]:
    """The plugin class registered under ``name``; an unknown name lists the valid ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"attention: unknown name {name!r}; registered: {', '.join(list_attention())}"
        ) from None


def _resolve_class(path: str) -> type[AttentionPlugin]:
    if path in _REGISTRY:
        return _REGISTRY[path]
    by_class_name = {cls.__name__: cls for cls in _REGISTRY.values()}
    if path in by_class_name:
        return by_class_name[path]
    module_name, _, attr = path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), attr, None) if module_name else None
    if not (isinstance(cls, type) and issubclass(cls, AttentionPlugin)):
        raise ConfigError(
            f"attention: unknown name {path!r}; registered: {', '.join(list_attention())}"
        )
    return cls


def build_attention(spec: str | Mapping[str, Any] | AttentionPlugin | None = None, **overrides):
    """An attention plugin from a registry name, a class path, a ``{class_path, init_args}``
    dict (as saved in checkpoints and configs) or an instance; None means dense."""
    if isinstance(spec, AttentionPlugin):
        return type(spec)(**{**spec.init_args(), **overrides}) if overrides else spec
    if spec is None:
        spec = "dense"
    if isinstance(spec, str):
        return _resolve_class(spec)(**overrides)
    if "class_path" not in spec:
        raise ConfigError(f"attention: a dict needs 'class_path' and 'init_args', got {dict(spec)}")
    init_args = {**dict(spec.get("init_args") or {}), **overrides}
    return _resolve_class(spec["class_path"])(**init_args)
