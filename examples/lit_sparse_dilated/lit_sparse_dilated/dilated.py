"""Dilated attention: distances 0..W, then every ``dilation``-th distance after the window.

Registered by the entry point in pyproject.toml as ``dilated``. The pattern is a set of
relative distances, so its slots give it every lit_sparse kernel: the CSR kernel on the
CPU, Triton on CUDA, and the dense reference the conformance kit compares them with.
"""

from __future__ import annotations

import torch

from lit_sparse.attention import AttentionPlugin, SlotPattern
from lit_sparse.attention.options import at_least
from lit_sparse.kernels import KeySlots, exact_slots


class DilatedPattern(SlotPattern):
    def __init__(self, training_length: int, window: int, dilation: int, n_dilated: int):
        super().__init__(training_length)
        self.window, self.dilation, self.n_dilated = window, dilation, n_dilated

    def distances(self, length: int) -> list[int]:
        window = range(self.window + 1)
        dilated = (self.window + self.dilation * j for j in range(1, self.n_dilated + 1))
        return [d for d in (*window, *dilated) if d < length]  # shorter: the same, cut

    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        return exact_slots(self.distances(length), device)


class DilatedAttention(AttentionPlugin):
    """A window of W, then ``n_dilated`` distances ``dilation`` apart."""

    def __init__(self, window: int = 8, dilation: int = 16, n_dilated: int = 16):
        """
        Args:
            window: every distance 0..W is attended.
            dilation: the step between the distances after the window.
            n_dilated: how many distances W + dilation, W + 2 dilation, ... are attended.
        """
        at_least(0, window=window, n_dilated=n_dilated)
        at_least(1, dilation=dilation)
        self.window, self.dilation, self.n_dilated = window, dilation, n_dilated

    def build(self, layer: int, n_layers: int, training_length: int) -> DilatedPattern:
        return DilatedPattern(training_length, self.window, self.dilation, self.n_dilated)

    @classmethod
    def bench_cases(cls, keys: int, window: int) -> dict[str, AttentionPlugin]:
        """The window W and the rest of ``keys`` as dilated distances 64 apart."""
        return {"dilated": cls(window=window, dilation=64, n_dilated=max(0, keys - window - 1))}
