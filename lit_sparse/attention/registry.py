"""The attention registry: one dict from short name to plugin class.

Where the names come from:

- built-in plugins: every module of ``lit_sparse.attention`` is imported once, before the
  first registration or lookup, so a new built-in is one file with
  ``@register_attention("name")`` (nothing else imports it);
- other packages: each entry point of the group ``lit_sparse.attention``
  (``[project.entry-points."lit_sparse.attention"] dilated = "my_pkg.dilated:DilatedAttention"``)
  is loaded on the first lookup (``list_attention``, ``get_attention``, ``resolve_attention``,
  ``build_attention``). One that fails to load, is not a plugin, or takes a built-in's name
  is skipped with one warning line naming its distribution; the rest of the registry works.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lit_sparse.attention.base import AttentionPlugin
from lit_sparse.errors import ConfigError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "lit_sparse.attention"

_REGISTRY: dict[str, type[AttentionPlugin]] = {}
_loaded = {"builtins": False, "entry_points": False}


def register_attention(name: str) -> Callable[[type[AttentionPlugin]], type[AttentionPlugin]]:
    """Class decorator: register an ``AttentionPlugin`` subclass under ``name``."""

    def register(cls: type[AttentionPlugin]) -> type[AttentionPlugin]:
        if not (isinstance(cls, type) and issubclass(cls, AttentionPlugin)):
            raise TypeError(f"attention {name!r}: {cls!r} is not an AttentionPlugin subclass")
        _discover_builtins()  # a name is checked against every built-in, imported or not
        if name in _REGISTRY:
            raise ValueError(
                f"attention {name!r} is already registered by {_REGISTRY[name].__qualname__}"
            )
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return register


def _discover_builtins() -> None:
    """Import every module of this package once; the plugins among them register."""
    if _loaded["builtins"]:
        return
    _loaded["builtins"] = True  # first: the modules register through the decorator
    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if not module.ispkg and not module.name.startswith("_"):
            importlib.import_module(f"{package}.{module.name}")


def builtin_names() -> list[str]:
    """The names registered by lit_sparse's own modules, sorted."""
    _discover_builtins()
    package = __name__.rpartition(".")[0]
    return sorted(n for n, cls in _REGISTRY.items() if cls.__module__.startswith(package + "."))


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _load_entry_points() -> None:
    """Register each installed distribution's ``lit_sparse.attention`` entry points once."""
    if _loaded["entry_points"]:
        return
    _loaded["entry_points"] = True  # first: a plugin module may look names up as it loads
    _discover_builtins()
    builtins = set(builtin_names())
    for entry in _entry_points():
        problem = _register_entry_point(entry, builtins)
        if problem:
            dist = getattr(entry.dist, "name", None) or "an unknown distribution"
            log.warning(
                "warning: attention plugin %r (%s, from %s) is not registered: %s",
                entry.name,
                entry.value,
                dist,
                problem,
            )


def _register_entry_point(entry: importlib.metadata.EntryPoint, builtins: set[str]) -> str:
    """Register one entry point; '' when done, else why it was refused."""
    if entry.name in builtins:
        return f"the name {entry.name!r} is a built-in attention ({_REGISTRY[entry.name].__name__})"
    try:
        cls = entry.load()
    except Exception as err:  # anything a broken package raises on import
        return f"{type(err).__name__}: {' '.join(str(err).split())}"
    if not (isinstance(cls, type) and issubclass(cls, AttentionPlugin)):
        return f"{entry.value} is not an AttentionPlugin subclass"
    registered = _REGISTRY.get(entry.name)
    if registered is cls:  # the class registered itself under this name as it loaded
        return ""
    if registered is not None:
        return f"the name {entry.name!r} is already registered by {registered.__module__}"
    if cls.name and _REGISTRY.get(cls.name) is cls:
        return f"{entry.value} is already registered as {cls.name!r}"
    cls.name = entry.name
    _REGISTRY[entry.name] = cls
    return ""


def _registry() -> dict[str, type[AttentionPlugin]]:
    """The registry with built-ins and entry points loaded."""
    _load_entry_points()
    return _REGISTRY


def list_attention() -> list[str]:
    """Registered attention names (built-in and from entry points), sorted."""
    return sorted(_registry())


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
    return ConfigError(
        f"{field}={value!r}: unknown attention; registered: {', '.join(list_attention())} "
        "(or a class path)"
    )


def get_attention(name: str) -> type[AttentionPlugin]:
    """The plugin class registered under ``name``; an unknown name lists the valid ones."""
    try:
        return _registry()[name]
    except KeyError:
        raise unknown_attention(name) from None


def resolve_attention(value: str, field: str = "attention") -> type[AttentionPlugin]:
    """The plugin class a registry name, a class name of a registered plugin or an import
    path names; anything else raises ConfigError naming ``field`` and the registered names."""
    registry = _registry()
    if value in registry:
        return registry[value]
    by_class_name = {cls.__name__: cls for cls in registry.values()}
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
    if spec is None or isinstance(spec, str):
        return resolve_attention("dense" if spec is None else spec)(**overrides)
    if "class_path" not in spec:
        raise ConfigError(f"attention: a dict needs 'class_path' and 'init_args', got {dict(spec)}")
    init_args = {**dict(spec.get("init_args") or {}), **overrides}
    return resolve_attention(spec["class_path"])(**init_args)


def expand_attention_names(args: Sequence[str]) -> list[str]:
    """Let ``--model.attention fibonacci`` (and ``--model.attention.help fibonacci``) name a
    plugin by its registry name.

    jsonargparse resolves class names and import paths; a registry name is rewritten to its
    class path, and a bare name that is neither raises ConfigError listing the registered
    names. Dotted paths and config files are left for jsonargparse.
    """
    out = list(args)
    for i, arg in enumerate(out):
        for flag in ("--model.attention", "--model.attention.help"):
            if arg == flag and i + 1 < len(out):
                out[i + 1] = _class_path(out[i + 1])
            elif arg.startswith(flag + "="):
                out[i] = f"{flag}={_class_path(arg[len(flag) + 1 :])}"
    return out


def _class_path(value: str) -> str:
    """The class path of a registry name or class name; other values unchanged."""
    if "." in value or value.startswith(("{", "[")) or Path(value).suffix in (".yaml", ".json"):
        return value
    cls = resolve_attention(value, field="model.attention")
    return f"{cls.__module__}.{cls.__qualname__}"
