"""The per-length cache of what a pattern builds (lit_sparse/attention/length_cache.py): built
once per key, at most ``entries`` kept, the least recently used evicted, built outside
inference mode."""

from __future__ import annotations

import torch

from lit_sparse.attention.length_cache import LengthCache


def test_a_value_is_built_once_per_key():
    cache, built = LengthCache(), []
    for length in (8, 8, 16, 8):
        assert cache.get(length, lambda n=length: built.append(n) or n * 2) == length * 2
    assert built == [8, 16] and len(cache) == 2


def test_the_least_recently_used_key_is_evicted_first():
    cache, built = LengthCache(entries=2), []
    for length in (1, 2, 1, 3, 1, 2):  # 3 evicts 2 (1 was used since), then 2 evicts 3
        cache.get(length, lambda n=length: built.append(n) or n)
    assert built == [1, 2, 3, 2] and len(cache) == 2


def test_a_value_built_in_inference_mode_is_usable_in_training():
    cache = LengthCache()
    with torch.inference_mode():
        mask = cache.get(4, lambda: torch.ones(4))
    assert not mask.is_inference()
    weight = torch.ones(4, requires_grad=True)
    (weight * mask).sum().backward()  # an inference tensor here would raise
    assert torch.equal(weight.grad, mask)
