"""Incremental decoding (docs/generation.md): a layer's :class:`LayerDecoder` caches past keys and
values, takes the prompt by the training path, then each token in one ``step`` reading only the
attended rows (exact: every pattern is prefix-consistent)."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from lit_sparse.errors import LitSparseError
from lit_sparse.kernels import compiled
from lit_sparse.kernels.slots import KeySlots, blend_rungs, split_rungs

log = logging.getLogger(__name__)


class DecodingMemoryError(LitSparseError, MemoryError):
    """A layer's cache could not grow (the message names the rows, bytes and what to do)."""


@dataclass(frozen=True)
class DecodeShape:
    """What a layer's decoder is built for: the batch, the heads and the longest sequence."""

    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    max_length: int
    """Positions the cache must serve: the prompt plus every token to generate."""
    device: torch.device
    dtype: torch.dtype

    @property
    def groups(self) -> int:
        return self.heads // self.kv_heads


class KVCache:
    """One layer's keys and values in a ring of ``capacity`` rows (position p in row p %
    capacity), grown by doubling as positions arrive: only rows written so far cost memory."""

    MIN_ROWS = 16
    """Rows of the first allocation (fewer when the capacity is smaller)."""

    def __init__(self, shape: DecodeShape, capacity: int, heads: int | None = None):
        self.shape, self.capacity = shape, capacity
        self.heads = shape.kv_heads if heads is None else heads
        self.k, self.v = self._zeros(0), self._zeros(0)

    def _zeros(self, rows: int) -> Tensor:
        shape = self.shape
        size = (shape.batch, self.heads, rows, shape.head_dim)
        return torch.zeros(size, device=shape.device, dtype=shape.dtype)

    @property
    def allocated(self) -> int:
        """Rows the buffers have now (at most ``capacity``)."""
        return self.k.shape[2]

    def reserve(self, positions: int) -> None:
        """Rows for positions 0 .. positions - 1 (at most ``capacity``), at least doubling;
        :class:`DecodingMemoryError` when that does not fit in memory."""
        rows, have = min(positions, self.capacity), self.allocated
        if rows <= have:
            return
        rows = min(self.capacity, max(rows, 2 * have, self.MIN_ROWS))
        try:
            k, v = self._zeros(rows), self._zeros(rows)
        except (RuntimeError, MemoryError) as err:  # torch's allocators raise RuntimeError
            if not isinstance(err, MemoryError) and "memory" not in str(err).lower():
                raise
            shape = self.shape
            nbytes = 2 * rows * shape.batch * self.heads * shape.head_dim * self.k.element_size()
            raise DecodingMemoryError(
                f"decoding cache: a layer's keys and values for {rows:,} positions "
                f"({nbytes / 2**30:.1f} GB) do not fit in memory (at position "
                f"{positions - 1:,}); generate fewer tokens (max_new_tokens), use a smaller "
                "batch, or a pattern with a bounded cache (fibonacci, sliding_window)"
            ) from None
        k[:, :, :have] = self.k
        v[:, :, :have] = self.v
        self.k, self.v = k, v

    def write(self, start: int, k: Tensor, v: Tensor) -> None:
        """Store k, v (B, heads, n, D) at positions start .. start + n - 1 (last ``capacity``)."""
        n = k.shape[-2]
        self.reserve(start + n)
        if n == 1:
            row = start % self.capacity
            self.k[:, :, row] = k[:, :, 0]
            self.v[:, :, row] = v[:, :, 0]
            return
        keep = min(n, self.capacity)
        first = start + n - keep
        rows = torch.arange(first, first + keep, device=self.k.device) % self.capacity
        self.k.index_copy_(2, rows, k[:, :, n - keep :].to(self.k.dtype))
        self.v.index_copy_(2, rows, v[:, :, n - keep :].to(self.v.dtype))

    def rows(self, positions: Tensor) -> Tensor:
        return positions % self.capacity

    def past(self, first: int, stop: int) -> tuple[Tensor, Tensor]:
        """Keys and values (B, heads, stop - first, D) of held positions first .. stop - 1."""
        if stop <= self.capacity:  # not wrapped yet: row p is position p
            return self.k[:, :, first:stop], self.v[:, :, first:stop]
        index = self.rows(torch.arange(first, stop, device=self.k.device))
        return self.k.index_select(2, index), self.v.index_select(2, index)

    def fill_random(self, length: int, generator: torch.Generator, scale: float = 1.0) -> None:
        """Random keys and values for ``length`` positions (to time a step after a long context)."""
        self.reserve(length)
        for buffer in (self.k, self.v):
            noise = torch.randn(
                buffer.shape, generator=generator, dtype=buffer.dtype, device=buffer.device
            )
            buffer.copy_(noise.mul_(scale))

    @property
    def nbytes(self) -> int:
        """Bytes of the buffers as allocated now."""
        return self.k.nbytes + self.v.nbytes


