"""Triton kernel of the sparse op for CUDA tensors (extra ``triton``; CPU: ``TRITON_INTERPRET=1``),
absolute keys left to the torch path. A program per (query block, batch, KV head) folds each
slot's K, V tiles, shifted by its distance, into an online softmax (row-wise dots, no ``tl.dot``);
the backward, without atomics, is a dQ pass then a dK/dV pass by mirrored shifts."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from lit_sparse.kernels.slots import KeySlots


@triton.jit
def _group_tile(
    pid_rows, pid_bh, length,
    KV_HEADS: tl.constexpr, GROUPS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """A program's batch b, KV head kv, BLOCK rows (and which are < length), the group's query
    heads h and the dims d (and which are < HEAD_DIM)."""
    b = pid_bh // KV_HEADS
    kv = pid_bh % KV_HEADS
    rows = pid_rows * BLOCK + tl.arange(0, BLOCK)
    h = kv * GROUPS + tl.arange(0, GROUPS)
    d = tl.arange(0, BLOCK_D)
    return b, kv, rows, rows < length, h, d, d < HEAD_DIM


@triton.jit
def _head_offsets(b, h, t, d, sb, sh, st, sd):
    """Offsets of the (rows, G, D) tile of heads h at rows t."""
    return b * sb + h[None, :, None] * sh + t[:, None, None] * st + d[None, None, :] * sd


@triton.jit
def _kv_rows(k_base, v_base, rows, d, mask, skt, skd, svt, svd):
    """The (rows, D) tiles of K and V at ``rows`` in float32, 0 where masked."""
    kt = tl.load(k_base + rows[:, None] * skt + d[None, :] * skd, mask=mask, other=0.0)
    vt = tl.load(v_base + rows[:, None] * svt + d[None, :] * svd, mask=mask, other=0.0)
    return kt.to(tl.float32), vt.to(tl.float32)


@triton.jit
def _online_softmax(q, kt, vt, ok, m_i, l_i, acc, scale):
    """One slot's key and value rows folded into the running max, sum and output."""
    s = tl.sum(q * kt[:, None, :], axis=2) * scale  # (M, G)
    s = tl.where(ok[:, None], s, -1.0e30)
    m_new = tl.maximum(m_i, s)
    alpha = tl.exp(m_i - m_new)
    p = tl.where(ok[:, None], tl.exp(s - m_new), 0.0)
    return m_new, l_i * alpha + p, acc * alpha[:, :, None] + p[:, :, None] * vt[:, None, :]


@triton.jit
def _score_gradients(q, do, kt, vt, ok, lse, delta, scale):
    """One slot's probabilities P and score gradients dS, each (M, G)."""
    s = tl.sum(q * kt[:, None, :], axis=2) * scale
    p = tl.where(ok[:, None], tl.exp(s - lse), 0.0)
    dp = tl.sum(do * vt[:, None, :], axis=2)
    return p, p * (dp - delta)


