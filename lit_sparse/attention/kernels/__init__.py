"""Attention kernels: one op, attention over per-query key slots, on every device.

``sparse_attention`` picks the implementation: the Triton kernel for CUDA tensors when
Triton is installed, else the chunked-gather torch path. ``reference`` holds the dense
O(T^2) paths that tests compare against.
"""

from __future__ import annotations

from torch import Tensor

from .gather import gather_attention
from .slots import KeySlots, exact_slots
from .tiled import tiled_attention

__all__ = ["KeySlots", "exact_slots", "gather_attention", "sparse_attention", "tiled_attention"]


def sparse_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Causal attention of q (B, H, T, D) over ``slots`` of k, v (B, KV, T, D); GQA as a view."""
    if q.device.type == "cpu":
        return tiled_attention(q, k, v, slots)
    return gather_attention(q, k, v, slots)
