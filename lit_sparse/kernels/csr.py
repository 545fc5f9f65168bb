"""Linear-time sparse attention on the CPU: MKL sparse-BLAS products over the slots' CSR pattern
(scores an SDDMM of Q with pre-scaled K, the output an SpMM with V; dK, dV by the transposed
pattern). K and V are packed (B, T + 1, KV, D) with a zero row 0 (taps before the start);
positions go in cache-sized chunks sharing one pattern."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from lit_sparse.kernels import huge_pages
from lit_sparse.kernels.slots import KeySlots, rung_grad

# The pattern is a CSR tensor only as an argument of the sparse products; torch warns once
# per process that CSR support is beta: spend that warning here, silently.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.sparse_csr_tensor(
        torch.zeros(2, dtype=torch.int32), torch.zeros(0, dtype=torch.int32), torch.zeros(0), (1, 1)
    )

CHUNK_BYTES = 1 << 20
"""Target size of one chunk's scores (positions x heads x taps)."""
MIN_CHUNK = 16  # positions


@dataclass
class _Plan:
    """The slots of one call, resolved on the host against the running length."""

    batch: int
    length: int
    kv_heads: int
    groups: int
    head_dim: int
    n_abs: int
    n_exact: int
    taps: tuple[int, ...]
    """Distance of each relative column: the exact distances, each rung's lo, each lo + 1."""
    rung_keep: Tensor | None
    """(R,) indices of the kept rungs (valid somewhere in the sequence) into slots.rung_*."""
    frac: Tensor
    """(R,) weight of the upper tap of each kept rung (detached, accumulation dtype)."""
    abs_columns: Tensor | None
    """(T, KV, A) row of each absolute key in the (T + 1) * KV rows of K (0: zeros)."""
    bias: Tensor | None
    """(rows, S) additive mask (0 or -inf) of the first ``rows`` positions."""
    chunk: int

    @property
    def heads(self) -> int:
        return self.kv_heads * self.groups

    @property
    def n_rungs(self) -> int:
        return (len(self.taps) - self.n_exact) // 2

    @property
    def slots(self) -> int:
        """Probabilities per (position, head), in the order [absolute | exact | rungs]."""
        return self.n_abs + self.n_exact + self.n_rungs

    @property
    def columns(self) -> int:
        """Pattern entries per query row: the slots, then each rung's upper tap."""
        return self.n_abs + len(self.taps)

    @property
    def key_positions(self) -> int:
        """Rows per sequence of the packed K/V: a zero row, the keys, zero rows up to a row's
        entries (a CSR matrix holds no more entries than cells)."""
        return max(self.length + 1, self.columns)

    @property
    def reach(self) -> int:
        return max(self.taps, default=0) + 1


