"""Linear-time sparse attention on the CPU: per-position products over shifted slot rows.

Every query position ``t`` of a KV group sees the same kinds of slots, shifted with ``t``:
the key rows ``t - d`` of the exact distances, two taps ``t - lo`` and ``t - lo - 1`` per
interpolated rung, and the absolute keys of its block. K (pre-scaled by 1/sqrt(D)) and V
are copied once into zero-padded (B, T + pad, KV, D) arrays, so row ``-1`` reads zeros. The
positions are walked in chunks that fit the cache; per chunk

1. the scores are a sampled matrix product (``torch.sparse.sampled_addmm``) of the chunk's
   query rows with K over the CSR pattern of the slots: each (position, head) row meets
   exactly its own slot rows, read in place (no gathered copy); a rung's score is
   ``s_lo + frac * (s_hi - s_lo)`` (``frac`` stays a tensor, ``s_hi - s_lo`` is saved for its
   gradient);
2. the slot rows of V are gathered once per (position, KV head) with ``index_select`` and
   shared by the group's G query heads in a batch of (G x S) @ (S x D) products (rungs blend
   their two rows with ``lerp``); K/V are never repeated per head;
3. the probabilities (B, T, H, S) are saved: O(T * S) memory, so the backward needs no
   second score pass and no log-sum-exp.

The backward forms dP with the same sampled product (dO against V), dS = P * (dP - rowsum(P
* dP)), dQ from the gathered K rows, and dK/dV per slot with batched (S x G) @ (G x D)
products, returned to their rows by the mirrored shifts (key row ``j`` receives from query
rows ``j + d``): the contiguous window 0..W0-1 is one strided reduction per chunk, every
other distance (and rung tap) one contiguous slice add for K and V together; only absolute
keys use ``index_add_``. No [T, T] tensor, no per-row scatter, no float copies of fp32
inputs.

The slot lists are read on the host once per call (CPU tensors: no device sync). Every op
runs single-threaded; long sequences are split over ``torch.get_num_threads()`` Python
threads, each on its own contiguous range of chunks and its own gradient accumulator, so
cores never wait at a per-op barrier (which costs most on a shared machine). Inputs in the
model's layout ((B, T, H, D) memory viewed as (B, H, T, D)) are read and written in place;
other layouts are copied chunk by chunk.
"""

from __future__ import annotations

import math
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from .slots import KeySlots

# The slot pattern is a CSR tensor only as the argument of torch.sparse.sampled_addmm;
# torch warns once per process that CSR support is beta: spend that warning here, silently.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.sparse_csr_tensor(
        torch.zeros(2, dtype=torch.long), torch.zeros(0, dtype=torch.long), torch.zeros(0), (1, 1)
    )

CHUNK_BYTES = 3 << 19
"""Target size of one chunk's gathered K (or V) rows: 1.5 MB measured best at 4k and 16k."""
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
    # sampled_addmm needs at least as many key rows as columns per pattern row
    pad = max(pad, n_abs + len(exact) + 2 * len(rung_lo))
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
    row_bytes = (n_abs + len(exact) + 2 * len(rung_lo)) * kv_heads * head_dim * 4
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
        torch.is_inference_mode_enabled(),  # inference tensors are read-only outside it
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
        n, cols = c * kv, plan.gathered
        relative = plan.exact + plan.rung_lo + [lo + 1 for lo in plan.rung_lo]
        self.rel0 = (
            (torch.arange(c)[:, None, None] + plan.pad - torch.tensor(relative, dtype=torch.long))
            * kv
            + torch.arange(kv)[None, :, None]
        ).contiguous()  # (C, KV, M + 2R) rows of chunk 0; a chunk adds its offset
        self.index = torch.empty(c, kv, cols, dtype=torch.long)
        self.columns = torch.empty(c, kv, g, cols, dtype=torch.long)  # the index per head
        self.crow = torch.arange(0, n * g * cols + 1, cols)
        self.zeros = torch.zeros(n * g * cols, dtype=dtype)
        self.rows = torch.empty(n, cols, d, dtype=dtype)
        self.q = torch.empty(c, kv * g, d, dtype=dtype)  # head-major inputs: copies per chunk
        self.o = torch.empty(c, kv * g, d, dtype=dtype)
        if backward:
            w = max(plan.window - 1, 0)
            self.margin = w * kv  # zero (position, KV) rows around the chunk for the window sum
            self.dkv = torch.zeros(2, n + 2 * self.margin, s, d, dtype=dtype)  # dK | dV planes
            self.do = torch.empty(c, kv * g, d, dtype=dtype)
            self.ds = torch.empty(n, g, s, dtype=dtype)
            self.delta = torch.empty(n, g, 1, dtype=dtype)
            if plan.n_rungs:
                self.dfrac = torch.empty(n, g, plan.n_rungs, dtype=dtype)


