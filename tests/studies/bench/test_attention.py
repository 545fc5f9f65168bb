"""The attention bench's plugins and masks (lit_sparse_studies/bench/attention.py): a row per
registered plugin, each sparse one at fibonacci's keys per query, and the FlexAttention block
mask that keeps the tiles a plugin's distances touch and gives its output. The command:
tests/studies/commands/test_bench.py."""

from __future__ import annotations

import pytest

from lit_sparse import list_attention
from lit_sparse_studies.bench.attention import (
    LEARNED,
    bench_plugins,
    build_plugin,
    fibonacci_keys,
    flex_block_mask,
)


def test_every_registered_plugin_has_a_bench_row():
    rows = bench_plugins(12, fibonacci_keys(12, 1024))
    assert {type(plugin).name for plugin in rows.values()} == set(list_attention())
    assert {"dense", "fibonacci", LEARNED} <= set(rows)


@pytest.mark.parametrize("name", list(bench_plugins(12, fibonacci_keys(12, 1024))))
def test_plugins_attend_equal_keys_per_query(name):
    """The bench's configurations give every sparse plugin fibonacci's keys per query."""
    if name == "dense":
        return
    length, window = 1024, 12
    keys = fibonacci_keys(window, length)
    slots = build_plugin(name, window, keys).build(0, 16, length).slots(length, "cpu")
    rungs = int(slots.rung_valid.sum()) if slots.n_rungs else 0  # learned: only valid rungs
    assert len(slots.distances) + rungs + slots.n_absolute == keys


@pytest.mark.parametrize("name", ["fibonacci", LEARNED, "bigbird", "sliding_window"])
@pytest.mark.parametrize("length", [300, 1000])
def test_the_flex_mask_gives_the_plugins_output(name, length):
    """FlexAttention (forward: it has no CPU backward) with the bench's block mask equals
    the plugin's reference at lengths that are not multiples of its 128-row tiles, for exact
    distances, rungs (learned, at their starting integer distances) and absolute keys."""
    import warnings

    import torch
    from torch.nn.attention.flex_attention import flex_attention

    window = 12
    pattern = build_plugin(name, window, fibonacci_keys(window, length)).build(0, 16, length)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 8, length, 64, generator=gen)
    k, v = (torch.randn(1, 2, length, 64, generator=gen) for _ in range(2))
    mask = flex_block_mask(pattern.slots(length, "cpu"), length, "cpu")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager flex warns that it is unfused
        got = flex_attention(q, k, v, block_mask=mask, enable_gqa=True)
    torch.testing.assert_close(got, pattern.reference(q, k, v), atol=1e-5, rtol=1e-5)


def test_the_block_mask_keeps_the_tiles_its_distances_touch():
    """Fibonacci's distances (0..13, 21, 34, ..., 610, 987) reach 987: a query tile keeps
    the tiles 0, 1, 2, 3, 4, 5, 7 and 8 tiles back (the tiles 6 back span distances
    641..895, which hold none; 9 back start at 1025), so at 4,096 the mask keeps fewer
    tiles than causal attention's; a window of 23 keys keeps the diagonal and the one
    before it; dense keeps every causal tile, the ones below the diagonal full."""
    from lit_sparse.kernels import exact_slots
    from lit_sparse_studies.bench.attention import block_density

    length, n = 4096, 32
    fibonacci = build_plugin("fibonacci", 12, fibonacci_keys(12, length)).build(0, 16, length)
    mask = flex_block_mask(fibonacci.slots(length, "cpu"), length, "cpu")
    kept = [sum(1 for back in (0, 1, 2, 3, 4, 5, 7, 8) if back <= i) for i in range(n)]
    assert mask.kv_num_blocks.flatten().tolist() == kept
    assert block_density(mask) == pytest.approx(sum(kept) / (n * (n + 1) / 2))
    window = flex_block_mask(exact_slots(list(range(23))), length, "cpu")
    assert window.kv_num_blocks.flatten().tolist() == [1] + [2] * (n - 1)
    dense = flex_block_mask(exact_slots(list(range(length))), length, "cpu")
    assert block_density(dense) == 1.0
    full = dense.full_kv_num_blocks.flatten().tolist()
    assert full == list(range(n))  # every tile below the diagonal is full
