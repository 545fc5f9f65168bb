"""Dense causal attention: SDPA, or flash-attn on CUDA in half precision when installed."""

from __future__ import annotations

import functools
import logging
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_sparse.attention.base import AttentionPattern, AttentionPlugin
from lit_sparse.attention.decoding import DecodeShape, DenseDecoder, LayerDecoder
from lit_sparse.attention.options import check_choices
from lit_sparse.attention.registry import register_attention
from lit_sparse.kernels.reference import masked_attention

log = logging.getLogger(__name__)

try:  # optional extra `flash`
    from flash_attn import flash_attn_func
except ImportError:  # pragma: no cover - depends on the machine
    flash_attn_func = None


@functools.cache
def announce_backend(backend: str) -> None:
    """Log once per process which attention backend runs."""
    log.info("attention backend: %s", backend)


def flash_usable(q: Tensor) -> bool:
    """flash-attn serves CUDA tensors in fp16/bf16 when it is installed."""
    return flash_attn_func is not None and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)


def flash_attention(q: Tensor, k: Tensor, v: Tensor, window: int | None = None) -> Tensor:
    """flash-attn in its (B, T, H, D) layout; ``window`` keeps distances 0..window only."""
    window_size = (-1, -1) if window is None else (window, 0)
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # (B, T, H, D); K/V keep their head count
    return flash_attn_func(q, k, v, causal=True, window_size=window_size).transpose(1, 2)


def sdpa_takes_gqa(q: Tensor) -> bool:
    """Whether SDPA's fused kernels broadcast K/V over a GQA group (elsewhere ``enable_gqa``
    builds [T, T] scores): on the CPU, and on CUDA sm80+ in fp16/bf16 with head dim <= 256."""
    if not q.is_cuda:
        return True
    half = q.dtype in (torch.float16, torch.bfloat16)
    return half and q.shape[-1] <= 256 and torch.cuda.get_device_capability(q.device) >= (8, 0)


def causal_sdpa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Causal SDPA of q (B, H, T, D) over k, v (B, KV, T, D), repeating K/V per group only
    where the fused kernels cannot broadcast them."""
    groups = q.shape[1] // k.shape[1]
    if groups > 1 and not sdpa_takes_gqa(q):
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=groups > 1)


class DensePattern(AttentionPattern):
    def __init__(self, training_length: int, backend: str = "auto"):
        super().__init__(training_length)
        self.backend = backend

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        if self.backend != "sdpa" and flash_usable(q):
            announce_backend("flash-attn")
            return flash_attention(q, k, v)
        if self.backend == "flash":
            raise RuntimeError("dense backend 'flash' needs flash-attn and CUDA fp16/bf16 tensors")
        announce_backend("sdpa")
        return causal_sdpa(q, k, v)

    def reference(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        length = q.shape[-2]
        mask = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
        return masked_attention(q, k, v, mask)

    def distances(self, length: int) -> list[int]:
        return list(range(length))

    def decoder(self, shape: DecodeShape) -> LayerDecoder:
        """The whole past, one SDPA call per token."""
        return DenseDecoder(self, shape)


@register_attention("dense")
class DenseAttention(AttentionPlugin):
    """Full causal attention (the baseline)."""

    def __init__(self, backend: Literal["auto", "sdpa", "flash"] = "auto"):
        """
        Args:
            backend: "auto" (flash-attn on CUDA fp16/bf16 if installed, else SDPA), sdpa or flash.
        """
        self.backend = backend
        check_choices(self)

    def build(self, layer: int, n_layers: int, training_length: int) -> DensePattern:
        return DensePattern(training_length, self.backend)