@triton.jit
def _forward_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
    dist_ptr, lo_ptr, frac_ptr,
    n_exact, n_rungs, length, scale,
    sqb, sqh, sqt, sqd,
    skb, skh, skt, skd,
    svb, svh, svt, svd,
    sob, soh, sot, sod,
    KV_HEADS: tl.constexpr, GROUPS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    b, kv, t, t_ok, h, d, d_ok = _group_tile(
        tl.program_id(0), tl.program_id(1), length, KV_HEADS, GROUPS, HEAD_DIM, BLOCK_M, BLOCK_D
    )
    q_mask = t_ok[:, None, None] & d_ok[None, None, :]
    q_offs = _head_offsets(b, h, t, d, sqb, sqh, sqt, sqd)
    q = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32)  # (M, G, D)
    m_i = tl.full((BLOCK_M, GROUPS), -1.0e30, tl.float32)
    l_i = tl.zeros((BLOCK_M, GROUPS), tl.float32)
    acc = tl.zeros((BLOCK_M, GROUPS, BLOCK_D), tl.float32)
    k_base = k_ptr + b * skb + kv * skh
    v_base = v_ptr + b * svb + kv * svh
    for j in range(0, n_exact):
        rows = t - tl.load(dist_ptr + j)
        ok = t_ok & (rows >= 0)
        mask = ok[:, None] & d_ok[None, :]
        kt, vt = _kv_rows(k_base, v_base, rows, d, mask, skt, skd, svt, svd)
        m_i, l_i, acc = _online_softmax(q, kt, vt, ok, m_i, l_i, acc, scale)
    for j in range(0, n_rungs):
        f = tl.load(frac_ptr + j).to(tl.float32)
        rows = t - tl.load(lo_ptr + j)
        ok = t_ok & (rows >= 0)
        mask = ok[:, None] & d_ok[None, :]
        upper = tl.maximum(rows - 1, 0)  # the rung's first row: row -1 -> row 0
        k_lo, v_lo = _kv_rows(k_base, v_base, rows, d, mask, skt, skd, svt, svd)
        k_hi, v_hi = _kv_rows(k_base, v_base, upper, d, mask, skt, skd, svt, svd)
        kt = k_lo * (1.0 - f) + k_hi * f
        vt = v_lo * (1.0 - f) + v_hi * f
        m_i, l_i, acc = _online_softmax(q, kt, vt, ok, m_i, l_i, acc, scale)
    l_safe = tl.where(l_i > 0.0, l_i, 1.0)
    out = acc / l_safe[:, :, None]
    o_offs = _head_offsets(b, h, t, d, sob, soh, sot, sod)
    tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=q_mask)
    lse_offs = (b * KV_HEADS * GROUPS + h[None, :]) * length + t[:, None]
    tl.store(lse_ptr + lse_offs, m_i + tl.log(l_safe), mask=t_ok[:, None])


@triton.jit
def _dq_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, dfrac_ptr,
    dist_ptr, lo_ptr, frac_ptr,
    n_exact, n_rungs, length, scale,
    sqb, sqh, sqt, sqd,
    skb, skh, skt, skd,
    svb, svh, svt, svd,
    sob, soh, sot, sod,
    sdb, sdh, sdt, sdd,
    KV_HEADS: tl.constexpr, GROUPS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, MAX_RUNGS: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b, kv, t, t_ok, h, d, d_ok = _group_tile(
        pid_m, pid_bh, length, KV_HEADS, GROUPS, HEAD_DIM, BLOCK_M, BLOCK_D
    )
    q_mask = t_ok[:, None, None] & d_ok[None, None, :]
    q_offs = _head_offsets(b, h, t, d, sqb, sqh, sqt, sqd)
    q = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32)
    do_offs = _head_offsets(b, h, t, d, sdb, sdh, sdt, sdd)
    do = tl.load(do_ptr + do_offs, mask=q_mask, other=0.0).to(tl.float32)
    o_offs = _head_offsets(b, h, t, d, sob, soh, sot, sod)
    o = tl.load(o_ptr + o_offs, mask=q_mask, other=0.0).to(tl.float32)
    row_offs = (b * KV_HEADS * GROUPS + h[None, :]) * length + t[:, None]  # (M, G)
    lse = tl.load(lse_ptr + row_offs, mask=t_ok[:, None], other=0.0)
    delta = tl.sum(do * o, axis=2)  # rowsum(dO * O) = rowsum(P * dP); the dK/dV pass reads it
    tl.store(delta_ptr + row_offs, delta, mask=t_ok[:, None])
    dq = tl.zeros((BLOCK_M, GROUPS, BLOCK_D), tl.float32)
    k_base = k_ptr + b * skb + kv * skh
    v_base = v_ptr + b * svb + kv * svh
    for j in range(0, n_exact):
        rows = t - tl.load(dist_ptr + j)
        ok = t_ok & (rows >= 0)
        mask = ok[:, None] & d_ok[None, :]
        kt, vt = _kv_rows(k_base, v_base, rows, d, mask, skt, skd, svt, svd)
        _, ds = _score_gradients(q, do, kt, vt, ok, lse, delta, scale)
        dq += ds[:, :, None] * kt[:, None, :] * scale
    pid = pid_bh * tl.num_programs(0) + pid_m
    r_idx = tl.arange(0, MAX_RUNGS)
    dfrac = tl.zeros((MAX_RUNGS,), tl.float32)
    for j in range(0, n_rungs):
        f = tl.load(frac_ptr + j).to(tl.float32)
        rows = t - tl.load(lo_ptr + j)
        ok = t_ok & (rows >= 0)
        mask = ok[:, None] & d_ok[None, :]
        upper = tl.maximum(rows - 1, 0)  # the rung's first row: row -1 -> row 0
        k_lo, v_lo = _kv_rows(k_base, v_base, rows, d, mask, skt, skd, svt, svd)
        k_hi, v_hi = _kv_rows(k_base, v_base, upper, d, mask, skt, skd, svt, svd)
        kt = k_lo * (1.0 - f) + k_hi * f
        p, ds = _score_gradients(q, do, kt, v_lo * (1.0 - f) + v_hi * f, ok, lse, delta, scale)
        dq += ds[:, :, None] * kt[:, None, :] * scale
        # d/dfrac of the rung: score moves by q.(k_hi - k_lo) * scale, value by v_hi - v_lo
        ds_k = tl.sum(q * (k_hi - k_lo)[:, None, :], axis=2) * scale
        dv_v = tl.sum(do * (v_hi - v_lo)[:, None, :], axis=2)
        part = tl.sum(tl.sum(ds * ds_k + p * dv_v, axis=1), axis=0)
        dfrac += tl.where(r_idx == j, part, 0.0)
    tl.store(dfrac_ptr + pid * MAX_RUNGS + r_idx, dfrac)
    tl.store(dq_ptr + q_offs, dq.to(dq_ptr.dtype.element_ty), mask=q_mask)


