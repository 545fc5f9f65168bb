"""Linear-time sparse attention on the CPU: one small matrix product per query position.

Every query position ``t`` of a KV group sees the same kinds of slots, shifted with ``t``:
the key rows ``t - d`` of the exact distances, two taps ``t - lo`` and ``t - lo - 1`` per
interpolated rung, and the absolute keys of its block. This path walks the positions in
chunks; per chunk it

1. gathers the slot rows of K and V together (one ``index_select`` from a packed, zero-padded
   ``[K * scale | V]`` copy, so row ``-1`` reads zeros and no score is ever rescaled) and
   blends each rung's two taps in place (``lerp``; ``frac`` stays a tensor);
2. multiplies the G query heads of the group with their S slot rows as a batch of
   (G x D) @ (D x S) products, one per (position, KV head): a K/V row is read once for the
   whole group, never repeated per head (no ``repeat_interleave``);
3. saves the probabilities (B, T, H, S): O(T * S) memory, so the backward needs neither a
   second score product nor a log-sum-exp.

The backward gathers again, forms dS = P * (dP - rowsum(P * dP)) and returns key and value
gradients to their rows by the mirrored shifts: key row ``j`` receives from query rows
``j + d``. The contiguous window 0..W0-1 is one strided reduction per chunk, every other
distance (and rung tap) one contiguous slice add for K and V together; only absolute keys
use ``index_add_``. No [T, T] tensor, no per-row scatter, no float copies of fp32 inputs.

The slot lists are read on the host once per call (CPU tensors: no device sync). Long
sequences are split over ``torch.get_num_threads()`` Python threads, each running
single-threaded ops on its own contiguous range of chunks into its own gradient
accumulator: no per-op barrier between cores (which costs most on a shared machine).
Inputs in the model's layout ((B, T, H, D) memory viewed as (B, H, T, D)) are read and
written in place; other layouts are copied chunk by chunk.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from .slots import KeySlots

CHUNK_BYTES = 4 << 20
"""Target size of one chunk's gathered [K | V] rows; the bench tunes it (see lit_sparse.bench)."""
MIN_POSITIONS_PER_THREAD = 512
"""Sequences with fewer (batch x positions) per thread stay on the calling thread."""


@dataclass
class _Plan:
    """The slots of one call, resolved on the host against the running length."""

    batch: int
    length: int
    kv_heads: int
    groups: int
    head_dim: int
    pad: int
    """Zero rows in front of each sequence of the packed K/V (row t is padded row t + pad)."""
    n_abs: int
    exact: list[int]
    rung_lo: list[int]
    window: int
    """exact[:window] == [0, 1, ..., window - 1]: summed by one strided reduction."""
    rung_keep: Tensor | None
    """(R,) indices of the kept rungs (valid somewhere in the sequence) into slots.rung_*."""
    frac: Tensor | None
    """(R,) weight of the upper tap of each kept rung (detached, accumulation dtype)."""
    abs_rows: Tensor | None
    """(T, KV, A) row of each absolute key in the flattened padded K/V of batch 0."""
    bias: Tensor | None
    """(rows, S) additive mask (0 or -inf) of the first ``rows`` positions."""
    chunk: int

    @property
    def n_exact(self) -> int:
        return len(self.exact)

    @property
    def n_rungs(self) -> int:
        return len(self.rung_lo)

    @property
    def slots(self) -> int:
        """Columns of a score tile, in the order [absolute | exact | rungs]."""
        return self.n_abs + self.n_exact + self.n_rungs

    @property
    def gathered(self) -> int:
        """Rows gathered per (position, KV head): the slots, then each rung's upper tap."""
        return self.slots + self.n_rungs

    @property
    def padded_length(self) -> int:
        return self.length + self.pad


