"""Attention kernels: one op, attention over per-query key slots, on every device.

``sparse_attention`` picks the implementation: for CPU tensors the compiled kernel
(``compiled``: C++ loops built on first use, dynamic work sharing between threads) or, where it
cannot be built, the sparse-BLAS path (``csr``); the Triton kernel (``triton_kernel``) for
CUDA tensors when Triton is installed and the slots are relative (exact distances and
interpolated rungs) and it passed its first-use self-check on the tensors' (device, dtype)
(``self_check``: else one warning line, and the gather path from then on); else the
chunked-gather torch path (``gather``, any device: BigBird's absolute keys on CUDA).
``reference`` holds the dense O(T^2) paths that tests compare against.
"""

from __future__ import annotations

import functools

from torch import Tensor

from lit_sparse.attention.kernels import compiled, self_check
from lit_sparse.attention.kernels.csr import csr_attention
from lit_sparse.attention.kernels.gather import gather_attention
from lit_sparse.attention.kernels.slots import KeySlots, exact_slots

__all__ = ["KeySlots", "csr_attention", "exact_slots", "gather_attention", "sparse_attention"]


@functools.cache
def _triton():
    """The Triton kernel module, or None when triton is not installed (imported lazily)."""
    try:
        from lit_sparse.attention.kernels import triton_kernel
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
    """The Triton kernel where it handles the slots and has passed its self-check on q's
    (device, dtype); else the gather path."""
    kernel = _triton()
    if kernel is not None and kernel.supported(q, k, slots) and self_check.trusted(kernel, q, k):
        return kernel.triton_attention(q, k, v, slots)
    return gather_attention(q, k, v, slots)
