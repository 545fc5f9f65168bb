"""Pure functions for Fibonacci-offset attention: rung bases, alpha schedules, distance sets,
and the learned layer's rung rule. Every rule is prefix-consistent: a position's keys never
depend on the sequence length (decoding relies on it)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from lit_sparse.errors import ConfigError

RUNG_BASES = ("fibonacci", "pow2")


MAX_DISTANCE = 2**53
"""The longest rung distance alpha * f: exact in float64 and int64, finite in float32."""
MAX_RUNGS = 77
"""The most Fibonacci rungs: the 77th, 8,944,394,323,791,464, is the last below MAX_DISTANCE."""


def fibonacci_rungs(n_rungs: int = 15) -> list[int]:
    """The first ``n_rungs`` distinct Fibonacci numbers from 1: 1, 2, 3, 5, 8, ..."""
    if n_rungs < 0:
        raise ConfigError(f"n_rungs must be >= 0, got {n_rungs}")
    if n_rungs > MAX_RUNGS:
        raise ConfigError(
            f"n_rungs={n_rungs}: must be at most {MAX_RUNGS} (the {MAX_RUNGS}th rung is "
            f"{fibonacci_rungs(MAX_RUNGS)[-1]:.2e} tokens, past any sequence; later ones "
            "overflow the distance arithmetic)"
        )
    rungs, a, b = [], 1, 2
    for _ in range(n_rungs):
        rungs.append(a)
        a, b = b, a + b
    return rungs


def check_alpha_reach(rungs: Sequence[int], **alphas: float) -> None:
    """ConfigError for the first of ``alphas`` with alpha x max(rungs) past MAX_DISTANCE."""
    largest = max(rungs, default=1)
    limit = MAX_DISTANCE / largest
    for name, alpha in alphas.items():
        if alpha > limit:
            raise ConfigError(
                f"{name}={alpha:g}: must be at most {limit:.4g} (alpha x the largest rung, "
                f"{largest:,}, is a distance in tokens, at most 2**53: a distance past any "
                "sequence attends nothing, and larger ones overflow the arithmetic)"
            )


def pow2_rungs(length: int) -> list[int]:
    """Every power of two <= length - 1 (the paper's "reach-matched" rungs at ``length``)."""
    return [1 << i for i in range(max(0, length - 1).bit_length())]


def rung_base(base: str, training_length: int, n_rungs: int = 15) -> list[int]:
    """The first ``n_rungs`` Fibonacci numbers, or the powers of two <= training_length - 1."""
    if base == "fibonacci":
        return fibonacci_rungs(n_rungs)
    if base == "pow2":
        return pow2_rungs(training_length)
    raise ConfigError(f"rung base must be one of {RUNG_BASES}, got {base!r}")


def new_rungs(base: str, training_length: int, length: int, alpha: float) -> list[int]:
    """Rungs only beyond the training length: pow2's larger powers whose distance at ``alpha``
    fits in ``length`` (Fibonacci: none)."""
    if base != "pow2" or length <= training_length:
        return []
    extra, p = [], 1 << max(0, training_length - 1).bit_length()  # first power >= T_train
    while math.floor(alpha * p) <= length - 1:
        extra.append(p)
        p *= 2
    return extra


def coprime_stride(n_layers: int) -> int:
    """The largest s <= n_layers / 2 with gcd(s, n_layers) == 1 (1 for a single layer)."""
    return next((s for s in range(n_layers // 2, 0, -1) if math.gcd(s, n_layers) == 1), 1)


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


def layer_distances(
    alpha: float,
    rungs: Sequence[int],
    window: int,
    length: int,
    later_rungs: Sequence[int] = (),
    later_from: int = 0,
) -> list[int]:
    """Sorted attended distances of a static-alpha layer: {0..W} union
    {round(alpha * f) : W < round(alpha * f) <= length - 1} (round half to even); a distance of
    ``later_rungs`` (:func:`new_rungs`) counts only when >= ``later_from``."""
    near = set(range(min(window, length - 1) + 1))
    far = {round(alpha * f) for f in rungs}
    far |= {d for d in (round(alpha * f) for f in later_rungs) if d >= later_from}
    return sorted(near | {d for d in far if window < d <= length - 1})


def kept_rungs(
    lo: Tensor, window: int, length: int, later: Tensor | None = None, later_from: int = 0
) -> Tensor:
    """Which learned rungs are used (bool per rung) from lo = floor(alpha * f), non-decreasing:
    the paper's rule, for every path. Dropped: lo <= W or an earlier rung's lo, lo > length - 1,
    and a ``later`` rung with lo < ``later_from``."""
    keep = (lo > window) & (lo <= length - 1)
    repeat = torch.zeros_like(keep)
    repeat[1:] = lo[1:] == lo[:-1]
    keep = keep & ~repeat
    if later is not None:
        keep = keep & (~later | (lo >= later_from))
    return keep


def interpolated_rungs(
    alpha: float, rungs: Sequence[int], window: int, length: int
) -> list[tuple[int, float]]:
    """(lo, frac) of each kept rung at a fixed ``alpha``: lo = floor(alpha * f), frac the rest."""
    targets = [alpha * f for f in rungs]
    lows = [math.floor(t) for t in targets]
    keep = kept_rungs(torch.tensor(lows, dtype=torch.long), window, length).tolist()
    return [(lo, t - lo) for lo, t, k in zip(lows, targets, keep, strict=True) if k]


def union_distances(per_layer: Sequence[Sequence[int]]) -> list[int]:
    """Sorted union of several layers' distance sets."""
    return sorted(set().union(*map(set, per_layer))) if per_layer else []


def composed_reach(per_layer: Sequence[Sequence[int]], length: int) -> np.ndarray:
    """(length,) booleans: the distances d_1 + ... + d_L a stack reaches, one per layer (0 is
    in every set); O(length) per run of consecutive distances."""
    if length < 1:
        raise ConfigError(f"length={length}: expected >= 1")
    reach = np.zeros(length, dtype=bool)
    reach[0] = True
    for layer in per_layer:
        values = np.unique(np.asarray([d for d in layer if 0 <= d < length], dtype=np.int64))
        if not values.size:
            return np.zeros(length, dtype=bool)
        breaks = np.flatnonzero(np.diff(values) != 1) + 1
        starts, ends = values[np.r_[0, breaks]], values[np.r_[breaks - 1, values.size - 1]]
        counts = np.concatenate([[0], np.cumsum(reach, dtype=np.int64)])  # sum reach[:t]
        position = np.arange(length)
        after = np.zeros(length, dtype=bool)
        for low, high in zip(starts.tolist(), ends.tolist(), strict=True):
            # after[t] |= any(reach[t - high .. t - low])
            top = position - low + 1
            bottom = np.clip(position - high, 0, None)
            after |= (top > 0) & (counts[np.clip(top, 0, length)] > counts[bottom])
        reach = after
    return reach
