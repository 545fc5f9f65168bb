"""Fibonacci-offset sparse attention: a window plus rungs scaled by a per-layer alpha."""

from __future__ import annotations

import functools
import logging
import math
from typing import Literal

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from . import offsets
from .base import AttentionPlugin, SlotPattern
from .decoding import DecodeShape, LayerDecoder
from .kernels import KeySlots, exact_slots
from .length_cache import LengthCache
from .registry import register_attention

log = logging.getLogger(__name__)

NewOffsets = Literal["use", "drop"]
RungRead = Literal["interpolate", "gaussian"]


class FibonacciPattern(SlotPattern):
    """Distances {0..W} and round(alpha * f) for every rung f, alpha fixed per layer."""

    def __init__(
        self,
        training_length: int,
        alpha: float,
        window: int,
        rungs: str,
        n_rungs: int,
        new_offsets: NewOffsets,
    ):
        super().__init__(training_length)
        self.window, self.rungs, self.n_rungs, self.new_offsets = (
            window,
            rungs,
            n_rungs,
            new_offsets,
        )
        self.initial_alpha = float(alpha)

    @property
    def alpha(self) -> Tensor:
        return torch.tensor(self.initial_alpha)

    def alpha_value(self) -> float:
        """alpha as a Python float (exact for static schedules: rounding depends on it)."""
        return self.initial_alpha

    def effective_length(self, length: int) -> int:
        """The length whose rungs and reach apply at running ``length``.

        With new_offsets "drop", a longer sequence keeps the training length's pattern.
        """
        return min(length, self.training_length) if self.new_offsets == "drop" else length

    def rung_values(
        self, length: int, alpha_low: float | None = None
    ) -> tuple[list[int], list[int]]:
        """The rungs at running ``length``: the base (from the training length) and those
        that exist only beyond it (pow2 with new_offsets "use") and fit in ``length`` at
        ``alpha_low``: the layer's alpha, or the smallest one a learned layer can have (so
        the list holds every rung its current alpha can reach at that length)."""
        base = offsets.rung_base(self.rungs, self.training_length, self.n_rungs)
        later = offsets.new_rungs(
            self.rungs,
            self.training_length,
            self.effective_length(length),
            self.alpha_value() if alpha_low is None else alpha_low,
        )
        return base, later

    def distances(self, length: int) -> list[int]:
        base, later = self.rung_values(length)
        return offsets.layer_distances(
            self.alpha_value(),
            base,
            self.window,
            self.effective_length(length),
            later_rungs=later,
            later_from=self.training_length,
        )

    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        return exact_slots(self.distances(length), device)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha_value():.4f}, window={self.window}, rungs={self.rungs}"


class LearnedFibonacciPattern(FibonacciPattern):
    """alpha = alpha_min + (alpha_max - alpha_min) * sigmoid(theta), learned.

    Window distances are exact; each rung reads a virtual key and value interpolated
    between distances floor(alpha * f) and floor(alpha * f) + 1, so the gradient reaches
    theta through the interpolation weight even where alpha * f is an integer. At the
    rung's first row (query i = floor(alpha * f)) the upper tap's row i - lo - 1 does not
    exist and the nearest row, 0, is read instead, as the paper's code does: that row then
    adds no gradient to theta. Which rungs are used is :func:`offsets.kept_rungs` (the
    paper's rule), evaluated on the device: no host sync in forward.
    """

    def __init__(
        self,
        training_length: int,
        window: int,
        rungs: str,
        n_rungs: int,
        new_offsets: NewOffsets,
        alpha_min: float,
        alpha_max: float,
        alpha_init: float,
    ):
        super().__init__(training_length, alpha_init, window, rungs, n_rungs, new_offsets)
        self.alpha_min, self.alpha_max = alpha_min, alpha_max
        share = (alpha_init - alpha_min) / (alpha_max - alpha_min)
        self.theta = nn.Parameter(torch.tensor(math.log(share / (1 - share))))
        self._rung_cache: LengthCache[tuple[Tensor, Tensor]] = LengthCache()

    @property
    def alpha(self) -> Tensor:
        return self.alpha_min + (self.alpha_max - self.alpha_min) * torch.sigmoid(self.theta)

    def alpha_value(self) -> float:
        return float(self.alpha.detach())

    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        """The exact window and the padding reach; cached per (length, device)."""
        base, later = self.rung_values(length, self.alpha_min)
        reach = math.floor(self.alpha_max * max(base + later, default=0)) + 2
        return KeySlots(
            distances=torch.arange(min(self.window, length - 1) + 1, device=device),
            reach=min(reach, length + 1),
        )

    def slots(self, length: int, device: torch.device) -> KeySlots:
        window = super().slots(length, device)

        def rung_tensors() -> tuple[Tensor, Tensor]:
            base, later = self.rung_values(length, self.alpha_min)
            rungs = torch.tensor(base + later, device=device)
            is_later = torch.arange(len(base) + len(later), device=device) >= len(base)
            return rungs, is_later

        rungs, is_later = self._rung_cache.get((length, torch.device(device)), rung_tensors)
        target = self.alpha * rungs  # (R,) t = alpha * f, carries theta's gradient
        lo = torch.floor(target)
        keep = offsets.kept_rungs(
            lo.long(), self.window, self.effective_length(length), is_later, self.training_length
        )
        return KeySlots(
            distances=window.distances,
            reach=window.reach,
            rung_lo=lo.long().clamp(max=window.reach - 1),
            rung_frac=target - lo,
            rung_valid=keep,
        )


