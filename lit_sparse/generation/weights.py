"""Weights in bfloat16 or a decoding layout (a batch-1 step is bound by streaming the weights:
the compiled kernel streams row-major matrices, torch's few-row product column-major ones
faster), the same float32 arithmetic."""

from __future__ import annotations

import torch
from torch import nn

from lit_sparse.errors import ConfigError
from lit_sparse.kernels import compiled
from lit_sparse.model import Attention, FeedForward, FusedProjection

WEIGHT_DTYPES = ("float32", "bfloat16")


def bfloat16_weights(model: nn.Module) -> nn.Module:
    """Store ``model``'s matrices in bfloat16, in place (norms stay float32); returns it."""
    matrices = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    for module in matrices:
        module.weight.data = module.weight.data.to(torch.bfloat16)
    return model


def decoding_layout(model: nn.Module) -> nn.Module:
    """``model``'s float32 CPU matrices laid out for decoding in place: fused, and row-major for
    the compiled kernel (column-major where it cannot be built, for torch's product)."""
    for module in list(model.modules()):
        if isinstance(module, Attention) and not (module.qkv and module.qkv.active()):
            module.qkv = FusedProjection.fuse([module.q_proj, module.k_proj, module.v_proj])
        elif isinstance(module, FeedForward) and not (module.gate_up and module.gate_up.active()):
            module.gate_up = FusedProjection.fuse([module.gate, module.up])
    if compiled.available():
        return model
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
