"""One list style on every command line, ``--lengths 1024 2048`` (jsonargparse reads one value)."""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Union

_SCALARS = (int, float, str, bool)
_NUMBER = re.compile(r"^-\d|^-\.\d")  # a negative number is a value, not an option


def _is_scalar(hint: Any) -> bool:
    return hint in _SCALARS or typing.get_origin(hint) is Literal


def _is_scalar_list(hint: Any) -> bool:
    """list[X], tuple[X, ...], Sequence[X] of scalars X."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin not in (list, tuple, Sequence, typing.Sequence) or not args:
        return False
    return all(_is_scalar(a) for a in args if a is not Ellipsis)


def list_kind(hint: Any) -> Literal["list", "either"] | None:
    """ "list": a list of scalars (or None); "either": that or a scalar (``trainer.devices``)."""
    if _is_scalar_list(hint):
        return "list"
    if typing.get_origin(hint) in (Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        lists = [a for a in options if _is_scalar_list(a)]
        if len(lists) == 1 and all(a in lists or _is_scalar(a) for a in options):
            return "list" if len(options) == 1 else "either"
    return None


def list_options(parser: Any) -> dict[str, str]:
    """Option string -> :func:`list_kind` of every list option of a parser and its subcommands."""
    found: dict[str, str] = {}
    parsers = [parser]
    while parsers:
        current = parsers.pop()
        for action in current._actions:
            if (kind := list_kind(getattr(action, "_typehint", None))) is not None:
                found.update((o, kind) for o in action.option_strings if not o.endswith("+"))
            if getattr(action, "choices", None) and hasattr(action, "_name_parser_map"):
                parsers.extend(action.choices.values())  # subcommands
    return found


def _values_from(args: Sequence[str], i: int) -> tuple[list[str], int]:
    """The values from ``args[i]`` up to the next option, and the index after them."""
    end = i
    while end < len(args) and (not args[end].startswith("-") or _NUMBER.match(args[end])):
        end += 1
    return list(args[i:end]), end


def _bracketed(values: Sequence[str]) -> str:
    return "[" + ", ".join(values) + "]"


def join_list_values(args: Iterable[str], options: dict[str, str]) -> list[str]:
    """``args`` with the values after each list option of ``options`` joined into one."""
    args, out, i = list(args), [], 0
    while i < len(args):
        arg = args[i]
        i += 1
        name, eq, inline = arg.partition("=")
        kind = options.get(name)
        if kind is None:
            out.append(arg)
            continue
        # --lengths=1024: one value, as argparse takes it
        values, i = ([inline], i) if eq else _values_from(args, i)
        out.append(name)
        out.extend(_joined(values, kind))
    return out


def _joined(values: list[str], kind: str) -> list[str]:
    if len(values) > 1 or (values and kind == "list" and not _whole(values[0])):
        return [_bracketed(values)]
    return values  # nothing (jsonargparse reports the missing value) or one whole value


def _whole(value: str) -> bool:
    """A value that already is a whole list option: bracketed, null, or a file."""
    text = value.strip()
    return (
        text.startswith("[") or text in ("null", "None", "~") or text.endswith((".yaml", ".json"))
    )


def split_option_values(args: Sequence[str]) -> list[tuple[str, str]]:
    """(key, value) pairs of ``--key v``, ``--key=v`` and ``--key v1 v2`` (as ``[v1, v2]``)."""
    pairs, i = [], 0
    while i < len(args):
        key, eq, value = args[i].partition("=")
        i += 1
        if eq:
            pairs.append((key, value))
            continue
        values, i = _values_from(args, i)
        pairs.append((key, values[0] if len(values) == 1 else _bracketed(values) if values else ""))
    return pairs