def small_softmax(x: Tensor) -> Tensor:
    """Softmax over the last dim in elementwise ops: ``torch.softmax`` hands even a few dozen
    values to the thread pool, which stalls when another process holds a core."""
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


class LayerDecoder:
    """One layer's decoding state for one batch: the prompt by the training path, then one
    token per :meth:`step`, up to ``shape.max_length``."""

    def __init__(self, pattern, shape: DecodeShape, capacity: int | None = None):
        """``capacity``: the ring's rows (None: the whole past)."""
        self.pattern, self.shape = pattern, shape
        self.cache = KVCache(shape, min(capacity or shape.max_length, shape.max_length))
        self.position = 0

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """Attention output (B, H, n, D) of the n new positions (RoPE'd q, k; v)."""
        n = q.shape[-2]
        self._check_room(n)
        if self.position == 0:
            out = self.prefill(q, k, v)
        elif n == 1:
            out = self.step(q, k, v, self.position)
        else:
            out = self.extend(q, k, v, self.position)
        self.position += n
        return out

    def prefill(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """The prompt (or its first chunk) by the training path, its keys and values cached."""
        self.cache.write(0, k, v)
        return self.pattern(q, k, v)

    def step(self, q: Tensor, k: Tensor, v: Tensor, position: int) -> Tensor:
        """One new token at absolute ``position``: q (B, H, 1, D), k, v (B, KV, 1, D)."""
        raise NotImplementedError

    def step_reads(self) -> tuple | None:
        """How the compiled layer step (``compiled.layer_step``) reads this layer's cache:
        ``(dense, back, first, frac, block_keys, block_size, min_abs)``; None where it cannot
        (another device or dtype, or a pattern whose step is its own)."""
        return None

    def take_position(self) -> int:
        """The position a compiled layer step writes and reads next, its cache row reserved;
        the decoder counts it as decoded."""
        self._check_room(1)
        position = self.position
        self.cache.reserve(position + 1)
        self.position += 1
        return position

    def _check_room(self, n: int) -> None:
        """ValueError when n more positions would pass ``shape.max_length``."""
        if self.position + n > self.shape.max_length:
            raise ValueError(
                f"decoding past max_length={self.shape.max_length} (position {self.position} "
                f"+ {n}): build the cache for the longest sequence"
            )

    def extend(self, q: Tensor, k: Tensor, v: Tensor, start: int) -> Tensor:
        """n > 1 new positions from ``start`` (chunked prefill); default: a :meth:`step` each."""
        outs = [
            self.step(q[:, :, i : i + 1], k[:, :, i : i + 1], v[:, :, i : i + 1], start + i)
            for i in range(q.shape[-2])
        ]
        return torch.cat(outs, dim=2)

    def describe(self) -> str:
        """The cache in words, e.g. ``ring of 988 rows``."""
        rows = self.cache.capacity
        if rows >= self.shape.max_length:
            return f"whole past ({rows} rows)"
        return f"ring of {rows} rows"

    @property
    def nbytes(self) -> int:
        return self.cache.nbytes

    def fill_random(self, length: int, generator: torch.Generator) -> None:
        """Pretend ``length`` positions were decoded, with random keys and values."""
        self.cache.fill_random(length, generator)
        self.position = length


class SlotDecoder(LayerDecoder):
    """A slot pattern's step: the rows its slots name, from a ring of the largest distance + 1
    rows (the whole past with absolute keys)."""

    def __init__(self, pattern, shape: DecodeShape, slots: KeySlots):
        exact = slots.distances
        back, first = [exact], [exact]
        if slots.n_rungs:
            lo, valid = slots.rung_lo.detach(), slots.rung_valid.detach()
            back += [lo, lo + 1]  # lower tap t - lo, upper tap max(t - lo - 1, 0)
            first.append(torch.where(valid, lo, torch.iinfo(torch.long).max))
            self.frac = slots.rung_frac.detach().to(torch.promote_types(shape.dtype, torch.float32))
            reach = int((lo[valid] + 2).max()) if bool(valid.any()) else 0
        else:
            self.frac, reach = None, 0
        self.back = torch.cat(back)  # (M + 2R,) how far back each relative row is
        self.first = torch.cat(first)  # (M + R,) the first position each slot is valid at
        self.n_exact, self.n_rungs = int(exact.numel()), slots.n_rungs
        self.block_keys = slots.block_keys
        self.block_size, self.min_abs_distance = slots.block_size, slots.min_abs_distance
        self.reach = max(reach, int(exact.max()) + 1)  # rows back a position reads, + 1
        self.absolute = bool(slots.n_absolute)  # absolute keys can be any earlier position
        super().__init__(pattern, shape, None if self.absolute else self.reach)
        self.compiled = (
            shape.device.type == "cpu"
            and shape.dtype in (torch.float32, torch.float64)
            and compiled.available()
        )
        if self.compiled:  # the step's arguments for the compiled kernel, made once
            frac = slots.rung_frac.detach() if slots.n_rungs else torch.zeros(0)
            frac = frac.to("cpu", torch.float64).contiguous()
            keys = self.block_keys if self.block_keys is not None else torch.zeros(0, 0)
            back, first, keys = (
                x.to("cpu", torch.long).contiguous() for x in (self.back, self.first, keys)
            )
            self.kernel_args = (back, first, frac, keys, self.block_size, self.min_abs_distance)

    def step_reads(self) -> tuple | None:
        own_step = type(self).step is not SlotDecoder.step
        if own_step or not self.compiled or self.shape.dtype != torch.float32:
            return None
        return (False, *self.kernel_args)

    def step(self, q: Tensor, k: Tensor, v: Tensor, position: int) -> Tensor:
        self.cache.write(position, k, v)
        shape = self.shape
        if self.compiled and q.dtype == shape.dtype:  # one call instead of ~25 small ops
            flat = q.reshape(shape.batch, shape.heads, shape.head_dim).contiguous()
            ring_k, ring_v = self.cache.k, self.cache.v
            out = compiled.decode_step(flat, ring_k, ring_v, position, *self.kernel_args)
            return out.view(shape.batch, shape.heads, 1, shape.head_dim)
        acc = torch.promote_types(q.dtype, torch.float32)
        rows = (position - self.back).clamp_(min=0)  # (M + 2R,) absolute rows
        valid = position >= self.first  # (M + R,)
        if self.block_keys is not None:
            absolute = self.block_keys[position // self.block_size]  # (A,) -1: none
            rows = torch.cat([rows, absolute.clamp(min=0)])
            far = position - absolute >= self.min_abs_distance
            valid = torch.cat([valid, (absolute >= 0) & far])
        index = self.cache.rows(rows)  # (S,) ring rows
        keys = self.cache.k.index_select(2, index).to(acc)  # (B, KV, S, D)
        values = self.cache.v.index_select(2, index).to(acc)
        qg = q.to(acc).view(shape.batch, shape.kv_heads, shape.groups, 1, shape.head_dim)
        # products and sums, not matmul: BLAS would stall in the thread pool (small_softmax)
        scores = (qg * keys[:, :, None]).sum(-1) * shape.head_dim**-0.5  # (B, KV, G, S)
        logits = blend_rungs(scores, self.n_exact, self.n_rungs, self.frac)  # the rungs' scores
        probs = small_softmax(logits.masked_fill(~valid, float("-inf")))  # (B, KV, G, M+R+A)
        probs = split_rungs(probs, self.n_exact, self.n_rungs, self.frac)  # (B, KV, G, S)
        out = (probs[..., None] * values[:, :, None]).sum(-2)  # (B, KV, G, D)
        return out.view(shape.batch, shape.heads, 1, shape.head_dim).to(q.dtype)

    def extend(self, q: Tensor, k: Tensor, v: Tensor, start: int) -> Tensor:
        """A chunk by the training path over the cached rows from ``start - reach`` (0 with
        absolute keys) and its own; earlier positions run as dropped zero queries."""
        first = 0 if self.absolute else max(0, start - self.reach)
        past_k, past_v = self.cache.past(first, start)
        k_rows = torch.cat([past_k, k.to(past_k.dtype)], dim=2)  # (B, KV, start - first + n, D)
        v_rows = torch.cat([past_v, v.to(past_v.dtype)], dim=2)
        b, h, _, d = q.shape
        q_rows = torch.cat([q.new_zeros(b, h, start - first, d), q], dim=2)
        self.cache.write(start, k, v)
        return self.pattern(q_rows, k_rows, v_rows)[:, :, start - first :]


class DenseDecoder(LayerDecoder):
    """Every earlier key: the whole past, one SDPA call per token."""

    MASK_ELEMENTS = 1 << 22
    """Most elements of one chunk group's causal mask (16 MB as float32)."""

    def step_reads(self) -> tuple | None:
        shape = self.shape
        if type(self).step is not DenseDecoder.step or shape.device.type != "cpu":
            return None
        if shape.dtype != torch.float32 or not compiled.available():
            return None
        none = torch.zeros(0, dtype=torch.long)
        return (True, none, none, torch.zeros(0, dtype=torch.float64), none.view(0, 0), 1, 0)

    def step(self, q: Tensor, k: Tensor, v: Tensor, position: int) -> Tensor:
        self.cache.write(position, k, v)
        keys = self.cache.k[:, :, : position + 1]  # (B, KV, t + 1, D)
        values = self.cache.v[:, :, : position + 1]
        return F.scaled_dot_product_attention(q, keys, values, enable_gqa=self.shape.groups > 1)

    def extend(self, q: Tensor, k: Tensor, v: Tensor, start: int) -> Tensor:
        """A chunk against the whole past, in groups of queries so the mask memory is bounded."""
        self.cache.write(start, k, v)
        n, groups = q.shape[-2], self.shape.groups
        outs = []
        step = max(1, self.MASK_ELEMENTS // (start + n))
        for a in range(0, n, step):
            stop = start + min(n, a + step)  # keys 0 .. stop - 1
            positions = torch.arange(start + a, stop, device=q.device)
            mask = torch.arange(stop, device=q.device) <= positions[:, None]  # (m, stop)
            keys, values = self.cache.k[:, :, :stop], self.cache.v[:, :, :stop]
            out = F.scaled_dot_product_attention(
                q[:, :, a : a + step], keys, values, attn_mask=mask, enable_gqa=groups > 1
            )
            outs.append(out)
        return torch.cat(outs, dim=2)


_announce = functools.cache(log.info)  # each message once per process


class RecomputeDecoder(LayerDecoder):
    """Fallback: keeps every query, key and value and reruns forward per token (its last row)."""

    def __init__(self, pattern, shape: DecodeShape):
        super().__init__(pattern, shape)
        self.queries = KVCache(shape, shape.max_length, heads=shape.heads)
        name = type(pattern).__qualname__
        _announce("%s has no incremental decoder: each token reruns its forward", name)

    def prefill(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        self.queries.write(0, q, q)
        return super().prefill(q, k, v)

    def step(self, q: Tensor, k: Tensor, v: Tensor, position: int) -> Tensor:
        self.cache.write(position, k, v)
        self.queries.write(position, q, q)
        end = position + 1
        out = self.pattern(
            self.queries.k[:, :, :end], self.cache.k[:, :, :end], self.cache.v[:, :, :end]
        )
        return out[:, :, -1:]

    def describe(self) -> str:
        return f"whole past, queries too ({self.cache.capacity} rows; recomputed per token)"

    @property
    def nbytes(self) -> int:
        return self.cache.nbytes + self.queries.k.nbytes

    def fill_random(self, length: int, generator: torch.Generator) -> None:
        super().fill_random(length, generator)
        self.queries.fill_random(length, generator)


def _layer_list(layers: list[int]) -> str:
    """``layer 3``, ``layers 0-2, 4``: ascending layer indices, runs joined."""
    runs: list[list[int]] = []
    for layer in layers:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    shown = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"layer{'s' if len(layers) > 1 else ''} {shown}"


@dataclass
class DecodingCache:
    """Every layer's decoder for one batch of sequences (``LanguageModel.new_cache``)."""

    layers: list[LayerDecoder]
    fused: bool = True
    """Whether a token's step may run each layer as one compiled call where the kernel takes it
    (the model's ``BlockStep``); False: the modules' own path, the reference."""
    steps: list | None = field(default=None, repr=False)
    """The model's per-layer compiled steps, gathered at the first fused step (None: not yet)."""

    @property
    def position(self) -> int:
        """Positions decoded so far (the next token's position)."""
        return self.layers[0].position

    @property
    def max_length(self) -> int:
        return self.layers[0].shape.max_length

    @property
    def nbytes(self) -> int:
        """Bytes of every layer's cache buffers, as allocated now."""
        return sum(layer.nbytes for layer in self.layers)

    def describe(self) -> str:
        """The caches in words, identical layers once: ``5 layers: ring of 988 rows``; a
        hybrid's ``layers 0-2, 4: ring of 988 rows; layer 3: whole past (4107 rows)``."""
        words = [layer.describe() for layer in self.layers]
        if len(set(words)) == 1:
            return f"{len(words)} layers: {words[0]}"
        groups: dict[str, list[int]] = {}
        for layer, word in enumerate(words):
            groups.setdefault(word, []).append(layer)
        return "; ".join(f"{_layer_list(layers)}: {word}" for word, layers in groups.items())

    def fill_random(self, length: int, seed: int = 0) -> None:
        """Every layer as if ``length`` positions were decoded, with random keys and values."""
        if not 0 < length < self.max_length:
            raise ValueError(f"length={length}: must be in [1, max_length={self.max_length})")
        generator = torch.Generator(device=self.layers[0].shape.device).manual_seed(seed)
        for layer in self.layers:
            layer.fill_random(length, generator)