def rung_width_at(progress: float, start: float, end: float, anneal: float) -> float:
    """Width (sigma, in positions) of the Gaussian rung read at training ``progress`` in [0, 1]:
    linear from ``start`` to ``end`` over the first ``anneal`` of training, ``end`` after."""
    share = min(1.0, max(0.0, progress) / anneal)
    return start + (end - start) * share


class GaussianFibonacciPattern(LearnedFibonacciPattern):
    """Learned alpha whose rungs read a Gaussian band of rows ("blur"; the paper's probe).

    Rung r, with target t = alpha * f, reads for query i a virtual key and value
    sum_j m_r(i, j) * row[j] with m_r(i, j) proportional to exp(-(i - j - t)^2 / (2 sigma^2))
    over the rows j <= i that exist, normalised per query (so a band that reaches past the
    first position is renormalised over the rows there are). Window distances 0..W are
    exact, and a rung is used under the learned rules (skipped when round(t) <= W, when
    floor(t) > T - 1 or when an earlier rung has the same floor(t); valid for i >= floor(t)).
    Its score is q . k_r / sqrt(D) and it competes with the window keys in one softmax.
    theta's gradient flows through the band's centre t.

    The width sigma is the buffer ``rung_width`` (saved in checkpoints); the trainer anneals it
    with :meth:`set_progress` (:func:`rung_width_at`). This path is dense, O(T^2) in time and
    memory: the score matrix and one (T, T) band per rung. Meant for short sequences such as
    the retrieval probe (T = 512); ``forward`` and ``reference`` are the same computation.
    """

    def __init__(
        self,
        training_length: int,
        window: int,
        rungs: str,
        n_rungs: int,
        new_offsets: NewOffsets,
        alpha_min: float,
        alpha_max: float,
        alpha_init: float,
        width_start: float,
        width_end: float,
        width_anneal: float,
    ):
        super().__init__(
            training_length, window, rungs, n_rungs, new_offsets, alpha_min, alpha_max, alpha_init
        )
        self.width_start, self.width_end, self.width_anneal = width_start, width_end, width_anneal
        self.register_buffer("rung_width", torch.tensor(float(width_start)))

    def set_progress(self, progress: float) -> None:
        """Set the width for training ``progress`` (optimizer step / total steps)."""
        width = rung_width_at(progress, self.width_start, self.width_end, self.width_anneal)
        self.rung_width.fill_(width)

    def bands(self, slots: KeySlots, length: int, device: torch.device) -> tuple[Tensor, Tensor]:
        """The per-query normalised bands (R, T, T) of ``slots`` (this layer's at ``length``)
        and where each rung is valid (T, R)."""
        centre = slots.rung_lo.to(slots.rung_frac.dtype) + slots.rung_frac  # (R,) = alpha * f
        i = torch.arange(length, device=device)
        rel = (i[:, None] - i[None, :]).to(centre.dtype)  # (T, T) distance i - j
        width = self.rung_width.to(centre.dtype)
        logw = -((rel[None] - centre[:, None, None]) ** 2) / (2 * width**2)  # (R, T, T)
        logw = logw.masked_fill(rel[None] < 0, float("-inf"))  # future rows do not exist
        band = torch.softmax(logw, dim=-1)  # normalised over the rows j <= i of each query
        valid = slots.rung_valid[None, :] & (i[:, None] >= slots.rung_lo[None, :])  # (T, R)
        return band, valid

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        batch, heads, length, dim = q.shape
        kv_heads = k.shape[1]
        qg = q.view(batch, kv_heads, heads // kv_heads, length, dim)  # (B, KV, G, T, D)
        scores = torch.einsum("bkgid,bkjd->bkgij", qg, k) * dim**-0.5  # (B, KV, G, T, T)
        slots = self.slots(length, q.device)
        i = torch.arange(length, device=q.device)
        rel = i[:, None] - i[None, :]
        near = torch.isin(rel, slots.distances) & (rel >= 0)  # (T, T) exact window
        window_logits = scores.masked_fill(~near, float("-inf"))
        band, valid = self.bands(slots, length, q.device)
        band = band.to(q.dtype)
        rung_logits = torch.einsum("bkgij,rij->bkgir", scores, band)  # (B, KV, G, T, R)
        rung_logits = rung_logits.masked_fill(~valid, float("-inf"))
        probs = torch.softmax(torch.cat([window_logits, rung_logits], dim=-1), dim=-1)
        mix = probs[..., :length] + torch.einsum("bkgir,rij->bkgij", probs[..., length:], band)
        out = torch.einsum("bkgij,bkjd->bkgid", mix, v)  # (B, KV, G, T, D)
        return out.reshape(batch, heads, length, dim)

    def reference(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return self.forward(q, k, v)

    def decoder(self, shape: DecodeShape) -> LayerDecoder:
        """Each token's row of :meth:`forward` over the whole past (a band reaches every
        earlier row): O(T) memory and O(T * rungs) time per token."""
        return GaussianDecoder(self, shape)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rung_read=gaussian, width={float(self.rung_width):.3g}"


class GaussianDecoder(LayerDecoder):
    """One query row of :meth:`GaussianFibonacciPattern.forward`: window scores, each rung's
    band over the rows j <= t, one softmax; keys and values of the whole past."""

    def __init__(self, pattern: GaussianFibonacciPattern, shape: DecodeShape):
        super().__init__(pattern, shape, shape.max_length)
        self.slots = pattern.slots(shape.max_length, shape.device)

    def step(self, q: Tensor, k: Tensor, v: Tensor, position: int) -> Tensor:
        self.cache.write(position, k, v)
        shape, slots, end = self.shape, self.slots, position + 1
        keys, values = self.cache.k[:, :, :end], self.cache.v[:, :, :end]  # (B, KV, t + 1, D)
        qg = q.view(shape.batch, shape.kv_heads, shape.groups, shape.head_dim)  # (B, KV, G, D)
        scores = (qg @ keys.transpose(-1, -2)) * shape.head_dim**-0.5  # (B, KV, G, t + 1)
        rel = position - torch.arange(end, device=q.device)  # (t + 1,) distance of each row
        near = torch.isin(rel, slots.distances)
        centre = slots.rung_lo.to(slots.rung_frac.dtype) + slots.rung_frac.detach()  # (R,)
        width = self.pattern.rung_width.to(centre.dtype)
        logw = -((rel[None].to(centre.dtype) - centre[:, None]) ** 2) / (2 * width**2)
        band = torch.softmax(logw, dim=-1).to(q.dtype)  # (R, t + 1) over the rows j <= t
        valid = slots.rung_valid & (position >= slots.rung_lo)  # (R,)
        rung_logits = (scores @ band.T).masked_fill(~valid, float("-inf"))  # (B, KV, G, R)
        logits = torch.cat([scores.masked_fill(~near, float("-inf")), rung_logits], dim=-1)
        probs = torch.softmax(logits, dim=-1)
        mix = probs[..., :end] + probs[..., end:] @ band  # (B, KV, G, t + 1)
        out = mix @ values  # (B, KV, G, D)
        return out.view(shape.batch, shape.heads, 1, shape.head_dim)


@functools.cache
def _warn_coprime_is_linear(n_layers: int) -> None:
    """Once per depth and process: at this depth the coprime schedule is the linear one."""
    log.warning(
        "schedule 'coprime' at %d layers is the 'linear' schedule: the largest stride <= L/2 "
        "coprime with L is 1 (depths 1, 2, 3, 4 and 6); use a depth such as 5, 7 or 8 for a "
        "coprime stagger that differs from linear",
        n_layers,
    )


@register_attention("fibonacci")
class FibonacciAttention(AttentionPlugin):
    """Window W plus rung distances round(alpha_l * f), with a per-layer alpha schedule."""

    def __init__(
        self,
        window: int = 8,
        rungs: Literal["fibonacci", "pow2"] = "fibonacci",
        n_rungs: int = 15,
        schedule: Literal["fixed", "learned", "linear", "coprime", "custom"] = "fixed",
        alpha_min: float = 0.5,
        alpha_max: float = 1.5,
        alphas: list[float] | None = None,
        new_offsets: NewOffsets = "use",
        alpha_init: list[float] | None = None,
        rung_read: RungRead = "interpolate",
        rung_width_start: float = 40.0,
        rung_width_end: float = 0.5,
        rung_width_anneal: float = 0.8,
    ):
        """
        Args:
            window: every distance 0..W is attended (W >= 0).
            rungs: "fibonacci" (1, 2, 3, 5, ... , the first n_rungs) or "pow2" (every power
                of two <= T - 1, recomputed at the running length T).
            n_rungs: number of Fibonacci rungs (K; 15 reaches 987).
            schedule: alpha per layer: "fixed" (1), "learned" (alpha_min + (alpha_max -
                alpha_min) * sigmoid(theta), theta = 0 at start), "linear" (a ramp from
                alpha_min to alpha_max over depth), "coprime" (the ramp's values, layer l
                taking slot (S * l) mod L, S the largest stride <= L/2 coprime with L) or
                "custom" (the list in ``alphas``).
            alpha_min: low end of the alpha range (> 0).
            alpha_max: high end of the alpha range (> alpha_min).
            alphas: one alpha per layer for schedule "custom".
            new_offsets: distances that appear only beyond the training length: "use" them
                (the paper) or "drop" them.
            alpha_init: schedule "learned" only: each layer's starting alpha (one per layer,
                each strictly between alpha_min and alpha_max); None starts every layer at
                the middle of the range.
            rung_read: schedule "learned" only: how a rung reads rows at the non-integer
                distance alpha * f: "interpolate" (two rows, floor and floor + 1; linear in T)
                or "gaussian" (a normalised Gaussian band of rows centred at alpha * f, the
                paper's probe "blur"; dense, O(T^2): short sequences only).
            rung_width_start: rung_read "gaussian": the band's width (sigma, positions) at
                the start of training.
            rung_width_end: rung_read "gaussian": the width after annealing.
            rung_width_anneal: rung_read "gaussian": the share of training steps over which
                the width goes linearly from start to end (the trainer sets it each step).
        """
        if window < 0:
            raise ConfigError(f"window must be >= 0, got {window}")
        if n_rungs < 0:
            raise ConfigError(f"n_rungs must be >= 0, got {n_rungs}")
        if rungs not in offsets.RUNG_BASES:
            raise ConfigError(f"rungs must be one of {offsets.RUNG_BASES}, got {rungs!r}")
        if schedule not in offsets.SCHEDULES:
            raise ConfigError(f"schedule must be one of {offsets.SCHEDULES}, got {schedule!r}")
        if not (0 < alpha_min < alpha_max < math.inf):
            raise ConfigError(
                f"alpha_min, alpha_max must satisfy 0 < alpha_min < alpha_max < inf, "
                f"got alpha_min={alpha_min}, alpha_max={alpha_max}"
            )
        if new_offsets not in ("use", "drop"):
            raise ConfigError(f"new_offsets must be 'use' or 'drop', got {new_offsets!r}")
        if schedule == "custom":
            if not alphas:
                raise ConfigError("alphas: schedule 'custom' needs a list of one alpha per layer")
            bad = [a for a in alphas if not (0 < a < math.inf)]
            if bad:
                raise ConfigError(f"alphas must all be in (0, inf), got {bad}")
        elif alphas is not None:
            raise ConfigError(f"alphas is only read by schedule 'custom', not {schedule!r}")
        if alpha_init is not None:
            if schedule != "learned":
                raise ConfigError(
                    f"alpha_init is only read by schedule 'learned', not {schedule!r}"
                )
            bad = [a for a in alpha_init if not (alpha_min < a < alpha_max)]
            if not alpha_init or bad:
                raise ConfigError(
                    f"alpha_init={list(alpha_init)}: expected one alpha per layer, each strictly "
                    f"between alpha_min={alpha_min} and alpha_max={alpha_max}"
                    + (f" (outside: {bad})" if bad else "")
                )
        if rung_read not in ("interpolate", "gaussian"):
            raise ConfigError(f"rung_read={rung_read!r}: expected 'interpolate' or 'gaussian'")
        if rung_read == "gaussian" and schedule != "learned":
            raise ConfigError(
                f"rung_read='gaussian' needs schedule 'learned' (static schedules read whole "
                f"rows), got schedule={schedule!r}"
            )
        for name, value in (
            ("rung_width_start", rung_width_start),
            ("rung_width_end", rung_width_end),
        ):
            if not (0 < value < math.inf):
                raise ConfigError(f"{name}={value!r}: expected a width > 0 (positions)")
        if not (0 < rung_width_anneal <= 1):
            raise ConfigError(
                f"rung_width_anneal={rung_width_anneal!r}: expected a share of training in (0, 1]"
            )
        self.window, self.rungs, self.n_rungs, self.schedule = window, rungs, n_rungs, schedule
        self.alpha_min, self.alpha_max, self.new_offsets = alpha_min, alpha_max, new_offsets
        self.alphas = None if alphas is None else [float(a) for a in alphas]
        self.alpha_init = None if alpha_init is None else [float(a) for a in alpha_init]
        self.rung_read = rung_read
        self.rung_width_start, self.rung_width_end = float(rung_width_start), float(rung_width_end)
        self.rung_width_anneal = float(rung_width_anneal)

    def check(self, n_layers: int) -> None:
        if self.schedule == "custom" and len(self.alphas) != n_layers:
            raise ConfigError(
                f"alphas: schedule 'custom' needs one alpha per layer ({n_layers}), "
                f"got {len(self.alphas)}"
            )
        if self.alpha_init is not None and len(self.alpha_init) != n_layers:
            raise ConfigError(
                f"alpha_init: needs one alpha per layer ({n_layers}), got {len(self.alpha_init)}"
            )

    def layer_alphas(self, n_layers: int) -> list[float]:
        """Every layer's alpha at initialisation."""
        self.check(n_layers)
        if self.schedule == "coprime" and offsets.coprime_stride(n_layers) == 1:
            _warn_coprime_is_linear(n_layers)
        if self.alpha_init is not None:
            return list(self.alpha_init)
        return offsets.schedule_alphas(
            self.schedule, n_layers, self.alpha_min, self.alpha_max, self.alphas
        )

    def build(self, layer: int, n_layers: int, training_length: int) -> FibonacciPattern:
        alpha = self.layer_alphas(n_layers)[layer]
        common = (self.window, self.rungs, self.n_rungs, self.new_offsets)
        if self.schedule == "learned" and self.rung_read == "gaussian":
            widths = (self.rung_width_start, self.rung_width_end, self.rung_width_anneal)
            return GaussianFibonacciPattern(
                training_length, *common, self.alpha_min, self.alpha_max, alpha, *widths
            )
        if self.schedule == "learned":
            return LearnedFibonacciPattern(
                training_length, *common, self.alpha_min, self.alpha_max, alpha
            )
        return FibonacciPattern(training_length, alpha, *common)
