"""What transformers asks of a cache that lit_sparse's decoders do not do themselves: a
longer sequence than the cache was built for, and another set of batch rows (beam search,
``num_return_sequences``).

Both work on any :class:`~lit_sparse.attention.decoding.LayerDecoder` whose state is its
``position`` and its :class:`~lit_sparse.attention.decoding.KVCache` attributes (every
built-in decoder: the slot ring, dense's and the recompute fallback's whole past).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch
from torch import Tensor

from lit_sparse.attention.decoding import DecodingCache, KVCache, LayerDecoder

__all__ = ["grown", "rows_of"]


def _kv_caches(decoder: LayerDecoder) -> dict[str, KVCache]:
    return {name: value for name, value in vars(decoder).items() if isinstance(value, KVCache)}


def grown(cache: DecodingCache, max_length: int) -> DecodingCache:
    """``cache`` rebuilt for sequences of up to ``max_length`` positions, with every cached
    row copied over: a ring keeps its size (its reach), a whole past gets the new length."""
    return DecodingCache([_grown_layer(layer, max_length) for layer in cache.layers])


def _grown_layer(decoder: LayerDecoder, max_length: int) -> LayerDecoder:
    new = decoder.pattern.decoder(replace(decoder.shape, max_length=max_length))
    position = decoder.position
    for name, old in _kv_caches(decoder).items():
        target = getattr(new, name)
        kept = min(position, old.capacity, target.capacity)
        positions = torch.arange(position - kept, position, device=old.k.device)
        source, rows = old.rows(positions), target.rows(positions)
        target.k.index_copy_(2, rows, old.k.index_select(2, source))
        target.v.index_copy_(2, rows, old.v.index_select(2, source))
    new.position = position
    return new


def rows_of(cache: DecodingCache, rows: Tensor) -> DecodingCache:
    """The decoders of batch rows ``rows`` of ``cache`` (a row may repeat: beams that share
    a parent), each its own copy."""
    return DecodingCache([_layer_rows(layer, rows) for layer in cache.layers])


def _layer_rows(decoder: LayerDecoder, rows: Tensor) -> LayerDecoder:
    new = copy.copy(decoder)
    new.shape = replace(decoder.shape, batch=int(rows.numel()))
    for name, old in _kv_caches(decoder).items():
        kv = copy.copy(old)
        index = rows.to(old.k.device)
        kv.k, kv.v = old.k.index_select(0, index), old.v.index_select(0, index)
        setattr(new, name, kv)
    return new
