"""Attention through dense [T, T] structures, O(T^2): the references the tests hold the kernels
to, and the masked product a wide slot set runs on the CPU (:mod:`lit_sparse.kernels.masked`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_sparse.kernels.slots import KeySlots


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """SDPA with a boolean (T, T) mask, True where query i may attend to key j."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def slots_mask(slots: KeySlots, length: int) -> Tensor:
    """The boolean (T, T) mask of the exact and absolute slots (no interpolated rungs)."""
    device = slots.distances.device
    i = torch.arange(length, device=device)
    rel = i[:, None] - i[None, :]
    mask = torch.isin(rel, slots.distances) & (rel >= 0)
    if slots.block_keys is not None:
        keys = slots.block_keys[i // slots.block_size]  # (T, A)
        ok = (keys >= 0) & (i[:, None] - keys >= slots.min_abs_distance)
        hits = torch.zeros(length, length + 1, dtype=torch.bool, device=device)
        hits.scatter_(1, torch.where(ok, keys, length), True)
        mask |= hits[:, :length]
    return mask


def slots_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Dense reference of ``sparse_attention``, rungs included: a rung's score is the dense
    scores contracted with a (T, T) interpolation matrix, sharing no indexing with the kernels."""
    length, groups = q.shape[-2], q.shape[1] // k.shape[1]
    k = k.repeat_interleave(groups, dim=1)  # (B, H, T, D): fine in a reference
    v = v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5  # (B, H, T, T)
    logits = [scores.masked_fill(~slots_mask(slots, length), float("-inf"))]
    if slots.rung_lo is not None and slots.n_rungs:
        i = torch.arange(length, device=q.device)
        rel = (i[:, None] - i[None, :])[None]  # (1, T, T)
        lo = slots.rung_lo[:, None, None]
        frac = slots.rung_frac[:, None, None].to(q.dtype)
        j = i[None, None, :]
        upper = (i[:, None] - slots.rung_lo[None, :] - 1).clamp(min=0).T[:, :, None]  # (R, T, 1)
        interp = (1 - frac) * (rel == lo) + frac * (j == upper)  # (R, T, T); row -1 -> row 0
        rung_scores = torch.einsum("bhij,rij->bhir", scores, interp)  # (B, H, T, R)
        valid = slots.rung_valid[None, :] & (i[:, None] >= slots.rung_lo[None, :])  # (T, R)
        logits.append(rung_scores.masked_fill(~valid, float("-inf")))
    probs = torch.softmax(torch.cat(logits, dim=-1), dim=-1)
    out = probs[..., :length] @ v
    if len(logits) > 1:
        out = out + torch.einsum("bhir,rij,bhjd->bhid", probs[..., length:], interp, v)
    return out
