"""Plugin option checks for the top of a constructor (the same failure from a config, the CLI or
Python): one-line ConfigError ``<option> must be <allowed>, got <value>``."""

from __future__ import annotations

import inspect
import math
import numbers as numbers_
import typing
from typing import Any, Literal

from lit_sparse.errors import ConfigError


def numbers(**values: Any) -> None:
    """Every value is a real number (not a string, not a bool): ``alpha_min must be a number,
    got '0.5'``."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers_.Real):
            raise ConfigError(f"{name} must be a number, got {value!r}")


def at_least(low: float, **values: float) -> None:
    """Every value is >= ``low``: ``window must be >= 0, got -1``."""
    numbers(**values)
    for name, value in values.items():
        if not value >= low:
            raise ConfigError(f"{name} must be >= {low}, got {value}")


def positive(**values: float) -> None:
    """Every value is a finite number > 0: ``rung_width_end must be > 0 and finite, got 0.0``."""
    numbers(**values)
    for name, value in values.items():
        if not 0 < value < math.inf:
            raise ConfigError(f"{name} must be > 0 and finite, got {value}")


def share(**values: float) -> None:
    """Every value is a share in (0, 1]: ``anneal must be in (0, 1], got 1.5``."""
    numbers(**values)
    for name, value in values.items():
        if not 0 < value <= 1:
            raise ConfigError(f"{name} must be in (0, 1], got {value}")


def choices_of(cls: type) -> dict[str, tuple[Any, ...]]:
    """The arguments of ``cls.__init__`` annotated ``Literal[...]``, with their choices."""
    hints = typing.get_type_hints(cls.__init__)
    return {
        name: typing.get_args(hints[name])
        for name in inspect.signature(cls.__init__).parameters
        if typing.get_origin(hints.get(name)) is Literal
    }


def check_choices(plugin: Any) -> None:
    """Every ``Literal[...]`` constructor argument's attribute is one of its choices."""
    for name, allowed in choices_of(type(plugin)).items():
        value = getattr(plugin, name)
        if value not in allowed:
            shown = ", ".join(repr(choice) for choice in allowed)
            raise ConfigError(f"{name} must be one of {shown}, got {value!r}")
