"""Fibonacci-offset sparse attention: a window plus rungs scaled by a per-layer alpha."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from . import offsets
from .base import AttentionPlugin, SlotPattern
from .kernels import KeySlots, exact_slots
from .registry import register_attention

NewOffsets = Literal["use", "drop"]


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

    def rung_values(self, length: int) -> list[int]:
        return offsets.rung_base(self.rungs, self.effective_length(length), self.n_rungs)

    def distances(self, length: int) -> list[int]:
        return offsets.layer_distances(
            self.alpha_value(), self.rung_values(length), self.window, self.effective_length(length)
        )

    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        return exact_slots(self.distances(length), device)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha_value():.4f}, window={self.window}, rungs={self.rungs}"


class LearnedFibonacciPattern(FibonacciPattern):
    """alpha = alpha_min + (alpha_max - alpha_min) * sigmoid(theta), learned.

    Window distances are exact; each rung reads a virtual key and value interpolated
    between distances floor(alpha * f) and floor(alpha * f) + 1, so the gradient reaches
    theta through the interpolation weight even where alpha * f is an integer. The rung
    rules (skip when round(t) <= W, when lo > T - 1, or when an earlier kept rung has the
    same lo) are evaluated on the device: no host sync in forward.
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
        self._rung_cache: dict[tuple[int, torch.device], Tensor] = {}

    @property
    def alpha(self) -> Tensor:
        return self.alpha_min + (self.alpha_max - self.alpha_min) * torch.sigmoid(self.theta)

    def alpha_value(self) -> float:
        return float(self.alpha.detach())

    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        """The exact window and the padding reach; cached per (length, device)."""
        reach = math.floor(self.alpha_max * max(self.rung_values(length), default=0)) + 2
        return KeySlots(
            distances=torch.arange(min(self.window, length - 1) + 1, device=device),
            reach=min(reach, length + 1),
        )

    def slots(self, length: int, device: torch.device) -> KeySlots:
        window = super().slots(length, device)
        key = (length, torch.device(device))
        if key not in self._rung_cache:
            with torch.inference_mode(False):
                self._rung_cache[key] = torch.tensor(self.rung_values(length), device=device)
        target = self.alpha * self._rung_cache[key]  # (R,) t = alpha * f, carries theta's gradient
        lo = torch.floor(target)
        usable = (torch.round(target) > self.window) & (lo < self.effective_length(length))
        # t increases with f, so a repeated lo sits next to its first use
        repeat = torch.zeros_like(usable)
        repeat[1:] = usable[:-1] & (lo[1:] == lo[:-1])
        return KeySlots(
            distances=window.distances,
            reach=window.reach,
            rung_lo=lo.long().clamp(max=window.reach - 1),
            rung_frac=target - lo,
            rung_valid=usable & ~repeat,
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
        self.window, self.rungs, self.n_rungs, self.schedule = window, rungs, n_rungs, schedule
        self.alpha_min, self.alpha_max, self.new_offsets = alpha_min, alpha_max, new_offsets
        self.alphas = None if alphas is None else [float(a) for a in alphas]

    def check(self, n_layers: int) -> None:
        if self.schedule == "custom" and len(self.alphas) != n_layers:
            raise ConfigError(
                f"alphas: schedule 'custom' needs one alpha per layer ({n_layers}), "
                f"got {len(self.alphas)}"
            )

    def layer_alphas(self, n_layers: int) -> list[float]:
        """Every layer's alpha at initialisation."""
        self.check(n_layers)
        return offsets.schedule_alphas(
            self.schedule, n_layers, self.alpha_min, self.alpha_max, self.alphas
        )

    def build(self, layer: int, n_layers: int, training_length: int) -> FibonacciPattern:
        alpha = self.layer_alphas(n_layers)[layer]
        common = (self.window, self.rungs, self.n_rungs, self.new_offsets)
        if self.schedule == "learned":
            return LearnedFibonacciPattern(
                training_length, *common, self.alpha_min, self.alpha_max, alpha
            )
        return FibonacciPattern(training_length, alpha, *common)
