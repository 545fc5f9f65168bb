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


def unknown_attention(value: str, field: str = "attention") -> ConfigError:
    """The error for a name that is neither registered nor a plugin class path."""
    return ConfigError(
        f"{field}={value!r}: unknown attention; registered: {', '.join(list_attention())} "
        "(or a class path)"
    )


def get_attention(name: str) -> type[AttentionPlugin]:
    """The plugin class registered under ``name``; an unknown name lists the valid ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise unknown_attention(name) from None


def resolve_attention(value: str, field: str = "attention") -> type[AttentionPlugin]:
    """The plugin class a registry name, a class name of a registered plugin or an import
    path names; anything else raises ConfigError naming ``field`` and the registered names."""
    if value in _REGISTRY:
        return _REGISTRY[value]
    by_class_name = {cls.__name__: cls for cls in _REGISTRY.values()}
    if value in by_class_name:
        return by_class_name[value]
    module_name, _, attr = value.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr, None) if module_name else None
    except ImportError as err:  # a plugin from a package that is not installed
        raise ConfigError(
            f"{field}={value!r}: cannot import {module_name!r} ({err}); install the package "
            f"that provides it, or use a registered name: {', '.join(list_attention())}"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, AttentionPlugin)):
        raise unknown_attention(value, field)
    return cls


def build_attention(spec: str | Mapping[str, Any] | AttentionPlugin | None = None, **overrides):
    """An attention plugin from a registry name, a class path, a ``{class_path, init_args}``
    dict (as saved in checkpoints and configs) or an instance; None means dense."""
    if isinstance(spec, AttentionPlugin):
        return type(spec)(**{**spec.init_args(), **overrides}) if overrides else spec
    if spec is None:
        spec = "dense"
    if isinstance(spec, str):
        return resolve_attention(spec)(**overrides)
    if "class_path" not in spec:
        raise ConfigError(f"attention: a dict needs 'class_path' and 'init_args', got {dict(spec)}")
    init_args = {**dict(spec.get("init_args") or {}), **overrides}
    return resolve_attention(spec["class_path"])(**init_args)