@triton.jit
def _query_terms(
    q_ptr, do_ptr, lse_ptr, delta_ptr, kt, vt, t, ok, b, h, length,
    sqb, sqh, sqt, sqd, sdb, sdh, sdt, sdd, d, d_ok, scale,
    KV_HEADS: tl.constexpr, GROUPS: tl.constexpr,
):  # fmt: skip
    """For key rows kt/vt (N, D) seen by query rows t (N,): sum over the group's heads of
    dS * q * scale and P * dO, each (N, D)."""
    mask = ok[:, None, None] & d_ok[None, None, :]
    q = tl.load(q_ptr + _head_offsets(b, h, t, d, sqb, sqh, sqt, sqd), mask=mask, other=0.0)
    do = tl.load(do_ptr + _head_offsets(b, h, t, d, sdb, sdh, sdt, sdd), mask=mask, other=0.0)
    q = q.to(tl.float32)  # (N, G, D)
    do = do.to(tl.float32)
    row_offs = (b * KV_HEADS * GROUPS + h[None, :]) * length + t[:, None]
    lse = tl.load(lse_ptr + row_offs, mask=ok[:, None], other=0.0)
    delta = tl.load(delta_ptr + row_offs, mask=ok[:, None], other=0.0)
    p, ds = _score_gradients(q, do, kt, vt, ok, lse, delta, scale)
    dk = tl.sum(ds[:, :, None] * q, axis=1) * scale
    dv = tl.sum(p[:, :, None] * do, axis=1)
    return dk, dv


