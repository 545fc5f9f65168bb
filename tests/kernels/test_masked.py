"""When the slots run as SDPA with their mask (lit_sparse/kernels/masked.py): on the CPU, from
half the length, without interpolated rungs, and never past MASKED_MAX_LENGTH."""

from __future__ import annotations

import torch

from lit_sparse.kernels import KeySlots, exact_slots
from lit_sparse.kernels.masked import MASKED_MAX_LENGTH, MASKED_SHARE, masked_is_cheaper


def q_of(length: int, device: str = "cpu") -> torch.Tensor:
    return torch.empty(1, 1, length, 1, device=device)


def test_the_masked_product_runs_from_half_the_length():
    length = 64
    assert MASKED_SHARE == 1 / 2
    assert masked_is_cheaper(q_of(length), exact_slots(range(32)))
    assert not masked_is_cheaper(q_of(length), exact_slots(range(31)))


def test_long_lengths_keep_the_slot_op():
    """Past MASKED_MAX_LENGTH the (T, T) mask is not built, whatever the share."""
    every_distance = exact_slots(range(MASKED_MAX_LENGTH + 1))
    for length, expected in ((MASKED_MAX_LENGTH, True), (MASKED_MAX_LENGTH + 1, False)):
        assert masked_is_cheaper(q_of(length), every_distance) is expected


def test_interpolated_rungs_keep_the_slot_op():
    """A mask cannot blend two rows, however many keys the rungs add."""
    wide = exact_slots(range(40))
    rungs = KeySlots(
        distances=wide.distances,
        reach=48,
        rung_lo=torch.tensor([44]),
        rung_frac=torch.tensor([0.5]),
        rung_valid=torch.tensor([True]),
    )
    assert masked_is_cheaper(q_of(64), wide)
    assert not masked_is_cheaper(q_of(64), rungs)


def test_other_devices_keep_the_slot_op():
    assert not masked_is_cheaper(q_of(64, device="meta"), exact_slots(range(64)))
