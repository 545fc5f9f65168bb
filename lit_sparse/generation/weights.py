"""Weights for decoding in a narrower dtype or layout, the same float32 arithmetic.

A decoding step at batch 1 reads every weight once, so its time is about the weights' bytes over
the memory bandwidth. :func:`bfloat16_weights` stores the matrices in bfloat16 (half the bytes)
and keeps norms, activations, caches and every sum in float32, each weight widened as it is read.
:func:`decoding_layout` changes no value: q, k and v become one product (as do the MLP's gate and
up) and every other float32 matrix is stored column-major, which a product of a few rows streams
at the memory's speed where torch's CPU BLAS reads a row-major weight at about 60 % of it
(docs/performance.md, "Decoding at the weight-streaming floor").
"""

from __future__ import annotations

import torch
from torch import nn

from lit_sparse.errors import ConfigError
from lit_sparse.model import Attention, FeedForward, FusedProjection

__all__ = ["WEIGHT_DTYPES", "bfloat16_weights", "decoding_layout", "weight_dtype"]

WEIGHT_DTYPES = ("float32", "bfloat16")


def bfloat16_weights(model: nn.Module) -> nn.Module:
    """Store ``model``'s matrices in bfloat16, in place (norms stay float32); returns it."""
    matrices = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    for module in matrices:
        module.weight.data = module.weight.data.to(torch.bfloat16)
    return model


def decoding_layout(model: nn.Module) -> nn.Module:
    """Lay ``model``'s float32 CPU matrices out for decoding, in place (the same values, the
    same parameters); returns it: q, k and v become one product, and the MLP's gate and up
    another (:class:`~lit_sparse.model.FusedProjection`), and every other matrix is stored
    column-major. Generation applies it; training and saving are unaffected (a saved weight
    is written contiguous); replacing a weight (``.to()``, another dtype) undoes it."""
    for module in list(model.modules()):
        if isinstance(module, Attention) and not (module.qkv and module.qkv.active()):
            module.qkv = FusedProjection.fuse([module.q_proj, module.k_proj, module.v_proj])
        elif isinstance(module, FeedForward) and not (module.gate_up and module.gate_up.active()):
            module.gate_up = FusedProjection.fuse([module.gate, module.up])
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if (
            isinstance(module, (nn.Linear, nn.Embedding))
            and weight.device.type == "cpu"
            and weight.dtype == torch.float32
            and weight.is_contiguous()
        ):
            weight.data = weight.data.t().contiguous().t()
    return model


def weight_dtype(model: nn.Module, name: str) -> nn.Module:
    """``model`` with its decoding weights in ``name`` ("float32": as it is)."""
    if name not in WEIGHT_DTYPES:
        raise ConfigError(f"dtype={name!r}: expected one of {', '.join(WEIGHT_DTYPES)}")
    return bfloat16_weights(model) if name == "bfloat16" else model
