"""Sliding-window causal attention (the Mistral-style local baseline)."""

from __future__ import annotations

import torch
from torch import Tensor

from lit_sparse.attention.base import AttentionPlugin, SlotPattern
from lit_sparse.attention.dense import announce_backend, flash_attention, flash_usable
from lit_sparse.attention.options import at_least
from lit_sparse.attention.registry import register_attention
from lit_sparse.kernels import KeySlots, exact_slots


class SlidingWindowPattern(SlotPattern):
    def __init__(self, training_length: int, window: int):
        super().__init__(training_length)
        self.window = window

    def distances(self, length: int) -> list[int]:
        return list(range(min(self.window, length - 1) + 1))

    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        return exact_slots(self.distances(length), device)

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        if flash_usable(q):
            announce_backend("flash-attn (window)")
            return flash_attention(q, k, v, window=self.window)
        return super().forward(q, k, v)


@register_attention("sliding_window")
class SlidingWindowAttention(AttentionPlugin):
    """Each query attends to itself and the ``window`` keys before it."""

    def __init__(self, window: int = 8):
        """
        Args:
            window: largest attended distance W (keys i-W..i); 0 attends to itself only.
        """
        at_least(0, window=window)
        self.window = window

    def build(self, layer: int, n_layers: int, training_length: int) -> SlidingWindowPattern:
        return SlidingWindowPattern(training_length, self.window)

    @classmethod
    def bench_cases(cls, keys: int, window: int) -> dict[str, AttentionPlugin]:
        """A window of ``keys`` keys (distances 0..keys - 1)."""
        return {"sliding_window": cls(window=keys - 1)}
