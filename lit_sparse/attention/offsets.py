"""Pure functions for Fibonacci-offset attention: rung bases, alpha schedules, distance sets.

Everything here works on plain Python numbers so it can be tested against hand-written
values; the attention modules turn the results into tensors once per (layer, length).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import ConfigError

RUNG_BASES = ("fibonacci", "pow2")
SCHEDULES = ("fixed", "learned", "linear", "coprime", "custom")


def fibonacci_rungs(n_rungs: int = 15) -> list[int]:
    """The first ``n_rungs`` distinct Fibonacci numbers from 1: 1, 2, 3, 5, 8, ..."""
    if n_rungs < 0:
        raise ConfigError(f"n_rungs must be >= 0, got {n_rungs}")
    rungs, a, b = [], 1, 2
    for _ in range(n_rungs):
        rungs.append(a)
        a, b = b, a + b
    return rungs


def pow2_rungs(length: int) -> list[int]:
    """Every power of two <= length - 1 ("reach-matched": recomputed at each length)."""
    rungs, p = [], 1
    while p <= length - 1:
        rungs.append(p)
        p *= 2
    return rungs


def rung_base(base: str, length: int, n_rungs: int = 15) -> list[int]:
    """Rungs of ``base`` at running ``length``."""
    if base == "fibonacci":
        return fibonacci_rungs(n_rungs)
    if base == "pow2":
        return pow2_rungs(length)
    raise ConfigError(f"rung base must be one of {RUNG_BASES}, got {base!r}")


def coprime_stride(n_layers: int) -> int:
    """The largest s <= n_layers / 2 with gcd(s, n_layers) == 1 (1 for a single layer)."""
    for s in range(n_layers // 2, 0, -1):
        if math.gcd(s, n_layers) == 1:
            return s
    return 1


def linear_alphas(n_layers: int, alpha_min: float = 0.5, alpha_max: float = 1.5) -> list[float]:
    """alpha_l = alpha_min + l * (alpha_max - alpha_min) / (L - 1): a ramp over depth."""
    if n_layers == 1:
        return [(alpha_min + alpha_max) / 2]
    step = (alpha_max - alpha_min) / (n_layers - 1)
    return [alpha_min + layer * step for layer in range(n_layers)]


def coprime_alphas(n_layers: int, alpha_min: float = 0.5, alpha_max: float = 1.5) -> list[float]:
    """The linear values, layer l taking slot (S * l) mod L with S = coprime_stride(L)."""
    ramp = linear_alphas(n_layers, alpha_min, alpha_max)
    stride = coprime_stride(n_layers)
    return [ramp[(stride * layer) % n_layers] for layer in range(n_layers)]


def schedule_alphas(
    schedule: str,
    n_layers: int,
    alpha_min: float = 0.5,
    alpha_max: float = 1.5,
    custom: Sequence[float] | None = None,
) -> list[float]:
    """Initial alpha of every layer under ``schedule`` (learned starts at the range's middle)."""
    if schedule in ("fixed", "learned"):
        return [1.0] * n_layers if schedule == "fixed" else [(alpha_min + alpha_max) / 2] * n_layers
    if schedule == "linear":
        return linear_alphas(n_layers, alpha_min, alpha_max)
    if schedule == "coprime":
        return coprime_alphas(n_layers, alpha_min, alpha_max)
    if schedule == "custom":
        if custom is None or len(custom) != n_layers:
            got = None if custom is None else len(custom)
            raise ConfigError(
                f"alphas: the custom schedule needs one alpha per layer ({n_layers}), got {got}"
            )
        return [float(a) for a in custom]
    raise ConfigError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


def layer_distances(alpha: float, rungs: Sequence[int], window: int, length: int) -> list[int]:
    """Attended distances of one layer with a static alpha, sorted.

    {0..W} union {round(alpha * f) : W < round(alpha * f) <= length - 1}; Python's round
    (half to even); a set, so a distance reached twice counts once.
    """
    near = set(range(min(window, length - 1) + 1))
    far = {round(alpha * f) for f in rungs}
    return sorted(near | {d for d in far if window < d <= length - 1})


def interpolated_rungs(
    alpha: float, rungs: Sequence[int], window: int, length: int
) -> list[tuple[int, float]]:
    """(lo, frac) of each rung kept by the learned path, in rung order.

    Target t = alpha * f, lo = floor(t), frac = t - lo. A rung is skipped when round(t) <= W,
    when lo > length - 1, or when an earlier kept rung has the same lo. This is the plain
    reference of the vectorised rule in ``FibonacciPattern``.
    """
    kept, used = [], set()
    for f in rungs:
        t = alpha * f
        lo = math.floor(t)
        if round(t) <= window or lo > length - 1 or lo in used:
            continue
        used.add(lo)
        kept.append((lo, t - lo))
    return kept


def union_distances(per_layer: Sequence[Sequence[int]]) -> list[int]:
    """Sorted union of several layers' distance sets."""
    return sorted(set().union(*map(set, per_layer))) if per_layer else []


def two_hop_distances(per_layer: Sequence[Sequence[int]], length: int) -> list[int]:
    """Distances reachable through a layer and any later one (a + b <= length - 1).

    The residual stream carries a layer's output to every later layer, so any ordered pair
    composes; distance 0 is in every set, so single hops are included.
    """
    reach: set[int] = set()
    for index, first in enumerate(per_layer):
        for second in per_layer[index + 1 :]:
            reach |= {a + b for a in first for b in second if a + b <= length - 1}
    return sorted(reach)