def _plan(slots: KeySlots, q: Tensor, k: Tensor, dtype: torch.dtype) -> _Plan:
    batch, heads, length, head_dim = q.shape
    kv_heads = k.shape[1]
    exact = [d for d in slots.distances.tolist() if d < length]  # larger ones never valid
    rung_lo: list[int] = []
    rung_keep = frac = None
    if slots.n_rungs:
        lo_all, valid_all = slots.rung_lo.tolist(), slots.rung_valid.tolist()
        keep = [r for r, lo in enumerate(lo_all) if valid_all[r] and lo < length]
        rung_lo = [lo_all[r] for r in keep]
        rung_keep = torch.tensor(keep, dtype=torch.long)
        frac = slots.rung_frac.detach().to(device="cpu", dtype=dtype)[rung_keep]
    n_abs = slots.n_absolute
    pad = max([1, *exact, *(lo + 1 for lo in rung_lo)])
    window = 0
    while window < len(exact) and exact[window] == window:
        window += 1
    relative = exact + rung_lo  # a rung is valid where t >= lo
    rows = length if n_abs else min(length, max(relative, default=0))
    abs_rows = bias = None
    if rows:
        positions = torch.arange(rows)
        valid = [positions[:, None] >= torch.tensor(relative, dtype=torch.long)[None, :]]
        if n_abs:
            keys = slots.block_keys.to("cpu")[positions // slots.block_size]  # (T, A)
            ok = (keys >= 0) & (positions[:, None] - keys >= slots.min_abs_distance)
            valid.insert(0, ok)
            abs_rows = ((keys.clamp(min=-1) + pad) * kv_heads)[:, None, :] + torch.arange(kv_heads)[
                None, :, None
            ]
        bias = torch.zeros(rows, n_abs + len(relative), dtype=dtype)
        bias.masked_fill_(~torch.cat(valid, dim=1), float("-inf"))
    row_bytes = (n_abs + len(exact) + 2 * len(rung_lo)) * kv_heads * 2 * head_dim * 4
    chunk = max(16, min(length, CHUNK_BYTES // max(1, row_bytes)))
    return _Plan(
        batch=batch,
        length=length,
        kv_heads=kv_heads,
        groups=heads // kv_heads,
        head_dim=head_dim,
        pad=pad,
        n_abs=n_abs,
        exact=exact,
        rung_lo=rung_lo,
        window=window,
        rung_keep=rung_keep,
        frac=frac,
        abs_rows=abs_rows,
        bias=bias,
        chunk=chunk,
    )


def _position_major(x: Tensor) -> Tensor | None:
    """x (B, heads, T, D) as a contiguous (B, T, heads, D) view, or None (needs copies)."""
    xt = x.transpose(1, 2)
    return xt if xt.is_contiguous() else None


@contextmanager
def _one_thread_per_worker():
    """Run every op of the call single-threaded on its thread (see ``_run``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield threads
    finally:
        torch.set_num_threads(threads)


_local = threading.local()
_CACHED_WORKSPACES = 8


def _chunks(plan: _Plan, dtype: torch.dtype, backward: bool) -> _Chunks:
    """This thread's buffers for ``plan``, kept across calls: fresh multi-MB buffers cost
    page faults on every call, often more than the chunk's arithmetic."""
    key = (
        plan.chunk,
        plan.kv_heads,
        plan.groups,
        plan.head_dim,
        plan.pad,
        plan.n_abs,
        tuple(plan.exact),
        tuple(plan.rung_lo),
        dtype,
        backward,
    )
    cache = getattr(_local, "workspaces", None)
    if cache is None:
        cache = _local.workspaces = {}
    if key in cache:
        cache[key] = cache.pop(key)  # most recently used last
    else:
        while len(cache) >= _CACHED_WORKSPACES:
            cache.pop(next(iter(cache)))
        cache[key] = _Chunks(plan, dtype, backward)
    return cache[key]


class _Chunks:
    """Per-thread buffers reused by every chunk (no allocation in the loop)."""

    def __init__(self, plan: _Plan, dtype: torch.dtype, backward: bool):
        c, kv, g, d, s = plan.chunk, plan.kv_heads, plan.groups, plan.head_dim, plan.slots
        n = c * kv
        a = plan.n_abs
        self.index = torch.empty(c, kv, plan.gathered, dtype=torch.long)
        if a:  # the relative columns of chunk 0; later chunks add an offset
            relative = plan.exact + plan.rung_lo + [lo + 1 for lo in plan.rung_lo]
            self.rel0 = (
                (torch.arange(c)[:, None, None] + plan.pad - torch.tensor(relative)) * kv
                + torch.arange(kv)[None, :, None]
            ).contiguous()
        else:
            self.rel0 = torch.empty(0, dtype=torch.long)
            self.index.copy_(
                (
                    torch.arange(c)[:, None, None]
                    + plan.pad
                    - torch.tensor(plan.exact + plan.rung_lo + [lo + 1 for lo in plan.rung_lo])
                )
                * kv
                + torch.arange(kv)[None, :, None]
            )
        self.index_c = torch.empty(c * kv * plan.gathered, dtype=torch.long)
        self.rows = torch.empty(n * plan.gathered, 2 * d, dtype=dtype)
        self.scores = torch.empty(n, g, s, dtype=dtype)
        self.q = torch.empty(c, kv * g, d, dtype=dtype)  # head-major inputs: copies per chunk
        self.o = torch.empty(c, kv * g, d, dtype=dtype)
        if backward:
            w = max(plan.window - 1, 0)
            self.margin = w * kv  # zero (position, KV) rows around the chunk for the window sum
            self.dkv = torch.zeros(2, n + 2 * self.margin, s, d, dtype=dtype)  # dK | dV planes
            self.do = torch.empty(c, kv * g, d, dtype=dtype)
            self.dp = torch.empty(n, g, s, dtype=dtype)
            self.delta = torch.empty(n, g, 1, dtype=dtype)
            if plan.n_rungs:
                r = plan.n_rungs
                self.diff = torch.empty(n, r, 2, d, dtype=dtype)
                self.hi = torch.empty(2, c, kv, r, d, dtype=dtype)
                self.prod = torch.empty(2, n, r, d, dtype=dtype)


def _gather(plan: _Plan, ws: _Chunks, kv_flat: Tensor, b: int, s: int, c: int) -> Tensor:
    """Slot rows of positions s..s+c-1 of batch b: (c * KV, gathered, 2, D)."""
    kv = plan.kv_heads
    base = (b * plan.padded_length + s) * kv
    size = c * kv * plan.gathered
    index = ws.index_c[:size]
    if plan.n_abs:
        full = ws.index[:c]
        torch.add(ws.rel0[:c], base, out=full[:, :, plan.n_abs :])
        torch.add(
            plan.abs_rows[s : s + c], b * plan.padded_length * kv, out=full[:, :, : plan.n_abs]
        )
        index = full.view(-1)
    else:
        torch.add(ws.index.view(-1)[:size], base, out=index)
    rows = ws.rows[:size]
    torch.index_select(kv_flat, 0, index, out=rows)
    return rows.view(c * kv, plan.gathered, 2, plan.head_dim)


def _mask(plan: _Plan, scores: Tensor, s: int, c: int) -> None:
    """Add the -inf bias of invalid slots (only the first positions, or all with absolutes)."""
    if plan.bias is None or s >= plan.bias.shape[0]:
        return
    rows = min(c, plan.bias.shape[0] - s)
    view = scores.view(c, plan.kv_heads, plan.groups, plan.slots)[:rows]
    view.add_(plan.bias[s : s + rows, None, None, :])


def _forward_range(plan, q, out, probs, kv_flat, start, stop, ws):
    kv, g, d, slots, r = plan.kv_heads, plan.groups, plan.head_dim, plan.slots, plan.n_rungs
    m0 = plan.n_abs + plan.n_exact
    q_pm, out_pm = _position_major(q), _position_major(out)
    frac = plan.frac[None, :, None, None] if r else None
    for b in range(plan.batch):
        for s in range(start, stop, plan.chunk):
            c = min(plan.chunk, stop - s)
            n = c * kv
            rows = _gather(plan, ws, kv_flat, b, s, c)
            if r:  # virtual rung rows lo + frac * (hi - lo), K and V at once
                rows[:, m0 : m0 + r].lerp_(rows[:, slots:], frac)
            keys, values = rows[:, :slots, 0], rows[:, :slots, 1]  # (n, S, D)
            if q_pm is not None:
                q_c = q_pm[b, s : s + c].view(n, g, d)
            else:
                q_c = ws.q[:c]
                q_c.copy_(q[b, :, s : s + c].transpose(0, 1))
                q_c = q_c.view(n, g, d)
            scores = ws.scores[:n]
            torch.bmm(q_c, keys.transpose(1, 2), out=scores)  # keys carry the 1/sqrt(D)
            _mask(plan, scores, s, c)
            p = probs[b, s : s + c].view(n, g, slots)
            torch.ops.aten._softmax.out(scores, -1, False, out=p)
            if out_pm is not None:
                torch.bmm(p, values, out=out_pm[b, s : s + c].view(n, g, d))
            else:
                o = ws.o[:c]
                torch.bmm(p, values, out=o.view(n, g, d))
                out[b, :, s : s + c].copy_(o.transpose(0, 1))


def _backward_range(plan, q, grad_out, probs, kv_flat, start, stop, ws, acc, dq, dfrac):
    """Gradients of positions start..stop-1 into dq and the (2, B*(T+pad), KV, D) ``acc``."""
    kv, g, d, slots = plan.kv_heads, plan.groups, plan.head_dim, plan.slots
    a, r, w = plan.n_abs, plan.n_rungs, plan.window
    m0 = a + plan.n_exact
    q_pm, do_pm, dq_pm = _position_major(q), _position_major(grad_out), _position_major(dq)
    margin = ws.margin
    far = list(enumerate(plan.exact[w:], start=a + w))
    taps = list(enumerate(plan.rung_lo))
    if r:
        frac = plan.frac[None, None, None, :, None]
        keep = 1 - frac
        frac_rows = plan.frac[None, :, None, None]
    acc_flat = acc.view(2, -1, d)
    for b in range(plan.batch):
        row0 = b * plan.padded_length + plan.pad
        for s in range(start, stop, plan.chunk):
            c = min(plan.chunk, stop - s)
            n = c * kv
            rows = _gather(plan, ws, kv_flat, b, s, c)
            if r:
                diff = ws.diff[:n]
                torch.sub(rows[:, slots:], rows[:, m0 : m0 + r], out=diff)
                rows[:, m0 : m0 + r].addcmul_(diff, frac_rows)
            keys, values = rows[:, :slots, 0], rows[:, :slots, 1]
            if q_pm is not None:
                q_c = q_pm[b, s : s + c].view(n, g, d)
            else:
                q_c = ws.q[:c]
                q_c.copy_(q[b, :, s : s + c].transpose(0, 1))
                q_c = q_c.view(n, g, d)
            if do_pm is not None:
                do_c = do_pm[b, s : s + c].view(n, g, d)
            else:
                do_c = ws.do[:c]
                do_c.copy_(grad_out[b, :, s : s + c].transpose(0, 1))
                do_c = do_c.view(n, g, d)
            p = probs[b, s : s + c].view(n, g, slots)
            ds = ws.dp[:n]
            torch.bmm(do_c, values.transpose(1, 2), out=ds)  # dP
            ds.mul_(p)
            delta = ws.delta[:n]
            torch.sum(ds, -1, keepdim=True, out=delta)
            ds.addcmul_(p, delta, value=-1)  # dS = P * (dP - rowsum(P * dP))
            if dq_pm is not None:
                torch.bmm(ds, keys, out=dq_pm[b, s : s + c].view(n, g, d))
            else:
                o = ws.o[:c]
                torch.bmm(ds, keys, out=o.view(n, g, d))
                dq[b, :, s : s + c].copy_(o.transpose(0, 1))
            planes = ws.dkv[:, margin : margin + n]  # (2, n, S, D): d(K*scale) and dV per slot
            torch.bmm(ds.transpose(1, 2), q_c, out=planes[0])
            torch.bmm(p.transpose(1, 2), do_c, out=planes[1])
            if c < plan.chunk and margin:  # rows after a short last chunk hold stale values
                ws.dkv[:, margin + n : 2 * margin + n].zero_()
            body = planes.view(2, c, kv, slots, d)
            lo = row0 + s  # padded row of position s
            if w:  # rows lo-(w-1) .. lo+c-1 receive sum_m body[row + m, m] for m < w
                buf = ws.dkv
                st = buf.stride()
                view = buf.as_strided(
                    (2, c + w - 1, kv, w, d),
                    (st[0], kv * st[1], st[1], kv * st[1] + st[2], 1),
                    buf.storage_offset() + a * st[2],
                )
                acc[:, lo - (w - 1) : lo + c].add_(view.sum(3))
            for col, dist in far:
                acc[:, lo - dist : lo - dist + c].add_(body[:, :, :, col])
            if r:
                tap = body[:, :, :, m0:]  # (2, c, KV, R, D) gradient of the virtual rows
                prod = ws.prod[:, :n].view(2, c, kv, r, d)
                # dfrac = sum <dK_virtual, K_hi - K_lo> + <dV_virtual, V_hi - V_lo>
                torch.mul(tap, ws.diff[:n].view(c, kv, r, 2, d).permute(3, 0, 1, 2, 4), out=prod)
                dfrac += prod.sum((0, 1, 2, 4))
                hi = ws.hi[:, :c]
                torch.mul(tap, frac, out=hi)
                tap.mul_(keep)
                for j, lo_d in taps:
                    acc[:, lo - lo_d : lo - lo_d + c].add_(tap[:, :, :, j])
                    acc[:, lo - lo_d - 1 : lo - lo_d - 1 + c].add_(hi[:, :, :, j])
            if a:
                index = ws.index[:c, :, :a].reshape(-1)
                acc_flat.index_add_(1, index, body[:, :, :, :a].reshape(2, -1, d))


class _TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, frac_in, slots: KeySlots):
        dtype = torch.promote_types(q.dtype, torch.float32)
        out_dtype = q.dtype
        plan = _plan(slots, q, k, dtype)
        batch, heads, length, head_dim = q.shape
        kv = k.shape[1]
        with torch.autocast("cpu", enabled=False), _one_thread_per_worker() as threads:
            q = q if q.dtype == dtype else q.to(dtype)
            packed = torch.empty(batch, plan.padded_length, kv, 2, head_dim, dtype=dtype)
            packed[:, : plan.pad].zero_()
            torch.mul(k.transpose(1, 2), head_dim**-0.5, out=packed[:, plan.pad :, :, 0])
            packed[:, plan.pad :, :, 1] = v.transpose(1, 2)
            kv_flat = packed.view(-1, 2 * head_dim)
            if _position_major(q) is not None:  # keep the caller's layout
                out = torch.empty(batch, length, heads, head_dim, dtype=dtype).transpose(1, 2)
            else:
                out = torch.empty(batch, heads, length, head_dim, dtype=dtype)
            probs = torch.empty(batch, length, kv, heads // kv, plan.slots, dtype=dtype)
            parts = _split(plan, threads)

            def work(part: int, ws: _Chunks) -> None:
                _forward_range(plan, q, out, probs, kv_flat, *parts[part], ws)

            _run(plan, dtype, False, work, len(parts))
            out = out.to(out_dtype)
        ctx.plan, ctx.n_frac, ctx.frac_dtype = plan, slots.n_rungs, frac_in.dtype
        ctx.dtypes = (k.dtype, v.dtype)
        ctx.save_for_backward(q, packed, probs)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, packed, probs = ctx.saved_tensors
        plan: _Plan = ctx.plan
        dtype = q.dtype
        batch, _, length, head_dim = q.shape
        kv = plan.kv_heads
        with torch.autocast("cpu", enabled=False), _one_thread_per_worker() as threads:
            grad_out = grad_out if grad_out.dtype == dtype else grad_out.to(dtype)
            kv_flat = packed.view(-1, 2 * head_dim)
            dq = torch.empty_like(q)  # q's layout
            parts = _split(plan, threads)
            shape = (2, batch * plan.padded_length, kv, head_dim)
            accs = [torch.zeros(shape, dtype=dtype) for _ in parts]
            dfracs = [torch.zeros(plan.n_rungs, dtype=dtype) for _ in parts]

            def work(part: int, ws: _Chunks) -> None:
                start, stop = parts[part]
                _backward_range(
                    plan, q, grad_out, probs, kv_flat, start, stop, ws, accs[part], dq, dfracs[part]
                )

            _run(plan, dtype, True, work, len(parts))
            acc, dfrac = accs[0], dfracs[0]
            for other, other_frac in zip(accs[1:], dfracs[1:], strict=True):
                acc += other
                dfrac += other_frac
            acc = acc.view(2, batch, plan.padded_length, kv, head_dim)[:, :, plan.pad :]
            dk = acc[0].mul_(head_dim**-0.5).transpose(1, 2)  # the keys were packed scaled
            dv = acc[1].transpose(1, 2)
            d_frac = None
            if plan.rung_keep is not None:
                d_frac = torch.zeros(ctx.n_frac, dtype=dtype)
                d_frac[plan.rung_keep] = dfrac
                d_frac = d_frac.to(ctx.frac_dtype)
            k_dtype, v_dtype = ctx.dtypes
            dk, dv = dk.to(k_dtype), dv.to(v_dtype)
        return dq, dk, dv, d_frac, None


def _split(plan: _Plan, threads: int) -> list[tuple[int, int]]:
    """Contiguous position ranges on chunk boundaries, one per worker thread."""
    length, chunk = plan.length, plan.chunk
    threads = min(threads, plan.batch * length // MIN_POSITIONS_PER_THREAD)
    n_chunks = math.ceil(length / chunk)
    threads = max(1, min(threads, n_chunks))
    per = math.ceil(n_chunks / threads)
    bounds = [min(length, i * per * chunk) for i in range(threads + 1)]
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if lo < hi]


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor(workers: int) -> ThreadPoolExecutor:
    """A persistent pool whose threads run single-threaded torch ops."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < workers:
            old, _pool = (
                _pool,
                ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lit_sparse"),
            )
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def _run(plan: _Plan, dtype: torch.dtype, backward: bool, work, n_parts: int) -> None:
    """``work(part, buffers)`` for every part: on this thread if one, else in the pool.

    Every op runs single-threaded (the caller holds ``_one_thread_per_worker``): a
    multi-threaded op waits at a barrier for its slowest thread, and on a shared machine
    that is often one the scheduler has paused, for milliseconds per op. The parts run
    side by side instead, each on its own thread without barriers.
    """
    if n_parts == 1:
        work(0, _chunks(plan, dtype, backward))
        return

    def task(part: int) -> None:
        torch.set_num_threads(1)
        with torch.no_grad():  # grad mode is per thread; this math is never recorded
            work(part, _chunks(plan, dtype, backward))

    futures = [_executor(n_parts).submit(task, part) for part in range(n_parts)]
    for future in futures:
        future.result()


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Causal attention of q (B, H, T, D) over the slots of k, v (B, KV, T, D), on the CPU."""
    frac = slots.rung_frac if slots.n_rungs else q.new_empty(0)
    return _TiledAttention.apply(q, k, v, frac, slots)
