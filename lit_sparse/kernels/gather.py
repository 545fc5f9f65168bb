"""Linear-time sparse attention in plain torch (any device): each chunk of queries gathers the
rows its slots point at, O(chunk * slots * D) memory beyond the inputs. The backward recomputes
each chunk's scores from the saved log-sum-exp and adds dK, dV with ``index_add_``."""

from __future__ import annotations

import torch
from torch import Tensor

from lit_sparse.kernels.slots import KeySlots, blend_rungs, split_rungs

_CHUNK_ELEMENTS = 1 << 22  # gathered rows per chunk * head dim * batch * kv heads (16 MB fp32)


class _ChunkPlan:
    """Row indices, validity and tap weights of one chunk of queries."""

    def __init__(self, slots: KeySlots, frac: Tensor | None, start: int, stop: int, pad: int):
        device = slots.distances.device
        i = torch.arange(start, stop, device=device)[:, None]  # (C, 1)
        d = slots.distances[None, :]
        index = [i + pad - d]
        valid = [i >= d]
        self.n_exact, self.n_rungs, self.frac = d.shape[1], slots.n_rungs, frac
        if self.n_rungs:
            lo = slots.rung_lo[None, :]
            index += [i + pad - lo, (i - lo - 1).clamp(min=0) + pad]  # upper tap: row -1 -> 0
            valid.append(slots.rung_valid[None, :] & (i >= lo))
        if slots.n_absolute:
            keys = slots.block_keys[i[:, 0] // slots.block_size]  # (C, A)
            index.append(keys + pad)  # -1 lands on a zero pad row
            valid.append((keys >= 0) & (i - keys >= slots.min_abs_distance))
        self.index = torch.cat(index, dim=1)  # (C, S) rows of the padded K/V
        self.valid = torch.cat(valid, dim=1)  # (C, M + R + A) slots

    def logits(self, row_scores: Tensor) -> Tensor:
        """Slot logits (masked) from scores against every gathered row."""
        slots = blend_rungs(row_scores, self.n_exact, self.n_rungs, self.frac)
        return slots.masked_fill(~self.valid, float("-inf"))

    def row_weights(self, slot_values: Tensor) -> Tensor:
        """Spread per-slot values over gathered rows (rungs split (1 - frac, frac))."""
        return split_rungs(slot_values, self.n_exact, self.n_rungs, self.frac)

    def rung_pairs(self, row_values: Tensor) -> tuple[Tensor, Tensor]:
        m, r = self.n_exact, self.n_rungs
        return row_values[..., m : m + r], row_values[..., m + r : m + 2 * r]


def _chunk_size(slots: KeySlots, batch: int, kv_heads: int, head_dim: int, length: int) -> int:
    rows = slots.keys_per_query + slots.n_rungs
    return max(16, min(length, _CHUNK_ELEMENTS // max(1, batch * kv_heads * rows * head_dim)))


def _inputs(q: Tensor, k: Tensor, v: Tensor, pad: int, dtype: torch.dtype):
    """q (B, H, T, D) as (B, KV, G, T, D), k and v (B, KV, T, D) with ``pad`` zero rows in front,
    all in ``dtype``."""
    batch, heads, length, head_dim = q.shape
    qg = q.to(dtype).view(batch, k.shape[1], heads // k.shape[1], length, head_dim)
    return qg, *(torch.nn.functional.pad(x.to(dtype), (0, 0, pad, 0)) for x in (k, v))


class _GatherAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, frac_in, slots: KeySlots):
        pad = slots.reach + 1
        acc = torch.promote_types(q.dtype, torch.float32)  # float64 stays (gradcheck)
        frac = frac_in.to(acc) if slots.n_rungs else None
        with torch.autocast(q.device.type, enabled=False):
            qg, k_pad, v_pad = _inputs(q, k, v, pad, acc)
            batch, kv_heads, groups, length, head_dim = qg.shape
            scale = head_dim**-0.5
            out = torch.empty_like(qg)
            lse = torch.empty(batch, kv_heads, groups, length, device=q.device, dtype=acc)
            chunk = _chunk_size(slots, batch, kv_heads, head_dim, length)
            for start in range(0, length, chunk):
                stop = min(start + chunk, length)
                plan = _ChunkPlan(slots, frac, start, stop, pad)
                q_c = qg[:, :, :, start:stop]  # (B, KV, G, C, D)
                keys = k_pad[:, :, plan.index]  # (B, KV, C, S, D)
                row_scores = torch.einsum("bkgcd,bkcsd->bkgcs", q_c, keys) * scale
                logits = plan.logits(row_scores)
                lse_c = torch.logsumexp(logits, dim=-1)
                probs = torch.exp(logits - lse_c[..., None])
                weights = plan.row_weights(probs)
                out[:, :, :, start:stop] = torch.einsum(
                    "bkgcs,bkcsd->bkgcd", weights, v_pad[:, :, plan.index]
                )
                lse[:, :, :, start:stop] = lse_c
        ctx.slots, ctx.pad, ctx.chunk, ctx.frac_dtype = slots, pad, chunk, frac_in.dtype
        ctx.save_for_backward(q, k, v, frac if frac is not None else q.new_empty(0), out, lse)
        return out.view(q.shape).to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, frac, out, lse = ctx.saved_tensors
        slots, pad, chunk = ctx.slots, ctx.pad, ctx.chunk
        frac = frac if slots.n_rungs else None
        with torch.autocast(q.device.type, enabled=False):
            qg, k_pad, v_pad = _inputs(q, k, v, pad, out.dtype)
            batch, kv_heads, groups, length, head_dim = qg.shape
            scale = head_dim**-0.5
            d_out = grad_out.to(out.dtype).reshape(qg.shape)
            delta = (d_out * out).sum(-1)  # (B, KV, G, T): sum_j p_ij dP_ij
            dq = torch.empty_like(qg)
            dk_pad, dv_pad = torch.zeros_like(k_pad), torch.zeros_like(v_pad)
            d_frac = torch.zeros_like(frac) if frac is not None else None
            for start in range(0, length, chunk):
                stop = min(start + chunk, length)
                plan = _ChunkPlan(slots, frac, start, stop, pad)
                q_c, do_c = qg[:, :, :, start:stop], d_out[:, :, :, start:stop]
                keys, values = k_pad[:, :, plan.index], v_pad[:, :, plan.index]
                row_scores = torch.einsum("bkgcd,bkcsd->bkgcs", q_c, keys) * scale
                probs = torch.exp(plan.logits(row_scores) - lse[:, :, :, start:stop, None])
                row_dp = torch.einsum("bkgcd,bkcsd->bkgcs", do_c, values)
                slot_dp = plan.logits(row_dp).nan_to_num(neginf=0.0)  # rungs mix their taps
                d_logits = probs * (slot_dp - delta[:, :, :, start:stop, None])
                d_rows = plan.row_weights(d_logits) * scale
                dq[:, :, :, start:stop] = torch.einsum("bkgcs,bkcsd->bkgcd", d_rows, keys)
                flat = plan.index.reshape(-1)
                dk_rows = torch.einsum("bkgcs,bkgcd->bkcsd", d_rows, q_c)
                dk_pad.index_add_(2, flat, dk_rows.reshape(batch, kv_heads, -1, head_dim))
                dv_rows = torch.einsum("bkgcs,bkgcd->bkcsd", plan.row_weights(probs), do_c)
                dv_pad.index_add_(2, flat, dv_rows.reshape(batch, kv_heads, -1, head_dim))
                if d_frac is not None:
                    s_lo, s_hi = plan.rung_pairs(row_scores)
                    dp_lo, dp_hi = plan.rung_pairs(row_dp)
                    m, r = plan.n_exact, plan.n_rungs
                    p_rung, dl_rung = probs[..., m : m + r], d_logits[..., m : m + r]
                    d_frac += (dl_rung * (s_hi - s_lo) + p_rung * (dp_hi - dp_lo)).sum((0, 1, 2, 3))
        dq = dq.view(q.shape).to(q.dtype)
        dk = dk_pad[:, :, pad:].to(k.dtype)
        dv = dv_pad[:, :, pad:].to(v.dtype)
        d_frac = None if d_frac is None else d_frac.to(ctx.frac_dtype)
        return dq, dk, dv, d_frac, None


def gather_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Causal attention of q (B, H, T, D) over the slots of k, v (B, KV, T, D); GQA by view."""
    frac = slots.rung_frac if slots.n_rungs else q.new_empty(0)
    return _GatherAttention.apply(q, k, v, frac, slots)
