"""The patterns of one Fibonacci layer: static rungs (integer distances) and learned ones
(interpolated between two rows, so the gradient reaches alpha)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from lit_sparse.attention import offsets
from lit_sparse.attention.base import SlotPattern
from lit_sparse.attention.length_cache import LengthCache
from lit_sparse.kernels import KeySlots, exact_slots

NewOffsets = Literal["use", "drop"]


@dataclass(frozen=True)
class RungLayout:
    """A Fibonacci layer's distances besides alpha: window 0..W, ``n_rungs`` of the ``rungs``
    base at ``training_length`` (beyond it: ``new_offsets``)."""

    training_length: int
    window: int
    rungs: str
    n_rungs: int
    new_offsets: NewOffsets


class FibonacciPattern(SlotPattern):
    """Distances {0..W} and round(alpha * f) for every rung f, alpha fixed per layer."""

    def __init__(self, layout: RungLayout, alpha: float):
        super().__init__(layout.training_length)
        self.window, self.rungs, self.n_rungs = layout.window, layout.rungs, layout.n_rungs
        self.new_offsets = layout.new_offsets
        self.initial_alpha = float(alpha)

    @property
    def alpha(self) -> Tensor:
        return torch.tensor(self.initial_alpha)

    def alpha_value(self) -> float:
        """alpha as a Python float (exact for static schedules: rounding depends on it)."""
        return self.initial_alpha

    def effective_length(self, length: int) -> int:
        """The length whose rungs apply at ``length`` (capped at training with "drop")."""
        return min(length, self.training_length) if self.new_offsets == "drop" else length

    def rung_values(
        self, length: int, alpha_low: float | None = None
    ) -> tuple[list[int], list[int]]:
        """(base rungs, rungs only beyond the training length that fit in ``length`` at
        ``alpha_low``, default the layer's alpha)."""
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
    """alpha = alpha_min + (alpha_max - alpha_min) * sigmoid(theta), learned from ``alpha``: each
    rung reads a key and value interpolated between distances floor(alpha * f) and the next (at
    its first row the missing upper tap reads row 0, as the paper's code)."""

    def __init__(self, layout: RungLayout, alpha: float, alpha_min: float, alpha_max: float):
        super().__init__(layout, alpha)
        self.alpha_min, self.alpha_max = alpha_min, alpha_max
        self.theta = nn.Parameter(torch.tensor(self._theta_of(alpha)))
        self._rung_cache: LengthCache[tuple[Tensor, Tensor]] = LengthCache()

    def _theta_of(self, alpha: float) -> float:
        """theta giving ``alpha`` (a bound is taken just inside it)."""
        share = (alpha - self.alpha_min) / (self.alpha_max - self.alpha_min)
        share = min(max(share, 1e-12), 1 - 1e-12)
        return math.log(share / (1 - share))

    def set_alpha(self, alpha: float) -> None:
        """Set the learned alpha in place (e.g. to a run's recorded value)."""
        with torch.no_grad():
            self.theta.fill_(self._theta_of(alpha))

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
            rung_lo=lo.long().clamp(0, window.reach - 1),
            rung_frac=target - lo,
            rung_valid=keep,
        )
