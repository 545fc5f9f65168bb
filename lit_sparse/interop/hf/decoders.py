"""Reordering and repeating batch rows (beam search, ``num_return_sequences``) for any
:class:`~lit_sparse.attention.decoding.LayerDecoder` whose batch state is its
:class:`~lit_sparse.attention.decoding.KVCache` attributes (every built-in decoder)."""

from __future__ import annotations

import copy
from dataclasses import replace

from torch import Tensor

from lit_sparse.attention.decoding import DecodingCache, KVCache, LayerDecoder


def rows_of(cache: DecodingCache, rows: Tensor) -> DecodingCache:
    """Copies of the decoders of batch rows ``rows`` of ``cache`` (a row may repeat)."""
    return DecodingCache([_layer_rows(layer, rows) for layer in cache.layers])


def _layer_rows(decoder: LayerDecoder, rows: Tensor) -> LayerDecoder:
    new = copy.copy(decoder)
    new.shape = replace(decoder.shape, batch=int(rows.numel()))
    for name, old in vars(decoder).items():
        if isinstance(old, KVCache):
            kv = copy.copy(old)
            index = rows.to(old.k.device)
            kv.k, kv.v = old.k.index_select(0, index), old.v.index_select(0, index)
            setattr(new, name, kv)
    return new
