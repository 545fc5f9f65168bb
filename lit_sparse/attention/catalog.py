"""The registry described for people (``python -m lit_sparse plugins``): each plugin's name,
class, origin, summary and options with their defaults."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from dataclasses import dataclass

from lit_sparse.attention.registry import ENTRY_POINT_GROUP, builtin_names, get_attention
from lit_sparse.attention.registry import list_attention as registered_names


@dataclass(frozen=True)
class PluginOption:
    """One constructor argument of a plugin."""

    name: str
    default: str
    """The default as Python writes it (``'use'``, ``8``, ``None``); "required" if none."""
    help: str
    """Its docstring entry on one line ("" if undocumented)."""


@dataclass(frozen=True)
class PluginInfo:
    """One registered plugin."""

    name: str
    class_path: str
    origin: str
    """"built-in", or "package <distribution> <version>" for an entry point."""
    summary: str
    options: tuple[PluginOption, ...]


def _first_sentence(text: str) -> str:
    """The text up to its first full stop followed by a capital (one line of words)."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(text.split()), maxsplit=1)[0]


def _options(cls: type) -> tuple[PluginOption, ...]:
    from docstring_parser import parse  # jsonargparse's docstring reader

    params = [*parse(cls.__init__.__doc__ or "").params, *parse(cls.__doc__ or "").params]
    docs = {p.arg_name: p.description or "" for p in params if p.arg_name}
    options = []
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        empty = parameter.default is inspect.Parameter.empty
        default = "required" if empty else repr(parameter.default)
        options.append(PluginOption(name, default, " ".join(docs.get(name, "").split())))
    return tuple(options)


def _origins() -> dict[str, str]:
    """Entry-point name -> "package <distribution> <version>"."""
    entries = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return {
        e.name: "an entry point" if e.dist is None else f"package {e.dist.name} {e.dist.version}"
        for e in entries
    }


def describe_plugins(names: list[str] | None = None) -> list[PluginInfo]:
    """Every registered plugin (or those ``names``; unknown: ConfigError), sorted by name."""
    builtins, origins = set(builtin_names()), _origins()
    infos = []
    for name in sorted(registered_names() if names is None else names):
        cls = get_attention(name)
        runtime = f"registered at run time by {cls.__module__}"
        origin = "built-in" if name in builtins else origins.get(name, runtime)
        summary = _first_sentence((inspect.getdoc(cls) or "").split("\n\n")[0])
        infos.append(
            PluginInfo(name, f"{cls.__module__}.{cls.__qualname__}", origin, summary, _options(cls))
        )
    return infos
