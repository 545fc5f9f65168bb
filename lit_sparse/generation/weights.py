"""Weights for decoding in a narrower dtype: bfloat16 matrices, float32 arithmetic.

A decoding step at batch 1 reads every weight once, so its time is about the weights' bytes
over the memory bandwidth. :func:`bfloat16_weights` stores the matrices (attention and MLP
projections, the tied embedding and output layer) in bfloat16, half those bytes, and keeps
the norms, the activations, the caches and every sum in float32: each weight is widened as
it is read. Greedy tokens match float32's on the project's test prompts (tests check it);
logits differ by the weights' rounding (about 3 significant digits).
"""

from __future__ import annotations

import torch
from torch import nn

from lit_sparse.errors import ConfigError

__all__ = ["WEIGHT_DTYPES", "bfloat16_weights", "weight_dtype"]

WEIGHT_DTYPES = ("float32", "bfloat16")


def bfloat16_weights(model: nn.Module) -> nn.Module:
    """Store ``model``'s matrices in bfloat16, in place (norms stay float32); returns it."""
    matrices = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    for module in matrices:
        module.weight.data = module.weight.data.to(torch.bfloat16)
    return model


def weight_dtype(model: nn.Module, name: str) -> nn.Module:
    """``model`` with its decoding weights in ``name`` ("float32": as it is)."""
    if name not in WEIGHT_DTYPES:
        raise ConfigError(f"dtype={name!r}: expected one of {', '.join(WEIGHT_DTYPES)}")
    return bfloat16_weights(model) if name == "bfloat16" else model
