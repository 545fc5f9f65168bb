"""BigBird, causal: which keys each query sees, and that the draw is stable across lengths."""

import pytest
import torch

from lit_sparse import BigBirdAttention
from lit_sparse.kernels.reference import slots_mask

WINDOW, N_GLOBAL, N_RANDOM, BLOCK = 4, 3, 5, 16


def pattern(layer=0, seed=0, training_length=128):
    plugin = BigBirdAttention(
        window=WINDOW, n_global=N_GLOBAL, n_random=N_RANDOM, block_size=BLOCK, seed=seed
    )
    return plugin.build(layer, 4, training_length)


def attended(layer=0, seed=0, length=128):
    bigbird = pattern(layer, seed)
    return slots_mask(bigbird.slots(length, torch.device("cpu")), length)


def test_each_query_sees_its_window_the_globals_and_earlier_random_keys():
    mask = attended()
    for i in range(128):
        keys = set(torch.nonzero(mask[i]).flatten().tolist())
        window = set(range(max(0, i - WINDOW), i + 1))
        globals_ = set(range(min(N_GLOBAL, i + 1)))
        randoms = keys - window - globals_
        assert window | globals_ <= keys
        assert all(j <= i for j in keys), "causal"
        block_start = (i // BLOCK) * BLOCK
        assert all(N_GLOBAL <= j < block_start - WINDOW for j in randoms)
        assert len(randoms) <= N_RANDOM
        if block_start - WINDOW - N_GLOBAL >= 40:  # plenty of candidates: nearly all distinct
            assert len(randoms) >= N_RANDOM - 1


def test_queries_of_a_block_share_their_random_keys():
    mask = attended()
    for block_start in range(0, 128, BLOCK):
        rows = mask[block_start : block_start + BLOCK, : max(0, block_start - WINDOW)].clone()
        rows[:, :N_GLOBAL] = False
        assert (rows == rows[0]).all()


def test_pattern_is_deterministic_and_independent_of_length():
    short, long = attended(length=64), attended(length=256)
    assert torch.equal(short, long[:64, :64])
    assert torch.equal(attended(), attended())


def test_layers_and_seeds_draw_differently():
    assert not torch.equal(attended(layer=0), attended(layer=1))
    assert not torch.equal(attended(seed=0), attended(seed=1))


def test_random_keys_cover_the_past_uniformly():
    """Over many blocks, draws land in every fifth of the allowed range."""
    keys = pattern().slots(8192, torch.device("cpu")).block_keys[:, N_GLOBAL:]
    starts = torch.arange(keys.shape[0])[:, None] * BLOCK
    valid = keys >= 0
    relative = (keys - N_GLOBAL).float() / (starts - WINDOW - N_GLOBAL).clamp(min=1)
    counts = torch.histc(relative[valid], bins=5, min=0, max=1)
    assert counts.min() > 0.8 * counts.mean()


def test_more_random_keys_than_a_block_has_candidates_are_all_of_them():
    """Issue 47: ``n_random`` past what a block can draw from allocated (blocks, n_random)
    slots, so memory and the FLOP count grew with it. A block with no more candidates than
    ``n_random`` now takes them all, the slots are as wide as the widest block's candidates,
    and a block with more candidates draws exactly as before."""
    huge = BigBirdAttention(window=WINDOW, n_global=N_GLOBAL, n_random=100_000, block_size=BLOCK)
    slots = huge.build(0, 4, 128).slots(128, torch.device("cpu"))
    last_candidates = 128 - BLOCK - WINDOW - N_GLOBAL  # the last block's [n_global, s - window)
    assert slots.block_keys.shape == (128 // BLOCK, N_GLOBAL + last_candidates)
    mask = slots_mask(slots, 128)
    for i in range(128):
        block_start = (i // BLOCK) * BLOCK
        seen = set(torch.nonzero(mask[i]).flatten().tolist())
        assert seen == set(range(min(N_GLOBAL, i + 1))) | set(
            range(N_GLOBAL, max(N_GLOBAL, block_start - WINDOW))
        ) | set(range(max(0, i - WINDOW), i + 1))
    long = slots_mask(huge.build(0, 4, 128).slots(256, torch.device("cpu")), 256)
    assert torch.equal(mask, long[:128, :128]), "still independent of the length"
    # n_random below every later block's candidates: the same draws as before the clamp
    few = BigBirdAttention(window=WINDOW, n_global=N_GLOBAL, n_random=N_RANDOM, block_size=BLOCK)
    keys = few.build(0, 4, 128).slots(128, torch.device("cpu")).block_keys
    assert keys.shape == (8, N_GLOBAL + N_RANDOM)
    assert keys[1:, N_GLOBAL:].tolist() == [
        [3, 4, 9, -1, 11],
        [17, 21, 23, 25, 27],
        [6, 20, 34, 37, 39],
        [9, 11, 46, -1, 49],
        [9, 11, 21, 68, 75],
        [34, 36, 37, 38, 86],
        [20, 35, 44, 51, 98],
    ]


@pytest.mark.parametrize(("field", "value"), [("window", -1), ("n_random", -2), ("block_size", 0)])
def test_bad_options_raise_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"{field} must be >= "):
        BigBirdAttention(**{field: value})