def _index(plan: _Plan, ws: _Chunks, b: int, s: int, c: int) -> Tensor:
    """(c, KV, gathered) rows of the flattened padded K/V that positions s..s+c-1 read."""
    kv, a = plan.kv_heads, plan.n_abs
    index = ws.index[:c]
    torch.add(ws.rel0[:c], (b * plan.padded_length + s) * kv, out=index[:, :, a:])
    if a:
        torch.add(plan.abs_rows[s : s + c], b * plan.padded_length * kv, out=index[:, :, :a])
    return index


def _sampled_scores(plan: _Plan, ws: _Chunks, index: Tensor, rows: Tensor, keys: Tensor):
    """(n, G, gathered) dot products of each query row with its own slot rows of ``keys``.

    A sampled matrix product (SDDMM) over the CSR pattern of the slots: no gathered copy of
    ``keys`` and about twice the speed of the per-position batched GEMM.
    """
    c, kv, g, cols = index.shape[0], plan.kv_heads, plan.groups, plan.gathered
    columns = ws.columns[:c]
    columns.copy_(index[:, :, None, :].expand(c, kv, g, cols))
    size = c * kv * g * cols
    pattern = torch.sparse_csr_tensor(
        ws.crow[: c * kv * g + 1],
        columns.view(-1),
        ws.zeros[:size],
        (c * kv * g, keys.shape[0]),
        check_invariants=False,
    )
    product = torch.sparse.sampled_addmm(pattern, rows, keys.t(), beta=0.0)
    return product.values().view(c * kv, g, cols)


def _mask(plan: _Plan, scores: Tensor, s: int, c: int) -> None:
    """Add the -inf bias of invalid slots (only the first positions, or all with absolutes)."""
    if plan.bias is None or s >= plan.bias.shape[0]:
        return
    rows = min(c, plan.bias.shape[0] - s)
    view = scores.view(c, plan.kv_heads, plan.groups, -1)[:rows, :, :, : plan.slots]
    view.add_(plan.bias[s : s + rows, None, None, :])


def _group_rows(x, x_pm, buffer, b, s, c):
    """The (c * H, D) query-side rows of positions s..s+c-1 (copied if x is head-major)."""
    if x_pm is not None:
        return x_pm[b, s : s + c].reshape(-1, x.shape[-1])
    buffer = buffer[:c]
    buffer.copy_(x[b, :, s : s + c].transpose(0, 1))
    return buffer.view(-1, x.shape[-1])


def _forward_range(plan, q, out, probs, sdiff, k_flat, v_flat, start, stop, ws):
    kv, g, d, slots, r = plan.kv_heads, plan.groups, plan.head_dim, plan.slots, plan.n_rungs
    m0 = plan.n_abs + plan.n_exact
    q_pm, out_pm = _position_major(q), _position_major(out)
    frac = plan.frac if r else None
    for b in range(plan.batch):
        for s in range(start, stop, plan.chunk):
            c = min(plan.chunk, stop - s)
            n = c * kv
            index = _index(plan, ws, b, s, c)
            q_c = _group_rows(q, q_pm, ws.q, b, s, c)
            scores = _sampled_scores(plan, ws, index, q_c, k_flat)  # keys carry 1/sqrt(D)
            if r:  # a rung's score: lo + frac * (hi - lo); keep hi - lo for dfrac
                lo, hi = scores[:, :, m0 : m0 + r], scores[:, :, slots:]
                diff = sdiff[b, s : s + c].view(n, g, r)
                torch.sub(hi, lo, out=diff)
                lo.addcmul_(diff, frac)
            _mask(plan, scores, s, c)
            p = probs[b, s : s + c].view(n, g, slots)
            torch.ops.aten._softmax.out(scores[:, :, :slots], -1, False, out=p)
            rows = ws.rows[:n]
            torch.index_select(v_flat, 0, index.view(-1), out=rows.view(-1, d))
            if r:  # virtual value rows
                rows[:, m0 : m0 + r].lerp_(rows[:, slots:], frac[None, :, None])
            if out_pm is not None:
                torch.bmm(p, rows[:, :slots], out=out_pm[b, s : s + c].view(n, g, d))
            else:
                o = ws.o[:c]
                torch.bmm(p, rows[:, :slots], out=o.view(n, g, d))
                out[b, :, s : s + c].copy_(o.transpose(0, 1))