@triton.jit
def _dkv_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
    dist_ptr, lo_ptr, frac_ptr,
    n_exact, n_rungs, length, scale,
    sqb, sqh, sqt, sqd,
    skb, skh, skt, skd,
    svb, svh, svt, svd,
    sdb, sdh, sdt, sdd,
    sgb, sgh, sgt, sgd,
    KV_HEADS: tl.constexpr, GROUPS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    b, kv, j, j_ok, h, d, d_ok = _group_tile(
        tl.program_id(0), tl.program_id(1), length, KV_HEADS, GROUPS, HEAD_DIM, BLOCK_N, BLOCK_D
    )  # j: the key rows
    k_base = k_ptr + b * skb + kv * skh
    v_base = v_ptr + b * svb + kv * svh
    mask = j_ok[:, None] & d_ok[None, :]
    kt, vt = _kv_rows(k_base, v_base, j, d, mask, skt, skd, svt, svd)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    for i in range(0, n_exact):
        dist = tl.load(dist_ptr + i)
        t = j + dist  # query rows that read key row j at this distance
        ok = j_ok & (t < length)
        dk_i, dv_i = _query_terms(
            q_ptr, do_ptr, lse_ptr, delta_ptr, kt, vt, t, ok, b, h, length,
            sqb, sqh, sqt, sqd, sdb, sdh, sdt, sdd, d, d_ok, scale, KV_HEADS, GROUPS,
        )  # fmt: skip
        dk += dk_i
        dv += dv_i
    for i in range(0, n_rungs):
        lo = tl.load(lo_ptr + i)
        f = tl.load(frac_ptr + i).to(tl.float32)
        prev = tl.maximum(j - 1, 0)  # query j + lo's upper tap (row -1 -> row 0)
        next_ok = (j + 1) < length
        k_prev, v_prev = _kv_rows(k_base, v_base, prev, d, mask, skt, skd, svt, svd)
        next_mask = next_ok[:, None] & d_ok[None, :]
        k_next, v_next = _kv_rows(k_base, v_base, j + 1, d, next_mask, skt, skd, svt, svd)
        # key row j is the lower tap of query j + lo (whose upper tap is row j - 1) ...
        t = j + lo
        ok = j_ok & (t < length)
        dk_i, dv_i = _query_terms(
            q_ptr, do_ptr, lse_ptr, delta_ptr,
            kt * (1.0 - f) + k_prev * f, vt * (1.0 - f) + v_prev * f,
            t, ok, b, h, length,
            sqb, sqh, sqt, sqd, sdb, sdh, sdt, sdd, d, d_ok, scale, KV_HEADS, GROUPS,
        )  # fmt: skip
        # at the rung's first row (j = 0) both taps read row 0: it gets the whole term
        w_lo = tl.where(j == 0, 1.0, 1.0 - f)[:, None]
        dk += dk_i * w_lo
        dv += dv_i * w_lo
        # ... and the upper tap of query j + lo + 1 (whose lower tap is row j + 1)
        t = j + lo + 1
        ok = j_ok & (t < length)
        dk_i, dv_i = _query_terms(
            q_ptr, do_ptr, lse_ptr, delta_ptr,
            k_next * (1.0 - f) + kt * f, v_next * (1.0 - f) + vt * f,
            t, ok, b, h, length,
            sqb, sqh, sqt, sqd, sdb, sdh, sdt, sdd, d, d_ok, scale, KV_HEADS, GROUPS,
        )  # fmt: skip
        dk += dk_i * f
        dv += dv_i * f
    offs = b * sgb + kv * sgh + j[:, None] * sgt + d[None, :] * sgd  # dk, dv: contiguous
    tl.store(dk_ptr + offs, dk.to(dk_ptr.dtype.element_ty), mask=mask)
    tl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty), mask=mask)


def supported(q: Tensor, k: Tensor, slots: KeySlots) -> bool:
    """Shapes and slots this kernel handles (else the torch path runs)."""
    groups = q.shape[1] // k.shape[1]
    return (
        slots.n_absolute == 0
        and groups & (groups - 1) == 0
        and q.shape[-1] <= 256
        and q.dtype in (torch.float16, torch.bfloat16, torch.float32)
    )


