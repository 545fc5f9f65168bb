"""Pure functions for Fibonacci-offset attention: rung bases, alpha schedules, distance sets,
and the learned layer's rung rule.

Everything here is tested against hand-written values; the attention modules turn the results
into tensors once per (layer, length). Every rule is prefix-consistent: the keys a position
attends to never depend on how long the sequence is (decoding relies on it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from lit_sparse.errors import ConfigError

RUNG_BASES = ("fibonacci", "pow2")


MAX_DISTANCE = 2**53
"""The longest rung distance alpha * f computed: an exact integer in float64 and an int64, and
finite in float32 (the learned alpha's dtype); no sequence reaches it."""
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
    """One ConfigError line naming the first of ``alphas`` (name=value) whose largest rung
    distance, alpha x max(rungs), passes :data:`MAX_DISTANCE` (no rungs: alpha itself)."""
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
    """A layer's rungs: the first ``n_rungs`` Fibonacci numbers, or the powers of two of the
    length the model is built at (every power <= training_length - 1, as the paper)."""
    if base == "fibonacci":
        return fibonacci_rungs(n_rungs)
    if base == "pow2":
        return pow2_rungs(training_length)
    raise ConfigError(f"rung base must be one of {RUNG_BASES}, got {base!r}")


def new_rungs(base: str, training_length: int, length: int, alpha: float) -> list[int]:
    """Rungs that exist only beyond the training length: for pow2, the powers of two past
    the training base whose distance at ``alpha`` can still fit in ``length`` (a learned
    layer passes its smallest alpha, alpha_min; the Fibonacci base is fixed: none). Their
    distances count only from the training length on (see :func:`layer_distances`), so a
    position's keys never depend on how long the sequence is."""
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
    """Attended distances of one layer with a static alpha, sorted.

    {0..W} union {round(alpha * f) : W < round(alpha * f) <= length - 1}; Python's round
    (half to even); a set, so a distance reached twice counts once. Each of ``later_rungs``
    (rungs that exist only beyond the training length, :func:`new_rungs`) adds its distance
    only when that is >= ``later_from`` (the training length): a distance shorter than the
    training length that training never used is never added.
    """
    near = set(range(min(window, length - 1) + 1))
    far = {round(alpha * f) for f in rungs}
    far |= {d for d in (round(alpha * f) for f in later_rungs) if d >= later_from}
    return sorted(near | {d for d in far if window < d <= length - 1})


def kept_rungs(
    lo: Tensor, window: int, length: int, later: Tensor | None = None, later_from: int = 0
) -> Tensor:
    """Which interpolated rungs of a learned layer are used (bool, one per rung), from each
    rung's lower tap lo = floor(alpha * f), in rung order (non-decreasing): the paper's rule.

    A rung is dropped when its lo is already used: the window's distances 0..W count as
    used, and so does an earlier rung's lo. It is also dropped when lo > length - 1, and a
    rung that exists only beyond the training length (``later``) when lo < ``later_from``.
    Every path (the model, the kernels' references, decoding) uses this one rule.
    """
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
    """(lo, frac) of each rung a learned layer keeps at a fixed ``alpha``, in rung order:
    target t = alpha * f, lo = floor(t), frac = t - lo, kept by :func:`kept_rungs`."""
    targets = [alpha * f for f in rungs]
    lows = [math.floor(t) for t in targets]
    keep = kept_rungs(torch.tensor(lows, dtype=torch.long), window, length).tolist()
    return [(lo, t - lo) for lo, t, k in zip(lows, targets, keep, strict=True) if k]


def union_distances(per_layer: Sequence[Sequence[int]]) -> list[int]:
    """Sorted union of several layers' distance sets."""
    return sorted(set().union(*map(set, per_layer))) if per_layer else []


def composed_reach(per_layer: Sequence[Sequence[int]], length: int) -> np.ndarray:
    """(length,) booleans: which distances 0..length - 1 a stack of layers reaches by
    composing one distance of each layer, in order (a sum d_1 + ... + d_L; distance 0 is in
    every pattern's set, so fewer hops are included). Information from position t - d can
    reach position t through the stack only if ``reach[d]``.

    Each layer's set is taken as runs of consecutive distances (the window is one run), so a
    layer costs O(length) per run: dense layers at long lengths are cheap too.
    """
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
