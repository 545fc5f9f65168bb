"""The compiled CPU kernel's ops (built on first use by :mod:`~lit_sparse.kernels.build`; call
:func:`available` first): slot attention, one decoding step, narrow-weight linear products."""

from __future__ import annotations

import torch
from torch import Tensor

from lit_sparse.kernels.build import available as available  # compiled.available()
from lit_sparse.kernels.build import extension
from lit_sparse.kernels.slots import KeySlots, rung_grad
from lit_sparse.kernels.threads import usable_threads


def _resolve(slots: KeySlots, length: int):
    """The valid exact distances, the used rungs (and their indices), the absolute keys and
    their readers at ``length``; ValueError for reads outside q, k, v."""
    exact, keep, lo, frac = slots.read_at(length, "the compiled CPU kernel")
    empty = torch.zeros(0, dtype=torch.long)
    block_keys, readers = torch.zeros(0, 0, dtype=torch.long), (empty, empty, empty)
    if slots.n_absolute:
        n_blocks = -(-length // slots.block_size)
        block_keys = slots.block_keys[:n_blocks].to("cpu", torch.long).contiguous()
        readers = _readers(block_keys, length)
    return exact, keep, lo, frac, block_keys, readers


def _readers(block_keys: Tensor, length: int) -> tuple[Tensor, Tensor, Tensor]:
    """For each key row, the (block, slot) pairs that draw it, as CSR arrays ordered by key
    and then block: (ptr (T + 1,), block, slot)."""
    n_blocks, n_abs = block_keys.shape
    keys = block_keys.reshape(-1)
    blocks = torch.arange(n_blocks).repeat_interleave(n_abs)
    slot = torch.arange(n_abs).repeat(n_blocks)
    used = (keys >= 0) & (keys < length)
    keys, blocks, slot = keys[used], blocks[used], slot[used]
    order = torch.argsort(keys * n_blocks + blocks, stable=True)
    keys, blocks, slot = keys[order], blocks[order], slot[order]
    ptr = torch.zeros(length + 1, dtype=torch.long)
    ptr[1:] = torch.cumsum(torch.bincount(keys, minlength=length), 0)
    return ptr, blocks.contiguous(), slot.contiguous()


def _rows(x: Tensor, dtype: torch.dtype) -> Tensor:
    """x (B, heads, T, D) in ``dtype`` with contiguous channels (other strides are read as is)."""
    x = x.to(dtype)
    return x if x.stride(-1) == 1 else x.contiguous()


class _CompiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, frac_in, slots: KeySlots):
        dtype = torch.promote_types(q.dtype, torch.float32)
        length = q.shape[2]
        exact, keep, lo, frac, block_keys, readers = _resolve(slots, length)
        with torch.autocast("cpu", enabled=False):
            q_rows, k_rows, v_rows = (_rows(x, dtype) for x in (q, k, v))
            # out comes laid out as q; k and v channel-major, which the backward reads instead
            out, probs, k_channels, v_channels = extension().forward(
                q_rows, k_rows, v_rows, exact, lo, frac, block_keys, slots.block_size,
                slots.min_abs_distance, usable_threads(),
            )  # fmt: skip
        ctx.save_for_backward(q_rows, k_channels, v_channels, probs)
        ctx.slots = (exact, lo, frac, block_keys, slots.block_size, slots.min_abs_distance)
        ctx.readers, ctx.keep, ctx.n_rungs = readers, keep, slots.n_rungs
        ctx.contiguous = (k_rows.is_contiguous(), v_rows.is_contiguous())  # dk's, dv's layout
        ctx.dtypes, ctx.frac_dtype = (q.dtype, k.dtype, v.dtype), frac_in.dtype
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        q_rows, k_channels, v_channels, probs = ctx.saved_tensors
        with torch.autocast("cpu", enabled=False):
            dout = _rows(grad_out, q_rows.dtype)
            dq, dk, dv, dfrac = extension().backward(
                q_rows, k_channels, v_channels, dout, probs, *ctx.slots, *ctx.readers,
                *ctx.contiguous, usable_threads(),
            )  # fmt: skip
        d_frac = rung_grad(dfrac, ctx.keep, ctx.n_rungs, ctx.frac_dtype)
        q_dtype, k_dtype, v_dtype = ctx.dtypes
        return dq.to(q_dtype), dk.to(k_dtype), dv.to(v_dtype), d_frac, None


def compiled_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Causal attention of q (B, H, T, D) over the slots of k, v (B, KV, T, D) on the CPU."""
    frac = slots.rung_frac if slots.n_rungs else q.new_empty(0)
    return _CompiledAttention.apply(q, k, v, frac, slots)


def decode_step(
    q: Tensor,
    ring_k: Tensor,
    ring_v: Tensor,
    position: int,
    back: Tensor,
    first: Tensor,
    frac: Tensor,
    block_keys: Tensor,
    block_size: int,
    min_abs: int,
) -> Tensor:
    """One decoding position over a ring of cached rows: q (B, H, D), ring k, v (B, KV, C, D)
    (position p in row p % C); ``back`` (M + 2R,) how far back each relative row is, ``first``
    (M + R,) where each exact slot and rung becomes valid, ``frac`` (R,) float64 upper-tap
    weights, ``block_keys`` (n_blocks, A) or empty. Returns (B, H, D)."""
    (out,) = extension().decode_step(
        q, ring_k, ring_v, position, back, first, frac, block_keys, block_size, min_abs
    )
    return out


def layer_step(
    x: Tensor,
    norms: tuple[Tensor, Tensor],
    eps: float,
    stages: tuple[list[Tensor], list[Tensor]],
    heads: tuple[int, int],
    rotation: tuple[Tensor, Tensor],
    rings: tuple[Tensor, Tensor],
    position: int,
    reads: tuple,
) -> None:
    """One decoding step of a block on x (B, d) float32, in place: ``norms`` (attention's,
    the feed-forward's or empty), ``stages`` (weights, scales): per stage [qkv, o, gate_up,
    down] the matrices side by side (float32 or bfloat16 rows, int8 with their scales; empty
    scales for the others), ``heads`` (heads, kv_heads), ``rotation`` the position's cos and sin
    (D,) (empty: NoPE), ``rings`` the layer's cached keys and values (B, KV, C, D) (this
    position's go to row position % C), ``reads`` the decoder's ``step_reads()``."""
    extension().layer_step(x, *norms, eps, *stages, *heads, *rotation, *rings, position, *reads)


def bf16_linear(x: Tensor, weight: Tensor) -> Tensor:
    """x (..., K) float32 @ bfloat16 ``weight`` (N, K).T, summed in float32: (..., N)."""
    return extension().bf16_linear(x, weight)


def f32_linear(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T`` for float32 ``x`` (few rows) and a row-major float32 ``weight``."""
    return extension().f32_linear(x, weight)


def int8_linear(x: Tensor, weight: Tensor, scale: Tensor) -> Tensor:
    """x (..., K) float32 @ int8 ``weight`` (N, K or more: its rows' padding is skipped) .T,
    channel n times ``scale[n]`` (float32), summed in float32: (..., N)."""
    return extension().int8_linear(x, weight, scale)
