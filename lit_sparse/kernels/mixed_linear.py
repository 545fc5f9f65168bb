"""Products with weights stored narrower than the activations (bfloat16 halves a decoding step's
memory traffic; sums in float32): few CPU rows through the compiled kernel, else widened once."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_sparse.kernels import compiled

SMALL_ROWS = 64
"""Rows of x up to which the CPU kernel reads bfloat16 weights directly."""


def linear(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T`` (no bias) in x's dtype, whatever dtype ``weight`` is stored in."""
    if weight.dtype == x.dtype:
        return F.linear(x, weight)
    if (
        weight.dtype == torch.bfloat16
        and x.dtype == torch.float32
        and x.is_cpu
        and x.numel() <= SMALL_ROWS * x.shape[-1]
        and compiled.available()
    ):
        return compiled.bf16_linear(x.contiguous(), weight.contiguous())  # (..., out)
    return F.linear(x, weight.to(x.dtype))
