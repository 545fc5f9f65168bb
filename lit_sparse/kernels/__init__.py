"""Kernels: attention over per-query key slots on every device, and the network's
narrow-weight linear products (``mixed_linear``). ``sparse_attention`` picks the attention
implementation: on the CPU the compiled loops (``compiled``, built by ``build``) or, where
they cannot be built, sparse BLAS (``csr``); on CUDA the Triton kernel (``triton_kernel``)
for relative slots once its first-use self-check passed on the (device, dtype)
(``self_check``); else the chunked gather (``gather``, any device: BigBird's absolute keys
on CUDA). ``reference`` holds the dense O(T^2) paths the tests compare against.
"""

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
    """The Triton kernel module, or None when triton is not installed (imported lazily)."""
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
    """The Triton kernel where it handles the slots and has passed its self-check on q's
    (device, dtype); else the gather path."""
    kernel = _triton()
    if kernel is not None and kernel.supported(q, k, slots) and self_check.trusted(kernel, q, k):
        return kernel.triton_attention(q, k, v, slots)
    return gather_attention(q, k, v, slots)
