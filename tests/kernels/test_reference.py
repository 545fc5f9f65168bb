"""The dense references (lit_sparse/kernels/reference.py) against hand-written masks and
torch's causal attention: the slots' (T, T) mask, exact and absolute keys, and a rung's blend
of its two taps."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lit_sparse.kernels import KeySlots, exact_slots
from lit_sparse.kernels.reference import masked_attention, slots_attention, slots_mask


def qkv(length: int, heads: int = 2, kv_heads: int = 1, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(1, heads, length, 4), (1, kv_heads, length, 4), (1, kv_heads, length, 4)]
    return [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]


def test_exact_distances_mask_a_causal_band():
    assert slots_mask(exact_slots([0, 2]), 4).int().tolist() == [
        [1, 0, 0, 0],
        [0, 1, 0, 0],
        [1, 0, 1, 0],
        [0, 1, 0, 1],
    ]


def test_absolute_keys_count_past_the_minimum_distance_only():
    """Blocks of 2 queries; block 0 reads no key, block 1 keys 0, 1 and 3 from a distance of
    2: query 2 adds key 0 (key 1 is too near), query 3 keys 0 and 1 (key 3 is itself)."""
    slots = KeySlots(
        distances=torch.tensor([0]),
        reach=1,
        block_keys=torch.tensor([[-1, -1, -1], [0, 1, 3]]),
        block_size=2,
        min_abs_distance=2,
    )
    assert slots_mask(slots, 4).int().tolist() == [
        [1, 0, 0, 0],
        [0, 1, 0, 0],
        [1, 0, 1, 0],
        [1, 1, 0, 1],
    ]


def test_every_distance_is_torchs_causal_attention_with_grouped_heads():
    q, k, v = qkv(6)
    every = exact_slots(range(6))
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(slots_attention(q, k, v, every), causal, rtol=1e-12, atol=1e-12)
    mask = slots_mask(every, 6)
    torch.testing.assert_close(masked_attention(q, k, v, mask), causal, rtol=1e-12, atol=1e-12)


def test_a_rung_blends_its_two_taps_and_waits_for_its_lower_one():
    """A rung at lo=2 with frac 0 is key i - 2, with frac 1 key i - 3 (row 0 before it);
    queries before position 2 do not see it."""
    q, k, v = qkv(5, heads=1)

    def rung(frac: float) -> KeySlots:
        return KeySlots(
            distances=torch.tensor([0]),
            reach=4,
            rung_lo=torch.tensor([2]),
            rung_frac=torch.tensor([frac], dtype=torch.float64),
            rung_valid=torch.tensor([True]),
        )

    for frac, distance in ((0.0, 2), (1.0, 3)):
        mask = slots_mask(exact_slots([0]), 5)
        i = torch.arange(5)
        mask[i[2:], (i[2:] - distance).clamp(min=0)] = True
        want = masked_attention(q, k, v, mask)
        torch.testing.assert_close(slots_attention(q, k, v, rung(frac)), want)
