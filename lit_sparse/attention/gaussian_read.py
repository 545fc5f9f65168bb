"""The Gaussian ("blur") rung read of a learned schedule with ``read: Gaussian``: the retrieval
probe's dense O(T^2) path (paper table 2), its width annealed by the probe."""

from __future__ import annotations

import torch
from torch import Tensor

from lit_sparse.attention.decoding import DecodeShape, LayerDecoder
from lit_sparse.attention.fibonacci_patterns import LearnedFibonacciPattern, RungLayout
from lit_sparse.kernels import KeySlots


def rung_width_at(progress: float, start: float, end: float, anneal: float) -> float:
    """Width (sigma, positions) at training ``progress`` in [0, 1]: linear from ``start`` to
    ``end`` over the first ``anneal`` of training."""
    share = min(1.0, max(0.0, progress) / anneal)
    return start + (end - start) * share


class GaussianFibonacciPattern(LearnedFibonacciPattern):
    """Learned alpha whose rungs read a Gaussian band of rows: rung r (t = alpha * f) reads for
    query i sum_j m_r(i, j) row[j], m_r proportional to exp(-(i - j - t)^2 / (2 sigma^2)) over
    rows j <= i; theta's gradient flows through t, sigma is the buffer ``rung_width``."""

    def __init__(
        self,
        layout: RungLayout,
        alpha: float,
        alpha_min: float,
        alpha_max: float,
        width_start: float,
        width_end: float,
        width_anneal: float,
    ):
        super().__init__(layout, alpha, alpha_min, alpha_max)
        self.width_start, self.width_end, self.width_anneal = width_start, width_end, width_anneal
        self.register_buffer("rung_width", torch.tensor(float(width_start)))

    def set_progress(self, progress: float) -> None:
        """Set the width for training ``progress`` (optimizer step / total steps)."""
        width = rung_width_at(progress, self.width_start, self.width_end, self.width_anneal)
        self.rung_width.fill_(width)

    def bands(self, slots: KeySlots, length: int, device: torch.device) -> tuple[Tensor, Tensor]:
        """The per-query normalised bands (R, T, T) of ``slots`` and rung validity (T, R)."""
        centre = slots.rung_lo.to(slots.rung_frac.dtype) + slots.rung_frac  # (R,) = alpha * f
        i = torch.arange(length, device=device)
        rel = (i[:, None] - i[None, :]).to(centre.dtype)  # (T, T) distance i - j
        width = self.rung_width.to(centre.dtype)
        logw = -((rel[None] - centre[:, None, None]) ** 2) / (2 * width**2)  # (R, T, T)
        logw = logw.masked_fill(rel[None] < 0, float("-inf"))  # future rows do not exist
        band = torch.softmax(logw, dim=-1)  # normalised over the rows j <= i of each query
        valid = slots.rung_valid[None, :] & (i[:, None] >= slots.rung_lo[None, :])  # (T, R)
        return band, valid

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        batch, heads, length, dim = q.shape
        kv_heads = k.shape[1]
        qg = q.view(batch, kv_heads, heads // kv_heads, length, dim)  # (B, KV, G, T, D)
        scores = torch.einsum("bkgid,bkjd->bkgij", qg, k) * dim**-0.5  # (B, KV, G, T, T)
        slots = self.slots(length, q.device)
        i = torch.arange(length, device=q.device)
        rel = i[:, None] - i[None, :]
        near = torch.isin(rel, slots.distances) & (rel >= 0)  # (T, T) exact window
        window_logits = scores.masked_fill(~near, float("-inf"))
        band, valid = self.bands(slots, length, q.device)
        band = band.to(q.dtype)
        rung_logits = torch.einsum("bkgij,rij->bkgir", scores, band)  # (B, KV, G, T, R)
        rung_logits = rung_logits.masked_fill(~valid, float("-inf"))
        probs = torch.softmax(torch.cat([window_logits, rung_logits], dim=-1), dim=-1)
        mix = probs[..., :length] + torch.einsum("bkgir,rij->bkgij", probs[..., length:], band)
        out = torch.einsum("bkgij,bkjd->bkgid", mix, v)  # (B, KV, G, T, D)
        return out.reshape(batch, heads, length, dim)

    def reference(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return self.forward(q, k, v)

    def decoder(self, shape: DecodeShape) -> LayerDecoder:
        """Each token's row of :meth:`forward` over the whole past: O(T * rungs) per token."""
        return GaussianDecoder(self, shape)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rung_read=gaussian, width={float(self.rung_width):.3g}"


class GaussianDecoder(LayerDecoder):
    """One query row of :meth:`GaussianFibonacciPattern.forward` over the whole past."""

    def __init__(self, pattern: GaussianFibonacciPattern, shape: DecodeShape):
        super().__init__(pattern, shape)
        self.slots = pattern.slots(shape.max_length, shape.device)

    def step(self, q: Tensor, k: Tensor, v: Tensor, position: int) -> Tensor:
        self.cache.write(position, k, v)
        shape, slots, end = self.shape, self.slots, position + 1
        keys, values = self.cache.k[:, :, :end], self.cache.v[:, :, :end]  # (B, KV, t + 1, D)
        qg = q.view(shape.batch, shape.kv_heads, shape.groups, shape.head_dim)  # (B, KV, G, D)
        scores = (qg @ keys.transpose(-1, -2)) * shape.head_dim**-0.5  # (B, KV, G, t + 1)
        rel = position - torch.arange(end, device=q.device)  # (t + 1,) distance of each row
        near = torch.isin(rel, slots.distances)
        centre = slots.rung_lo.to(slots.rung_frac.dtype) + slots.rung_frac.detach()  # (R,)
        width = self.pattern.rung_width.to(centre.dtype)
        logw = -((rel[None].to(centre.dtype) - centre[:, None]) ** 2) / (2 * width**2)
        band = torch.softmax(logw, dim=-1).to(q.dtype)  # (R, t + 1) over the rows j <= t
        valid = slots.rung_valid & (position >= slots.rung_lo)  # (R,)
        rung_logits = (scores @ band.T).masked_fill(~valid, float("-inf"))  # (B, KV, G, R)
        logits = torch.cat([scores.masked_fill(~near, float("-inf")), rung_logits], dim=-1)
        probs = torch.softmax(logits, dim=-1)
        mix = probs[..., :end] + probs[..., end:] @ band  # (B, KV, G, t + 1)
        out = mix @ values  # (B, KV, G, D)
        return out.view(shape.batch, shape.heads, 1, shape.head_dim)
