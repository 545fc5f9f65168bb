"""Batch rows of a decoding cache picked, reordered or repeated (beam search,
``num_return_sequences``; lit_sparse/interop/hf/decoders.py): every KVCache of every layer
follows the rows, the original is left as it was."""

from __future__ import annotations

import torch

from lit_sparse.attention.decoding import (
    DecodeShape,
    DecodingCache,
    LayerDecoder,
    RecomputeDecoder,
)
from lit_sparse.interop.hf.decoders import rows_of

SHAPE = DecodeShape(
    batch=2, heads=2, kv_heads=1, head_dim=3, max_length=6, device=torch.device("cpu"),
    dtype=torch.float32,
)  # fmt: skip


def filled_cache() -> DecodingCache:
    """A layer with two KVCaches (keys and values; queries) and a ring of 2 rows, 3 positions
    decoded."""
    gen = torch.Generator().manual_seed(0)
    recompute, ring = RecomputeDecoder(None, SHAPE), LayerDecoder(None, SHAPE, capacity=2)
    for layer in (recompute, ring):
        layer.fill_random(3, gen)
    recompute.queries.fill_random(3, gen)
    return DecodingCache([recompute, ring])


def test_every_kv_cache_of_every_layer_follows_the_rows():
    cache = filled_cache()
    rows = torch.tensor([1, 1, 0])
    picked = rows_of(cache, rows)
    for old, new in zip(cache.layers, picked.layers, strict=True):
        assert type(new) is type(old) and new.shape.batch == 3 and new.position == 3
        assert new.cache.capacity == old.cache.capacity
        assert torch.equal(new.cache.k, old.cache.k[rows])
        assert torch.equal(new.cache.v, old.cache.v[rows])
    assert torch.equal(picked.layers[0].queries.k, cache.layers[0].queries.k[rows])
    assert picked.layers[0].queries.heads == SHAPE.heads


def test_the_original_cache_is_left_as_it_was():
    cache = filled_cache()
    before = [(layer.cache.k.clone(), layer.cache.v.clone()) for layer in cache.layers]
    picked = rows_of(cache, torch.tensor([0]))
    for layer in picked.layers:
        layer.cache.k.add_(1)
        layer.cache.v.add_(1)
        layer.position += 1
    for layer, (k, v) in zip(cache.layers, before, strict=True):
        assert layer.shape.batch == 2 and layer.position == 3
        assert torch.equal(layer.cache.k, k) and torch.equal(layer.cache.v, v)