def _backward_range(
    plan, q, grad_out, probs, sdiff, k_flat, v_flat, span, ws, acc, origin, dq, dfrac
):
    """Gradients of positions span[0]..span[1]-1 into dq and ``acc`` (2, B, rows, KV, D),
    whose row ``pad + t - origin`` holds the key/value gradient of position t."""
    kv, g, d, slots = plan.kv_heads, plan.groups, plan.head_dim, plan.slots
    a, r, w = plan.n_abs, plan.n_rungs, plan.window
    m0 = a + plan.n_exact
    q_pm, do_pm, dq_pm = _position_major(q), _position_major(grad_out), _position_major(dq)
    margin = ws.margin
    far = list(enumerate(plan.exact[w:], start=a + w))
    taps = list(enumerate(plan.rung_lo))
    if r:
        frac = plan.frac
        keep = 1 - frac
    rows_per_batch = acc.shape[2]
    acc = acc.view(2, -1, kv, d)
    acc_flat = acc.view(2, -1, d)
    for b in range(plan.batch):
        row0 = b * rows_per_batch + plan.pad - origin
        for s in range(*span, plan.chunk):
            c = min(plan.chunk, span[1] - s)
            n = c * kv
            index = _index(plan, ws, b, s, c)
            q_c = _group_rows(q, q_pm, ws.q, b, s, c)
            do_c = _group_rows(grad_out, do_pm, ws.do, b, s, c)
            dp = _sampled_scores(plan, ws, index, do_c, v_flat)  # dO . v of every slot row
            p = probs[b, s : s + c].view(n, g, slots)
            ds = ws.ds[:n]
            if r:  # a rung's dP: lo + frac * (hi - lo)
                lo, hi = dp[:, :, m0 : m0 + r], dp[:, :, slots:]
                hi.sub_(lo)
                lo.addcmul_(hi, frac)
                # dfrac = sum dS * (s_hi - s_lo) + P * (dP_hi - dP_lo); dS added below
                part = ws.dfrac[:n]
                torch.mul(p[:, :, m0:], hi, out=part)
            torch.mul(dp[:, :, :slots], p, out=ds)
            delta = ws.delta[:n]
            torch.sum(ds, -1, keepdim=True, out=delta)
            ds.addcmul_(p, delta, value=-1)  # dS = P * (dP - rowsum(P * dP))
            if r:
                part.addcmul_(ds[:, :, m0:], sdiff[b, s : s + c].view(n, g, r))
                dfrac += part.sum((0, 1))
            rows = ws.rows[:n]
            torch.index_select(k_flat, 0, index.view(-1), out=rows.view(-1, d))
            if r:  # virtual key rows
                rows[:, m0 : m0 + r].lerp_(rows[:, slots:], frac[None, :, None])
            keys = rows[:, :slots]
            q_c, do_c = q_c.view(n, g, d), do_c.view(n, g, d)
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
            if r:  # a virtual row's gradient goes (1 - frac) to row t - lo, frac to t - lo - 1
                for j, lo_d in taps:
                    tap = body[:, :, :, m0 + j]  # (2, c, KV, D)
                    acc[:, lo - lo_d : lo - lo_d + c].addcmul_(tap, keep[j])
                    acc[:, lo - lo_d - 1 : lo - lo_d - 1 + c].addcmul_(tap, frac[j])
            if a:
                rows_abs = index[:, :, :a].reshape(-1)
                acc_flat.index_add_(1, rows_abs, body[:, :, :, :a].reshape(2, -1, d))


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
            shape = (batch, plan.padded_length, kv, head_dim)
            k_pad, v_pad = torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype)
            k_pad[:, : plan.pad].zero_()
            v_pad[:, : plan.pad].zero_()
            torch.mul(k.transpose(1, 2), head_dim**-0.5, out=k_pad[:, plan.pad :])
            v_pad[:, plan.pad :] = v.transpose(1, 2)
            k_flat, v_flat = k_pad.view(-1, head_dim), v_pad.view(-1, head_dim)
            if _position_major(q) is not None:  # keep the caller's layout
                out = torch.empty(batch, length, heads, head_dim, dtype=dtype).transpose(1, 2)
            else:
                out = torch.empty(batch, heads, length, head_dim, dtype=dtype)
            probs = torch.empty(batch, length, kv, heads // kv, plan.slots, dtype=dtype)
            sdiff = torch.empty(batch, length, kv, heads // kv, plan.n_rungs, dtype=dtype)
            parts = _split(plan, threads)

            def work(part: int, ws: _Chunks) -> None:
                start, stop = parts[part]
                _forward_range(plan, q, out, probs, sdiff, k_flat, v_flat, start, stop, ws)

            _run(plan, dtype, False, work, len(parts))
            out = out.to(out_dtype)
        ctx.plan, ctx.n_frac, ctx.frac_dtype = plan, slots.n_rungs, frac_in.dtype
        ctx.dtypes = (k.dtype, v.dtype)
        ctx.save_for_backward(q, k_pad, v_pad, probs, sdiff)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k_pad, v_pad, probs, sdiff = ctx.saved_tensors
        plan: _Plan = ctx.plan
        dtype = q.dtype
        batch, _, length, head_dim = q.shape
        kv = plan.kv_heads
        with torch.autocast("cpu", enabled=False), _one_thread_per_worker() as threads:
            grad_out = grad_out if grad_out.dtype == dtype else grad_out.to(dtype)
            k_flat, v_flat = k_pad.view(-1, head_dim), v_pad.view(-1, head_dim)
            dq = torch.empty_like(q)  # q's layout
            parts = _split(plan, threads)
            # each worker accumulates only the key rows its queries reach (absolute keys
            # reach anywhere: then every worker covers the whole sequence)
            local = plan.n_abs == 0
            origins = [start if local else 0 for start, _ in parts]
            sizes = [
                stop - start + plan.pad if local else plan.padded_length for start, stop in parts
            ]
            accs = [torch.zeros(2, batch, n, kv, head_dim, dtype=dtype) for n in sizes]
            dfracs = [torch.zeros(plan.n_rungs, dtype=dtype) for _ in parts]

            def work(part: int, ws: _Chunks) -> None:
                _backward_range(
                    plan, q, grad_out, probs, sdiff, k_flat, v_flat, parts[part], ws,
                    accs[part], origins[part], dq, dfracs[part],
                )  # fmt: skip

            _run(plan, dtype, True, work, len(parts))
            dfrac = dfracs[0]
            for other in dfracs[1:]:
                dfrac += other
            if len(parts) == 1:
                grads = accs[0][:, :, plan.pad :]  # (2, B, T, KV, D)
            else:
                grads = torch.zeros(2, batch, length, kv, head_dim, dtype=dtype)
                for acc, origin, (_, stop) in zip(accs, origins, parts, strict=True):
                    first = max(0, origin - plan.pad)
                    rows = slice(first - origin + plan.pad, stop - origin + plan.pad)
                    grads[:, :, first:stop] += acc[:, :, rows]
            dk = grads[0].mul_(head_dim**-0.5).transpose(1, 2)  # the keys were packed scaled
            dv = grads[1].transpose(1, 2)
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

    inference = torch.is_inference_mode_enabled()  # thread-local, like grad mode

    def task(part: int) -> None:
        torch.set_num_threads(1)
        # the caller's tensors may be inference tensors: write them in the caller's mode
        with torch.inference_mode(inference), torch.no_grad():
            work(part, _chunks(plan, dtype, backward))

    futures = [_executor(n_parts).submit(task, part) for part in range(n_parts)]
    for future in futures:
        future.result()


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Causal attention of q (B, H, T, D) over the slots of k, v (B, KV, T, D), on the CPU."""
    frac = slots.rung_frac if slots.n_rungs else q.new_empty(0)
    return _TiledAttention.apply(q, k, v, frac, slots)
