"""Fibonacci attention's per-layer alpha schedules, each a type with only its own options, chosen
by class_path or by name with defaults (``schedule: coprime``); older flat options (``alpha_min``,
...) go through :func:`from_flat_options`."""

from __future__ import annotations

import functools
import importlib
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Literal

from lit_sparse.attention import offsets
from lit_sparse.attention.configurable import Configurable
from lit_sparse.attention.fibonacci_patterns import (
    FibonacciPattern,
    LearnedFibonacciPattern,
    RungLayout,
)
from lit_sparse.attention.gaussian_read import GaussianFibonacciPattern
from lit_sparse.attention.options import numbers, positive, share
from lit_sparse.errors import ConfigError

log = logging.getLogger(__name__)

ScheduleName = Literal["fixed", "linear", "coprime", "custom", "learned"]
FLAT_OPTIONS = (
    "alpha_min",
    "alpha_max",
    "alphas",
    "alpha_init",
    "rung_read",
    "rung_width_start",
    "rung_width_end",
    "rung_width_anneal",
)
"""The flat options the schedule types replaced (with ``schedule`` given as a name)."""


def _check_count(name: str, values: list[float], n_layers: int) -> None:
    if len(values) != n_layers:
        raise ConfigError(f"{name}: needs one alpha per layer ({n_layers}), got {len(values)}")


class Schedule(Configurable, ABC):
    """Every layer's alpha at initialisation, and the pattern a layer builds with it."""

    name = ""

    @abstractmethod
    def layer_alphas(self, n_layers: int) -> list[float]:
        """Every layer's alpha at initialisation."""

    def largest(self) -> dict[str, float]:
        """The largest alpha a layer can take, named by its option (for the reach check)."""
        return {"alpha": max(self.layer_alphas(1))}

    def check(self, n_layers: int) -> None:  # noqa: B027 - optional hook
        """Raise ConfigError for options that do not fit ``n_layers`` layers."""

    def pattern(self, layout: RungLayout, alpha: float) -> FibonacciPattern:
        """The layer with ``alpha``: integer rungs, unless the schedule learns alpha."""
        return FibonacciPattern(layout, alpha)


class Fixed(Schedule):
    """alpha = 1 in every layer: the Fibonacci rungs themselves."""

    name = "fixed"

    def layer_alphas(self, n_layers: int) -> list[float]:
        return [1.0] * n_layers


class _Range(Schedule):
    def __init__(self, alpha_min: float = 0.5, alpha_max: float = 1.5):
        """
        Args:
            alpha_min: low end of the alpha range (> 0).
            alpha_max: high end of the alpha range (> alpha_min).
        """
        numbers(alpha_min=alpha_min, alpha_max=alpha_max)
        if not (0 < alpha_min < alpha_max < math.inf):
            raise ConfigError(
                f"alpha_min, alpha_max must satisfy 0 < alpha_min < alpha_max < inf, "
                f"got alpha_min={alpha_min}, alpha_max={alpha_max}"
            )
        self.alpha_min, self.alpha_max = float(alpha_min), float(alpha_max)

    def largest(self) -> dict[str, float]:
        return {"alpha_max": self.alpha_max}


class Linear(_Range):
    """A ramp from alpha_min (first layer) to alpha_max (last layer)."""

    name = "linear"

    def layer_alphas(self, n_layers: int) -> list[float]:
        return offsets.linear_alphas(n_layers, self.alpha_min, self.alpha_max)


@functools.cache
def _warn_coprime_is_linear(n_layers: int) -> None:
    """Once per depth and process: at this depth the coprime schedule is the linear one."""
    log.warning(
        "schedule 'coprime' at %d layers is the 'linear' schedule: the largest stride <= L/2 "
        "coprime with L is 1 (depths 1, 2, 3, 4 and 6); use a depth such as 5, 7 or 8 for a "
        "coprime stagger that differs from linear",
        n_layers,
    )


class Coprime(_Range):
    """The linear ramp's values, layer l taking slot (S * l) mod L, S the largest stride
    <= L/2 coprime with L (linear at 1, 2, 3, 4 and 6 layers)."""

    name = "coprime"

    def layer_alphas(self, n_layers: int) -> list[float]:
        if offsets.coprime_stride(n_layers) == 1:
            _warn_coprime_is_linear(n_layers)
        return offsets.coprime_alphas(n_layers, self.alpha_min, self.alpha_max)


