"""Int8 weights for CPU decoding (a quarter of float32's bytes): every matrix as int8 with a
float32 scale per output row (``max|w| / 127``). A few rows run through the compiled
``int8_linear`` kernel, more through ``torch._weight_int8pack_mm`` (docs/performance.md)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_sparse.errors import ConfigError
from lit_sparse.kernels import compiled
from lit_sparse.kernels.mixed_linear import SMALL_ROWS
from lit_sparse.model import LanguageModel, Linear

QUANTIZE = ("none", "int8")
"""The ``--quantize`` choices: none (the weights as they are) or int8."""

ALIGN = 16
"""The kernel reads this many input channels at a time (aligned rows)."""


class Int8Weight(nn.Module):
    """An int8 matrix (out, in padded to ``ALIGN``) with a float32 scale per output row."""

    def __init__(self, weight: Tensor):
        super().__init__()
        out_features, in_features = weight.shape
        matrix = weight.detach().float()
        scale = matrix.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / 127
        values = torch.round(matrix / scale[:, None]).clamp_(-127, 127).to(torch.int8)
        self.in_features, self.out_features = in_features, out_features
        padded = -(-in_features // ALIGN) * ALIGN
        self.register_buffer("weight", F.pad(values, (0, padded - in_features)).contiguous())
        self.register_buffer("scale", scale)
        ones = torch.ones(out_features, dtype=torch.bfloat16, device=weight.device)
        self.register_buffer("_unit", ones, persistent=False)  # the kernel's own scales

    def product(self, x: Tensor) -> Tensor:
        """``x @ W.T`` (..., out_features) for x (..., in_features): up to ``SMALL_ROWS`` rows
        through the compiled kernel in float32, more through torch's kernel with bfloat16 inputs."""
        small = x.is_cpu and x.numel() <= SMALL_ROWS * self.in_features
        if small and x.shape[-1] == self.in_features and compiled.available():
            # the kernel reads x's shape and skips the weight rows' padding itself
            return compiled.int8_linear(x.float().contiguous(), self.weight, self.scale)
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16, copy=True)  # aligned, new
        padding = self.weight.shape[1] - self.in_features
        if padding:
            rows = F.pad(rows, (0, padding))
        out = torch._weight_int8pack_mm(rows, self.weight, self._unit)  # (rows, out) bfloat16
        return torch.mul(out, self.scale).view(*x.shape[:-1], self.out_features)

    def dequantized(self) -> Tensor:
        """The float32 matrix the int8 values and scales stand for (out, in)."""
        return self.weight[:, : self.in_features].float() * self.scale[:, None]

    def train(self, mode: bool = True):
        if mode:
            raise ConfigError(
                "quantize='int8': int8 weights are for decoding and evaluation only; train the "
                "float32 model and quantize a copy"
            )
        return super().train(False)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


class Int8Linear(Int8Weight):
    """A bias-free projection with int8 weights (replaces :class:`lit_sparse.model.Linear`)."""

    forward = Int8Weight.product


class Int8Embedding(Int8Weight):
    """The tied embedding in int8; :meth:`project` is the output layer."""

    def forward(self, idx: Tensor) -> Tensor:
        rows = F.embedding(idx, self.weight[:, : self.in_features]).float()
        return rows * F.embedding(idx, self.scale[:, None])

    project = Int8Weight.product


def quantize_int8(model: LanguageModel) -> LanguageModel:
    """``model`` (CPU, eval mode) with its matrices in int8, in place; returns it."""
    if not isinstance(model, LanguageModel):
        raise ConfigError(
            f"quantize='int8': expected a lit_sparse LanguageModel, got {type(model).__name__}"
        )
    device = model.norm.weight.device
    if device.type != "cpu":
        raise ConfigError(
            f"quantize='int8': the int8 kernel is used on the CPU only; the model is on "
            f"{device} (use --device cpu, or --dtype bfloat16 on a GPU)"
        )
    if model.training:
        raise ConfigError(
            "quantize='int8': the model is in training mode; int8 weights are for decoding "
            "and evaluation only (call model.eval() first)"
        )
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Linear):
                setattr(module, name, Int8Linear(child.weight))
    if isinstance(model.embedding, nn.Embedding):
        model.embedding = Int8Embedding(model.embedding.weight)
    return model.eval()


def check_quantize(name: str) -> str:
    """``name`` if it is a ``--quantize`` choice, else one ConfigError line."""
    if name not in QUANTIZE:
        raise ConfigError(f"quantize={name!r}: expected one of {', '.join(QUANTIZE)}")
    return name


def quantize(model: LanguageModel, name: str) -> LanguageModel:
    """``model`` with its decoding weights quantized as ``name`` says ("none": as it is)."""
    return quantize_int8(model) if check_quantize(name) == "int8" else model
