"""A decoding step's products: few CPU rows of x through the compiled kernel, reading float32,
bfloat16 (half the traffic) or int8 weights directly and summing in float32; otherwise torch's
product (bfloat16 weights widened once). The kernel has no autograd: a product that needs
gradients is torch's."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_sparse.kernels import compiled

SMALL_ROWS = 64
"""Rows of x up to which the CPU kernel reads the weights directly."""


def linear(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T`` (no bias) in x's dtype, whatever dtype ``weight`` is stored in."""
    if kernel_reads(x, weight):
        if weight.dtype == torch.bfloat16:
            return compiled.bf16_linear(x.contiguous(), weight.contiguous())  # (..., out)
        return compiled.f32_linear(x.contiguous(), weight)
    if weight.dtype == x.dtype:
        return F.linear(x, weight)
    return F.linear(x, weight.to(x.dtype))


def kernel_reads(x: Tensor, weight: Tensor) -> bool:
    """Whether the compiled kernel takes ``x @ weight.T``: float32 x of few rows on the CPU,
    bfloat16 weights or row-major float32 ones (a float32 matrix-vector product streams the
    weights about 1.3x as fast as torch's on two threads), and no gradient to record."""
    if not (x.dtype == torch.float32 and x.is_cpu and x.numel() <= SMALL_ROWS * x.shape[-1]):
        return False
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return False
    if weight.dtype == torch.float32 and not weight.is_contiguous():
        return False
    return weight.dtype in (torch.float32, torch.bfloat16) and compiled.available()