class Custom(Schedule):
    """One given alpha per layer."""

    name = "custom"

    def __init__(self, alphas: list[float]):
        """
        Args:
            alphas: one alpha per layer, each in (0, inf).
        """
        if isinstance(alphas, list | tuple):
            numbers(**{f"alphas[{i}]": a for i, a in enumerate(alphas)})
        if (
            not isinstance(alphas, list | tuple)
            or not alphas
            or any(not (0 < a < math.inf) for a in alphas)
        ):
            raise ConfigError(
                f"alphas must be a list of one alpha per layer, each in (0, inf), got {alphas}"
            )
        self.alphas = [float(a) for a in alphas]

    def layer_alphas(self, n_layers: int) -> list[float]:
        self.check(n_layers)
        return list(self.alphas)

    def largest(self) -> dict[str, float]:
        return {f"alphas[{i}]": a for i, a in enumerate(self.alphas)}

    def check(self, n_layers: int) -> None:
        _check_count("alphas", self.alphas, n_layers)


class RungRead(Configurable, ABC):
    """How a learned rung reads rows at the non-integer distance alpha * f."""

    name = ""

    @abstractmethod
    def pattern(
        self, layout: RungLayout, alpha: float, alpha_min: float, alpha_max: float
    ) -> LearnedFibonacciPattern:
        """The learned layer that reads this way."""


class Interpolate(RungRead):
    """Two rows, floor(alpha * f) and the one after, weighted by the fraction (linear in T)."""

    name = "interpolate"

    def pattern(self, layout, alpha, alpha_min, alpha_max) -> LearnedFibonacciPattern:
        return LearnedFibonacciPattern(layout, alpha, alpha_min, alpha_max)


class Gaussian(RungRead):
    """A normalised Gaussian band centred at alpha * f, width annealed (dense O(T^2))."""

    name = "gaussian"

    def __init__(self, width_start: float = 40.0, width_end: float = 0.5, anneal: float = 0.8):
        """
        Args:
            width_start: the band's width (sigma, positions) at the start of training.
            width_end: the width after annealing.
            anneal: share of training over which the width goes linearly from start to end.
        """
        positive(width_start=width_start, width_end=width_end)
        share(anneal=anneal)
        self.width_start, self.width_end = float(width_start), float(width_end)
        self.anneal = float(anneal)

    def pattern(self, layout, alpha, alpha_min, alpha_max) -> LearnedFibonacciPattern:
        widths = (self.width_start, self.width_end, self.anneal)
        return GaussianFibonacciPattern(layout, alpha, alpha_min, alpha_max, *widths)


READS: dict[str, type[RungRead]] = {"interpolate": Interpolate, "gaussian": Gaussian}


class Learned(_Range):
    """alpha = alpha_min + (alpha_max - alpha_min) * sigmoid(theta) per layer, theta learned."""

    name = "learned"

    def __init__(
        self,
        alpha_min: float = 0.5,
        alpha_max: float = 1.5,
        init: list[float] | None = None,
        read: RungRead | Literal["interpolate", "gaussian"] = "interpolate",
    ):
        """
        Args:
            alpha_min: low end of the alpha range (> 0).
            alpha_max: high end of the alpha range (> alpha_min).
            init: each layer's starting alpha, strictly inside the range (None: the middle).
            read: how a rung reads at distance alpha * f: "interpolate" or "gaussian" (a band).
        """
        super().__init__(alpha_min, alpha_max)
        if init is not None:
            if not isinstance(init, list | tuple):
                raise ConfigError(f"init must be a list of one alpha per layer, got {init!r}")
            numbers(**{f"init[{i}]": a for i, a in enumerate(init)})
            bad = [a for a in init if not (self.alpha_min < a < self.alpha_max)]
            if not init or bad:
                raise ConfigError(
                    f"init={init}: expected one alpha per layer, each strictly between "
                    f"alpha_min={alpha_min} and alpha_max={alpha_max}"
                    + (f" (outside: {bad})" if bad else "")
                )
        self.init = None if init is None else [float(a) for a in init]
        self.read = _build(read, RungRead, READS, "read")

    def layer_alphas(self, n_layers: int) -> list[float]:
        self.check(n_layers)
        middle = (self.alpha_min + self.alpha_max) / 2
        return [middle] * n_layers if self.init is None else list(self.init)

    def check(self, n_layers: int) -> None:
        if self.init is not None:
            _check_count("init", self.init, n_layers)

    def pattern(self, layout: RungLayout, alpha: float) -> FibonacciPattern:
        return self.read.pattern(layout, alpha, self.alpha_min, self.alpha_max)


SCHEDULES: dict[str, type[Schedule]] = {
    cls.name: cls for cls in (Fixed, Linear, Coprime, Custom, Learned)
}


