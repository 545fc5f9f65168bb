"""Attention over per-query key slots, and narrow-weight linear products (``mixed_linear``).

``sparse_attention`` runs on the CPU the compiled loops, else sparse BLAS (``csr``); on CUDA the
Triton kernel once ``self_check`` passed on the (device, dtype); else the chunked ``gather``.

Also public: ``usable_cores`` (the cores this process may use: affinity and cgroup quota, the
thread pin) and ``flushed_denormals`` (a context with float subnormals flushed to zero)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from torch import Tensor

from lit_sparse._lazy import lazy_names
from lit_sparse.kernels import compiled, self_check
from lit_sparse.kernels.csr import csr_attention as csr_attention
from lit_sparse.kernels.gather import gather_attention as gather_attention
from lit_sparse.kernels.slots import KeySlots as KeySlots
from lit_sparse.kernels.slots import exact_slots as exact_slots

if TYPE_CHECKING:  # imported on first use (triton_attention: the Triton kernel, needs triton)
    from lit_sparse.kernels.denormals import flushed_denormals as flushed_denormals
    from lit_sparse.kernels.threads import usable_cores as usable_cores
    from lit_sparse.kernels.triton_kernel import triton_attention as triton_attention

__getattr__, __dir__, _public = lazy_names(__name__)
__all__ = sorted([*_public, "sparse_attention"])


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
