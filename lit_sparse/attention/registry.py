"""The attention registry: short name -> plugin class, from ``@register_attention("name")`` and
entry points in group ``lit_sparse.attention`` (``dilated = "my_pkg.dilated:DilatedAttention"``)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lit_sparse.attention.base import AttentionPlugin
from lit_sparse.errors import ConfigError
from lit_sparse.registry import Registry

ENTRY_POINT_GROUP = "lit_sparse.attention"

ATTENTION: Registry[type[AttentionPlugin]] = Registry(
    "attention", AttentionPlugin, "lit_sparse.attention", ENTRY_POINT_GROUP
)
"""The attention patterns: built-ins of this package and ``lit_sparse.attention`` entry points."""

register_attention = ATTENTION.register
"""Class decorator: register an ``AttentionPlugin`` subclass under a name."""
builtin_names = ATTENTION.builtin_names


def list_attention() -> list[str]:
    """Registered attention names (built-in and from entry points), sorted."""
    return ATTENTION.names()


def all_conformance_cases(window: int, n_layers: int) -> dict[str, AttentionPlugin]:
    """Every registered plugin's ``conformance_cases(window, n_layers)``: case id -> plugin."""
    return _merged_cases(lambda cls: cls.conformance_cases(window, n_layers))


def all_bench_cases(keys: int, window: int) -> dict[str, AttentionPlugin]:
    """Every registered plugin's ``bench_cases(keys, window)``: row name -> plugin."""
    return _merged_cases(lambda cls: cls.bench_cases(keys, window))


def _merged_cases(
    cases_of: Callable[[type[AttentionPlugin]], dict[str, AttentionPlugin]],
) -> dict[str, AttentionPlugin]:
    merged: dict[str, AttentionPlugin] = {}
    for name in list_attention():
        for case, plugin in cases_of(get_attention(name)).items():
            if case in merged:
                raise ValueError(f"case {case!r} of attention {name!r} is another plugin's too")
            merged[case] = plugin
    return merged


def unknown_attention(value: str, field: str = "attention") -> ConfigError:
    """The error for a name that is neither registered nor a plugin class path."""
    return ConfigError(f"{ATTENTION.unknown(value, field)} (or a class path)")


def get_attention(name: str) -> type[AttentionPlugin]:
    """The plugin class registered under ``name``; an unknown name lists the valid ones."""
    try:
        return ATTENTION.load()[name]
    except KeyError:
        raise unknown_attention(name) from None


def resolve_attention(value: str, field: str = "attention") -> type[AttentionPlugin]:
    """The plugin class of a registry name, registered class name or import path."""
    registry = ATTENTION.load()
    by_name = {**{cls.__name__: cls for cls in registry.values()}, **registry}
    if value in by_name:
        return by_name[value]
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
    """A plugin from a name, class path, ``{class_path, init_args}`` or instance (None: dense)."""
    if isinstance(spec, AttentionPlugin):
        if not overrides:
            return spec
        spec = spec.to_config()
    if spec is None or isinstance(spec, str):
        cls, init_args = resolve_attention("dense" if spec is None else spec), {}
    elif "class_path" in spec:
        cls, init_args = resolve_attention(spec["class_path"]), dict(spec.get("init_args") or {})
    else:
        raise ConfigError(f"attention: a dict needs 'class_path' and 'init_args', got {dict(spec)}")
    return cls(**cls.upgrade_init_args({**init_args, **overrides}))


PLUGIN_FLAG = re.compile(r"--model\.attention(\.(init_args\.)?(local|global)_attention)?(\.help)?")
"""The options that take a plugin: the model's, and a hybrid's local and global plugins."""


def expand_attention_names(args: Sequence[str]) -> list[str]:
    """A registry name after ``--model.attention`` (a hybrid's
    ``--model.attention.local_attention`` and ``global_attention``, or their ``.help``) as its
    class path; dotted paths and files are left to jsonargparse."""
    out = list(args)
    for i, arg in enumerate(out):
        flag, equals, value = arg.partition("=")
        if not PLUGIN_FLAG.fullmatch(flag):
            continue
        if equals:
            out[i] = f"{flag}={_class_path(value)}"
        elif i + 1 < len(out):
            out[i + 1] = _class_path(out[i + 1])
    return out


def _class_path(value: str) -> str:
    """The class path of a registry name or class name; other values unchanged."""
    if "." in value or value.startswith(("{", "[")) or Path(value).suffix in (".yaml", ".json"):
        return value
    cls = resolve_attention(value, field="model.attention")
    return f"{cls.__module__}.{cls.__qualname__}"