def _plan(slots: KeySlots, q: Tensor, k: Tensor, dtype: torch.dtype) -> _Plan:
    batch, heads, length, head_dim = q.shape
    kv_heads = k.shape[1]
    exact, rung_keep, rung_lo, frac = slots.read_at(length, "the CSR CPU kernel")
    exact, rung_lo, frac = exact.tolist(), rung_lo.tolist(), frac.to(dtype)
    n_abs = slots.n_absolute
    relative = exact + rung_lo  # a rung is valid where t >= lo
    rows = length if n_abs else min(length, max(relative, default=0))
    abs_columns = bias = None
    if rows:
        positions = torch.arange(rows)
        valid = [positions[:, None] >= torch.tensor(relative, dtype=torch.long)[None, :]]
        if n_abs:
            keys = slots.block_keys.to("cpu")[positions // slots.block_size]  # (T, A)
            ok = (keys >= 0) & (positions[:, None] - keys >= slots.min_abs_distance)
            valid.insert(0, ok)
            keys = keys.masked_fill(~ok, -1)  # a key not read here points at the zero row
            abs_columns = (keys + 1)[:, None, :] * kv_heads + torch.arange(kv_heads)[None, :, None]
            abs_columns = abs_columns.to(torch.int32)
        bias = torch.zeros(rows, n_abs + len(relative), dtype=dtype)
        bias.masked_fill_(~torch.cat(valid, dim=1), float("-inf"))
    taps = tuple(exact + rung_lo + [lo + 1 for lo in rung_lo])
    per_position = heads * (n_abs + len(taps)) * torch.finfo(dtype).bits // 8
    chunk = max(MIN_CHUNK, min(length, CHUNK_BYTES // max(1, per_position)))
    return _Plan(
        batch=batch,
        length=length,
        kv_heads=kv_heads,
        groups=heads // kv_heads,
        head_dim=head_dim,
        n_abs=n_abs,
        n_exact=len(exact),
        taps=taps,
        rung_keep=rung_keep,
        frac=frac,
        abs_columns=abs_columns,
        bias=bias,
        chunk=chunk,
    )


@dataclass(frozen=True)
class _Patterns:
    """The int32 index arrays of a chunk of positions from 0: a chunk from ``s`` adds ``s * KV``
    to the key columns, a shorter last chunk uses prefixes."""

    crow: Tensor
    """(chunk * H + 1,) row pointers of the query-side pattern: ``columns`` entries a row."""
    key_columns: Tensor
    """(chunk, KV, G, taps) row of K (of the (T + 1) * KV rows) of each relative tap."""
    crow_t: Tensor
    """(chunk * KV + 1,) row pointers of the transposed pattern: taps x G entries a row."""
    query_columns: Tensor
    """(chunk * KV * taps * G,) query row (t * H + head) read by key row j, minus j0 * H."""
    value_index: Tensor
    """(chunk * KV * taps * G,) that entry's index into the query-side values (T, H, columns),
    minus j0 * H * columns."""
    first_row: Tensor
    """(1, KV, 1, 1) each KV head's packed row of position 0 (a rung's first upper tap)."""


@functools.lru_cache(maxsize=32)
def _patterns(
    chunk: int, kv: int, groups: int, n_abs: int, n_exact: int, taps: tuple[int, ...]
) -> _Patterns:
    heads, n_taps = kv * groups, len(taps)
    columns = n_abs + n_taps
    distance = torch.tensor(taps, dtype=torch.long)
    t = torch.arange(chunk)[:, None, None, None]
    kv_index = torch.arange(kv)[None, :, None, None]
    key_columns = ((t + 1 - distance) * kv + kv_index).expand(chunk, kv, groups, n_taps)
    # transposed: key row (j, kv) meets query rows (j + d, kv, g) for every tap and head g
    tap_column = n_abs + torch.arange(n_taps)[None, None, :, None]
    g = torch.arange(groups)[None, None, None, :]
    query = t + distance[None, None, :, None]  # (chunk, 1, taps, 1) query position
    head = kv_index * groups + g
    query_columns = query * heads + head
    value_index = (query * heads + head) * columns + tap_column
    return _Patterns(
        crow=torch.arange(0, chunk * heads * columns + 1, columns, dtype=torch.int32),
        key_columns=key_columns.to(torch.int32).contiguous(),
        crow_t=torch.arange(
            0, chunk * kv * n_taps * groups + 1, n_taps * groups, dtype=torch.int32
        ),
        query_columns=query_columns.expand(chunk, kv, n_taps, groups).reshape(-1).to(torch.int32),
        value_index=value_index.expand(chunk, kv, n_taps, groups).reshape(-1).to(torch.int32),
        first_row=(kv + torch.arange(kv, dtype=torch.int32)).view(1, kv, 1, 1),
    )


def _csr(crow: Tensor, columns: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    return torch.sparse_csr_tensor(crow, columns, values, shape, check_invariants=False)


# MKL overwrites the output of a beta = 0 product; torch's own CSR product (builds without
# MKL, e.g. macOS and ARM) scales the old output by beta, and 0 * NaN from reused memory is NaN
_BETA_ZERO_OVERWRITES = torch.backends.mkl.is_available()


def _spmm_into(out: Tensor, pattern: Tensor, dense: Tensor, accumulate: bool = False) -> None:
    """out = pattern @ dense, or out += pattern @ dense when ``accumulate``."""
    if not (accumulate or _BETA_ZERO_OVERWRITES):
        out.zero_()
    torch.addmm(out, pattern, dense, beta=1 if accumulate else 0, out=out)


class _Chunk:
    """One chunk of query positions of one sequence: its pattern and its buffers' views."""

    def __init__(self, plan: _Plan, pat: _Patterns, work: _Work, s: int):
        c = min(plan.chunk, plan.length - s)
        self.s, self.c = s, c
        self.heads = plan.heads
        self.rows = c * plan.heads  # (position, head) rows
        self.n = c * plan.kv_heads  # (position, KV head) rows
        a, cols = plan.n_abs, plan.columns
        columns = work.columns[:c]
        torch.add(pat.key_columns[:c], s * plan.kv_heads, out=columns[..., a:])
        if s + 1 < plan.reach:  # taps before the sequence start read row 0 (zeros) ...
            columns[..., a:].clamp_(min=0)
            if plan.n_rungs:  # ... but a rung's upper tap reads position 0 (row -1 -> 0)
                upper = columns[..., a + plan.n_exact + plan.n_rungs :]
                torch.maximum(upper, pat.first_row, out=upper)
        if a:
            columns[..., :a] = plan.abs_columns[s : s + c, :, None, :]
        self.crow = pat.crow[: self.rows + 1]
        self.col = columns.view(-1)
        self.key_rows = plan.key_positions * plan.kv_heads
        self.entries = self.rows * cols

    def sddmm(self, x: Tensor, y: Tensor, out: Tensor) -> Tensor:
        """(n, G, columns) products of the chunk's rows of x (T * H, D) with rows of y."""
        values = out[: self.entries]
        pattern = _csr(self.crow, self.col, values, (self.rows, self.key_rows))
        rows = x[self.s * self.heads :][: self.rows]
        torch.sparse.sampled_addmm(pattern, rows, y.t(), beta=0.0, out=pattern)
        return values.view(self.n, -1, self.entries // self.rows)

    def spmm(self, values: Tensor, y: Tensor, out: Tensor) -> None:
        """out (chunk rows, D) = the pattern with ``values`` times the rows of y."""
        pattern = _csr(self.crow, self.col, values.reshape(-1), (self.rows, self.key_rows))
        _spmm_into(out, pattern, y)


class _Work:
    """Buffers reused by every chunk of one call (finite values only: see ``sddmm``)."""

    def __init__(self, plan: _Plan, dtype: torch.dtype):
        c, kv, g = plan.chunk, plan.kv_heads, plan.groups
        self.columns = torch.empty(c, kv, g, plan.columns, dtype=torch.int32)
        # sampled_addmm computes beta * out even for beta = 0: keep it free of inf/nan
        self.products = torch.zeros(c * plan.heads * plan.columns, dtype=dtype)


def _split_rungs(plan: _Plan, taps: Tensor) -> None:
    """In place on pattern values (n, G, columns): a rung's x becomes (1 - frac) * x on its
    lower tap and frac * x on its upper one."""
    r, slots = plan.n_rungs, plan.slots
    lower, upper = taps[:, :, slots - r : slots], taps[:, :, slots:]
    torch.mul(lower, plan.frac, out=upper)
    lower.sub_(upper)


def _softmax(plan: _Plan, scores: Tensor, chunk: _Chunk, out: Tensor) -> None:
    """Softmax over the slots, -inf on invalid ones, without writing -inf into ``scores``."""
    s, c = chunk.s, chunk.c
    slots = scores[:, :, : plan.slots].view(c, plan.kv_heads, plan.groups, plan.slots)
    out = out.view(c, plan.kv_heads, plan.groups, plan.slots)
    masked = 0 if plan.bias is None else max(0, min(c, plan.bias.shape[0] - s))
    if masked:
        biased = slots[:masked] + plan.bias[s : s + masked, None, None, :]
        torch.softmax(biased, -1, out=out[:masked])
    if masked < c:
        torch.softmax(slots[masked:], -1, out=out[masked:])


def _rung_scores(plan: _Plan, products: Tensor, diff: Tensor) -> None:
    """In place: a rung's lower column becomes lo + frac * (hi - lo); diff = hi - lo."""
    lo0, r = plan.n_abs + plan.n_exact, plan.n_rungs
    lo, hi = products[:, :, lo0 : lo0 + r], products[:, :, lo0 + r :]
    torch.sub(hi, lo, out=diff)
    lo.addcmul_(diff, plan.frac)


def _with_trailing_zero(batch: int, size: int, dtype: torch.dtype) -> Tensor:
    """(batch, size + 1) values whose last entry is the zero that out-of-range taps read."""
    values = huge_pages.empty(batch, size + 1, dtype=dtype)
    values[:, -1] = 0
    return values


def _position_major(x: Tensor) -> Tensor:
    """x (B, heads, T, D) as a contiguous (B, T, heads, D) tensor (a view when it is one)."""
    xt = x.transpose(1, 2)
    return xt if xt.is_contiguous() else xt.contiguous()


def _forward(plan: _Plan, q: Tensor, k_rows: Tensor, v_rows: Tensor):
    """out (B, T, H, D), the probabilities on the pattern (B, T, KV, G, columns) and a trailing
    zero, the rungs' score diffs (B, T, KV, G, R)."""
    batch, length, d, cols = plan.batch, plan.length, plan.head_dim, plan.columns
    pat = _patterns(plan.chunk, plan.kv_heads, plan.groups, plan.n_abs, plan.n_exact, plan.taps)
    work = _Work(plan, q.dtype)
    out = huge_pages.empty(batch, length, plan.heads, d, dtype=q.dtype)
    probs = _with_trailing_zero(batch, length * plan.heads * cols, q.dtype)
    sdiff = huge_pages.empty(batch, length, plan.kv_heads, plan.groups, plan.n_rungs, dtype=q.dtype)
    for b in range(batch):
        q_b = q[b].view(-1, d)
        for s in range(0, length, plan.chunk):
            chunk = _Chunk(plan, pat, work, s)
            scores = chunk.sddmm(q_b, k_rows[b], work.products)
            if plan.n_rungs:
                _rung_scores(plan, scores, sdiff[b, s : s + chunk.c].view(chunk.n, plan.groups, -1))
            p = probs[b, s * plan.heads * cols :][: chunk.entries].view(chunk.n, plan.groups, cols)
            _softmax(plan, scores, chunk, p[:, :, : plan.slots])
            if plan.n_rungs:
                _split_rungs(plan, p)
            chunk.spmm(p, v_rows[b], out[b, s : s + chunk.c].view(-1, d))
    return out, probs, sdiff


def _backward(plan, q, grad_out, probs, sdiff, k_rows, v_rows):
    """dq (B, T, H, D), d(K scaled) and dV (B, T + 1, KV, D) (row 0 unused), dfrac (R,)."""
    batch, length, d = plan.batch, plan.length, plan.head_dim
    kv, g, a, slots, r = plan.kv_heads, plan.groups, plan.n_abs, plan.slots, plan.n_rungs
    cols = plan.columns
    pat = _patterns(plan.chunk, kv, g, a, plan.n_exact, plan.taps)
    work = _Work(plan, q.dtype)
    dq = huge_pages.empty(*q.shape, dtype=q.dtype)
    # the transposed pass writes every key row; absolute keys are added to zeros before it
    dk = huge_pages.empty(batch, plan.key_positions, kv, d, dtype=q.dtype)
    dv = huge_pages.empty(batch, plan.key_positions, kv, d, dtype=q.dtype)
    if a:
        dk.zero_()
        dv.zero_()
    dfrac = torch.zeros(r, dtype=q.dtype)
    ds_all = _with_trailing_zero(batch, length * plan.heads * cols, q.dtype)  # as probs
    lo0 = a + plan.n_exact
    for b in range(batch):
        q_b, do_b = q[b].view(-1, d), grad_out[b].view(-1, d)
        for s in range(0, length, plan.chunk):
            chunk = _Chunk(plan, pat, work, s)
            n = chunk.n
            dp = chunk.sddmm(do_b, v_rows[b], work.products)  # dO . v of every column
            p = probs[b, s * plan.heads * cols :][: chunk.entries].view(n, g, cols)
            if r:  # a rung's dP is lo + frac * (hi - lo), on both its columns
                lo, hi = dp[:, :, lo0:slots], dp[:, :, slots:]
                hi.sub_(lo)
                lo.addcmul_(hi, plan.frac)
                p_rung = p[:, :, lo0:slots] + p[:, :, slots:]
                part = p_rung * hi  # dfrac through V: P * (dP_hi - dP_lo)
                hi.copy_(lo)
            # on the pattern, a rung's two columns carry (1 - frac) P and frac P, so
            # dS = P * (dP - rowsum(P dP)) is already split over them as the products need
            ds = ds_all[b, s * plan.heads * cols :][: chunk.entries].view(n, g, cols)
            torch.mul(dp, p, out=ds)
            ds.addcmul_(p, ds.sum(-1, keepdim=True), value=-1)
            if r:  # dfrac through the scores: dS * (s_hi - s_lo)
                ds_rung = torch.add(ds[:, :, lo0:slots], ds[:, :, slots:], out=p_rung)
                part.addcmul_(ds_rung, sdiff[b, s : s + chunk.c].view(n, g, r))
                dfrac += part.sum((0, 1))
            chunk.spmm(ds, k_rows[b], dq[b, s : s + chunk.c].view(-1, d))
            if a:  # absolute keys: reduce over the group's heads, then add to their rows
                index = chunk.col.view(n, g, cols)[:, 0, :a].reshape(-1)
                q_c = q_b[s * plan.heads :][: chunk.rows].view(n, g, d)
                do_c = do_b[s * plan.heads :][: chunk.rows].view(n, g, d)
                dk[b].view(-1, d).index_add_(0, index, (ds[:, :, :a].mT @ q_c).view(-1, d))
                dv[b].view(-1, d).index_add_(0, index, (p[:, :, :a].mT @ do_c).view(-1, d))
        for j0 in range(0, length, plan.chunk):
            pairs = ((ds_all[b], q_b, dk[b]), (probs[b], do_b, dv[b]))
            _key_chunk_products(plan, pat, j0, pairs)
        if r:
            _first_row_products(plan, ds_all[b], probs[b], q_b, do_b, dk[b], dv[b])
    return dq, dk, dv, dfrac


def _first_row_products(plan: _Plan, ds, probs, q, do, dk, dv) -> None:
    """dK, dV of position 0 from each rung's first row (query lo's upper tap reads position 0),
    a pair the transposed pattern does not hold."""
    n_exact, r, slots, cols = plan.n_exact, plan.n_rungs, plan.slots, plan.columns
    kv, g, d = plan.kv_heads, plan.groups, plan.head_dim
    rows = torch.tensor(plan.taps[n_exact : n_exact + r])  # each rung's lo (< length)
    upper = slots + torch.arange(r)  # each rung's upper-tap column
    shape = (plan.length, kv, g, cols)
    ds_upper = ds[:-1].view(shape)[rows, :, :, upper]  # (R, KV, G)
    p_upper = probs[:-1].view(shape)[rows, :, :, upper]
    q_rows = q.view(plan.length, kv, g, d)[rows]  # (R, KV, G, D)
    do_rows = do.view(plan.length, kv, g, d)[rows]
    dk[1] += torch.einsum("rkg,rkgd->kd", ds_upper, q_rows)  # packed row 1 = position 0
    dv[1] += torch.einsum("rkg,rkgd->kd", p_upper, do_rows)


def _key_chunk_products(plan: _Plan, pat: _Patterns, j0: int, pairs) -> None:
    """For key positions j0.. and each (query-side values, x, out) of ``pairs``: out rows +=
    (the pattern with those values)^T x over the relative taps."""
    c = min(plan.chunk, plan.length - j0)
    heads, length = plan.heads, plan.length
    entries = c * plan.kv_heads * len(plan.taps) * plan.groups
    columns, index = pat.query_columns[:entries], pat.value_index[:entries]
    end = min(length, j0 + c + plan.reach)  # query rows these keys can meet
    if j0 + c + plan.reach > length:  # taps past the end: a zero value, any valid column
        columns = columns.clamp(max=(end - j0) * heads - 1)
        index = index.clamp(max=(length - j0) * heads * plan.columns)
    shape = (c * plan.kv_heads, (end - j0) * heads)
    for values, x, out in pairs:
        gathered = torch.index_select(values[j0 * heads * plan.columns :], 0, index)
        pattern = _csr(pat.crow_t[: c * plan.kv_heads + 1], columns, gathered, shape)
        rows = out[j0 + 1 : j0 + 1 + c].view(-1, plan.head_dim)
        operand = x[j0 * heads : end * heads]
        _spmm_into(rows, pattern, operand, accumulate=plan.n_abs > 0)  # onto absolute keys' rows


class _CsrAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, frac_in, slots: KeySlots):
        dtype = torch.promote_types(q.dtype, torch.float32)
        plan = _plan(slots, q, k, dtype)
        batch, _, length, head_dim = q.shape
        kv = k.shape[1]
        with torch.autocast("cpu", enabled=False):
            q_pm = _position_major(q.to(dtype))
            k_rows = huge_pages.empty(batch, plan.key_positions, kv, head_dim, dtype=dtype)
            v_rows = huge_pages.empty(batch, plan.key_positions, kv, head_dim, dtype=dtype)
            for rows in (k_rows, v_rows):
                rows[:, 0].zero_()
                rows[:, length + 1 :].zero_()
            torch.mul(k.transpose(1, 2), head_dim**-0.5, out=k_rows[:, 1 : length + 1])
            v_rows[:, 1 : length + 1] = v.transpose(1, 2)
            k_rows, v_rows = k_rows.view(batch, -1, head_dim), v_rows.view(batch, -1, head_dim)
            out, probs, sdiff = _forward(plan, q_pm, k_rows, v_rows)
        ctx.plan, ctx.n_frac, ctx.frac_dtype = plan, slots.n_rungs, frac_in.dtype
        ctx.dtypes = (q.dtype, k.dtype, v.dtype)
        ctx.save_for_backward(q_pm, k_rows, v_rows, probs, sdiff)
        return out.to(q.dtype).transpose(1, 2)

    @staticmethod
    def backward(ctx, grad_out):
        q_pm, k_rows, v_rows, probs, sdiff = ctx.saved_tensors
        plan: _Plan = ctx.plan
        head_dim = plan.head_dim
        with torch.autocast("cpu", enabled=False):
            do_pm = _position_major(grad_out.to(q_pm.dtype))
            dq, dk, dv, dfrac = _backward(plan, q_pm, do_pm, probs, sdiff, k_rows, v_rows)
            length = plan.length
            dk = dk[:, 1 : length + 1].mul_(head_dim**-0.5).transpose(1, 2)  # packed scaled
            dv = dv[:, 1 : length + 1].transpose(1, 2)
            d_frac = rung_grad(dfrac, plan.rung_keep, ctx.n_frac, ctx.frac_dtype)
            q_dtype, k_dtype, v_dtype = ctx.dtypes
        return dq.transpose(1, 2).to(q_dtype), dk.to(k_dtype), dv.to(v_dtype), d_frac, None


def csr_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Causal attention of q (B, H, T, D) over the slots of k, v (B, KV, T, D), on the CPU."""
    frac = slots.rung_frac if slots.n_rungs else q.new_empty(0)
    return _CsrAttention.apply(q, k, v, frac, slots)
