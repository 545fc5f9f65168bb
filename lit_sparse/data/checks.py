"""Integer options checked alike (the data modules', lm-eval's model arguments): one
ConfigError line each, ``<field>=<value>: expected an integer >= <low>``."""

from __future__ import annotations

from numbers import Integral
from typing import Any

from lit_sparse.errors import ConfigError


def check_int(field: str, value: Any, low: int = 1, allow_none: bool = False) -> Any:
    """``value`` if an integer >= ``low`` (or None with ``allow_none``), else a ConfigError."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        allowed = f"an integer >= {low}" + (" or None" if allow_none else "")
        raise ConfigError(f"{field}={value!r}: expected {allowed}")
    return value