def _blocks(groups: int, length: int) -> int:
    """Query (or key) positions per program: about 128 rows of the group, at least 16."""
    return max(16, min(triton.next_power_of_2(max(1, length)), 128 // groups))


def _warps(head_dim: int) -> int:
    """Warps per program: the (block, G, D) float32 tiles need the registers of 8 at D >= 64."""
    return 8 if head_dim >= 64 else 4


def _slot_tensors(slots: KeySlots, device, dtype):
    distances = slots.distances.to(device=device, dtype=torch.int32).contiguous()
    if slots.n_rungs:
        keep = slots.rung_valid.to(device)
        # invalid rungs keep their place (frac's gradient is indexed by rung) but see no key:
        # a lo beyond any position masks every row
        big = torch.iinfo(torch.int32).max // 2
        lo = torch.where(keep, slots.rung_lo.to(device), big).to(torch.int32).contiguous()
        frac = slots.rung_frac.detach().to(device=device, dtype=torch.float32).contiguous()
    else:
        lo = torch.zeros(1, dtype=torch.int32, device=device)
        frac = torch.zeros(1, dtype=torch.float32, device=device)
    return distances, lo, frac


class _TritonAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, frac_in, slots: KeySlots, block_m: int | None):
        batch, heads, length, head_dim = q.shape
        kv_heads = k.shape[1]
        groups = heads // kv_heads
        distances, lo, frac = _slot_tensors(slots, q.device, q.dtype)
        block = block_m or _blocks(groups, length)
        out = torch.empty_like(q)
        lse = torch.empty(batch, heads, length, device=q.device, dtype=torch.float32)
        grid = (triton.cdiv(length, block), batch * kv_heads)
        _forward_kernel[grid](
            q, k, v, out, lse, distances, lo, frac,
            distances.numel(), slots.n_rungs, length, head_dim**-0.5,
            *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            KV_HEADS=kv_heads, GROUPS=groups, HEAD_DIM=head_dim,
            BLOCK_M=block, BLOCK_D=triton.next_power_of_2(head_dim), num_warps=_warps(head_dim),
        )  # fmt: skip
        ctx.save_for_backward(q, k, v, out, lse, distances, lo, frac)
        ctx.block, ctx.n_rungs, ctx.frac_dtype = block, slots.n_rungs, frac_in.dtype
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse, distances, lo, frac = ctx.saved_tensors
        batch, heads, length, head_dim = q.shape
        kv_heads = k.shape[1]
        groups = heads // kv_heads
        block, n_rungs = ctx.block, ctx.n_rungs
        # grad_out is read through its strides (the model hands it in q's layout): no copy
        delta = torch.empty(batch, heads, length, device=q.device, dtype=torch.float32)
        dq = torch.empty_like(q)
        # one program owns each key row: it stores the finished gradient in the input dtype
        dk = torch.empty(k.shape, device=k.device, dtype=k.dtype)
        dv = torch.empty(v.shape, device=v.device, dtype=v.dtype)
        grid = (triton.cdiv(length, block), batch * kv_heads)
        max_rungs = triton.next_power_of_2(max(1, n_rungs))
        dfrac = torch.zeros(grid[0] * grid[1], max_rungs, device=q.device, dtype=torch.float32)
        common = dict(KV_HEADS=kv_heads, GROUPS=groups, HEAD_DIM=head_dim)
        common["num_warps"] = _warps(head_dim)
        _dq_kernel[grid](  # also writes delta, which the dK/dV pass reads
            q, k, v, out, grad_out, lse, delta, dq, dfrac, distances, lo, frac,
            distances.numel(), n_rungs, length, head_dim**-0.5,
            *q.stride(), *k.stride(), *v.stride(), *out.stride(), *grad_out.stride(),
            **common, BLOCK_M=block, BLOCK_D=triton.next_power_of_2(head_dim),
            MAX_RUNGS=max_rungs,
        )  # fmt: skip
        _dkv_kernel[grid](
            q, k, v, grad_out, lse, delta, dk, dv, distances, lo, frac,
            distances.numel(), n_rungs, length, head_dim**-0.5,
            *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(), *dk.stride(),
            **common, BLOCK_N=block, BLOCK_D=triton.next_power_of_2(head_dim),
        )  # fmt: skip
        d_frac = dfrac.sum(0)[:n_rungs].to(ctx.frac_dtype) if n_rungs else None
        return dq, dk, dv, d_frac, None, None


def triton_attention(
    q: Tensor, k: Tensor, v: Tensor, slots: KeySlots, block: int | None = None
) -> Tensor:
    """Causal attention of q (B, H, T, D) over the relative slots of k, v (B, KV, T, D);
    ``block`` (a power of two) overrides the positions per program."""
    frac = slots.rung_frac if slots.n_rungs else q.new_empty(0)
    return _TritonAttention.apply(q, k, v, frac, slots, block)
