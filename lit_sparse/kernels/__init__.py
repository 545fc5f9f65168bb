"""Attention over per-query key slots, and narrow-weight linear products (``mixed_linear``).

``sparse_attention`` runs on the CPU the compiled loops, else sparse BLAS (``csr``); on CUDA the
Triton kernel once ``self_check`` passed on the (device, dtype); else the chunked ``gather``."""

from __future__ import annotations

import functools

from torch import Tensor

from lit_sparse.kernels import compiled, self_check
from lit_sparse.kernels.csr import csr_attention
from lit_sparse.kernels.gather import gather_attention
from lit_sparse.kernels.slots import KeySlots, exact_slots

__all__ = ["KeySlots", "csr_attention", "exact_slots", "gather_attention", "sparse_attention"]


@functools.cache
def _triton():
    """The Triton kernel module (imported lazily), or None without triton."""
    try:
        from lit_sparse.kernels import triton_kernel
    except ImportError:
        return None
    return triton_kernel


def sparse_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Causal attention of q (B, H, T, D) over ``slots`` of k, v (B, KV, T, D); GQA as a view."""
    if q.device.type == "cpu":
        return _cpu_attention(q, k, v, slots)
    if q.is_cuda:
        return _triton_or_gather(q, k, v, slots)
    return gather_attention(q, k, v, slots)


def _cpu_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    if compiled.available():
        return compiled.compiled_attention(q, k, v, slots)
    return csr_attention(q, k, v, slots)


def _triton_or_gather(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """The Triton kernel where it handles the slots and passed its self-check; else gather."""
    kernel = _triton()
    if kernel is not None and kernel.supported(q, k, slots) and self_check.trusted(kernel, q, k):
        return kernel.triton_attention(q, k, v, slots)
    return gather_attention(q, k, v, slots)