def _build(value: Any, base: type, names: Mapping[str, type], field: str) -> Any:
    """An instance of ``base`` from itself, a name (defaults) or ``{class_path, init_args}``."""
    if isinstance(value, base):
        return value
    if isinstance(value, str) and value in names:
        try:
            return names[value]()
        except TypeError:
            raise ConfigError(
                f"{field}={value!r} needs options: give it as {{class_path: "
                f"{names[value].__name__}, init_args: {{...}}}}"
            ) from None
    if isinstance(value, Mapping) and "class_path" in value:
        cls = _resolve(str(value["class_path"]), base, names, field)
        try:
            return cls(**dict(value.get("init_args") or {}))
        except TypeError as err:
            raise ConfigError(f"{field}: {cls.__name__}: {err}") from None
    raise ConfigError(
        f"{field} must be one of {', '.join(map(repr, names))} or {{class_path, init_args}} "
        f"of a {base.__name__}, got {value!r}"
    )


def _resolve(class_path: str, base: type, names: Mapping[str, type], field: str) -> type:
    by_name = {**names, **{cls.__name__: cls for cls in names.values()}}
    cls = by_name.get(class_path) or by_name.get(class_path.rpartition(".")[2])
    if cls is None or class_path.rpartition(".")[0] not in ("", cls.__module__):
        cls = _import(class_path, field)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ConfigError(
            f"{field}: class_path {class_path!r} is not a {base.__name__}; one of "
            f"{', '.join(c.__name__ for c in names.values())}"
        )
    return cls


def _import(class_path: str, field: str) -> Any:
    """The object ``class_path`` names; None when its module or the name is not there; a
    module that raises on import is one ConfigError line naming what it raised."""
    module, _, name = class_path.rpartition(".")
    if not module:
        return None
    try:
        return getattr(importlib.import_module(module), name, None)
    except ModuleNotFoundError as err:
        if err.name and (module == err.name or module.startswith(err.name + ".")):
            return None  # no such module
        failure = err
    except Exception as err:  # anything the module raises while it imports
        failure = err
    reason = f"{type(failure).__name__}: {' '.join(str(failure).split())}"
    raise ConfigError(f"{field}: class_path {class_path!r}: importing {module} raised {reason}")


def to_schedule(value: Schedule | str | Mapping[str, Any]) -> Schedule:
    """A schedule from an instance, a name or ``{class_path, init_args}``."""
    return _build(value, Schedule, SCHEDULES, "schedule")


def from_flat_options(init_args: Mapping[str, Any]) -> dict[str, Any]:
    """Flat pre-schedule-type options (``alpha_min``, ``rung_read``, ...) as ``schedule:
    {class_path, init_args}``; one the schedule ignores is dropped unless refused then."""
    args = dict(init_args)
    if not any(key in args for key in FLAT_OPTIONS):
        return args
    flat = {key: value for key in FLAT_OPTIONS if (value := args.pop(key, None)) is not None}
    name = args.get("schedule", "fixed")
    if not isinstance(name, str):  # today's form: a schedule holds its own options
        given = ", ".join(f"{key}={value!r}" for key, value in flat.items())
        raise ConfigError(
            f"{given}: the flat options of earlier versions go with schedule given by name "
            "(schedule: linear); with schedule as {class_path, init_args} give its options in "
            "schedule.init_args (e.g. schedule.init_args.alpha_max)"
        )
    if name not in SCHEDULES:
        raise ConfigError(
            f"schedule={name!r}: with the flat options ({', '.join(FLAT_OPTIONS)}) the "
            f"schedule is one of {', '.join(map(repr, SCHEDULES))}"
        )
    refused = {"alphas": "custom", "alpha_init": "learned"}
    if flat.get("rung_read") == "gaussian":
        refused["rung_read"] = "learned"
    for key, reader in refused.items():
        if key in flat and name != reader:
            raise ConfigError(f"{key} is only read by schedule {reader!r}, not {name!r}")
    span = {key: flat[key] for key in ("alpha_min", "alpha_max") if key in flat}
    init: dict[str, Any] = {}
    if name in ("linear", "coprime"):
        init = span
    elif name == "custom":
        init = {"alphas": flat.get("alphas")}
    elif name == "learned":
        init = {**span, "init": flat.get("alpha_init")}
        if flat.get("rung_read") == "gaussian":
            widths = {"width_start": "rung_width_start", "width_end": "rung_width_end"}
            widths["anneal"] = "rung_width_anneal"
            read = {new: flat[old] for new, old in widths.items() if old in flat}
            init["read"] = {"class_path": _path(Gaussian), "init_args": read}
    args["schedule"] = {"class_path": _path(SCHEDULES[name]), "init_args": init}
    return args


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
