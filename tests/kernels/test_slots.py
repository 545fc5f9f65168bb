"""Key slots (lit_sparse/kernels/slots.py): the checks a pattern's slots pass and those a
kernel's guard keeps, what a kernel reads at a length, and the rung layout's blend and split."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from lit_sparse.kernels.slots import (
    KeySlots,
    blend_rungs,
    exact_slots,
    rung_grad,
    split_rungs,
)


def rungs(lo: list[int], frac: list[float], valid: list[bool], distances=(0, 1), reach=8):
    return KeySlots(
        distances=torch.tensor(distances),
        reach=reach,
        rung_lo=torch.tensor(lo),
        rung_frac=torch.tensor(frac, dtype=torch.float64),
        rung_valid=torch.tensor(valid),
    )


def test_slots_per_query_count_every_kind():
    keys = torch.zeros(2, 3, dtype=torch.long)
    both = replace(rungs([2, 3], [0.5, 0.5], [True, True]), block_keys=keys)
    assert exact_slots([0, 1, 4]).keys_per_query == 3
    assert both.keys_per_query == 2 + 2 + 3 and both.n_rungs == 2 and both.n_absolute == 3


@pytest.mark.parametrize(
    ("slots", "problem"),
    [
        (exact_slots([1, 2]), "distances must be distinct and ascending from 0, got"),
        (exact_slots([0, 2, 2]), "distances must be distinct and ascending from 0, got"),
        (KeySlots(torch.tensor([0, 3]), reach=3), "reach=3 must be above the largest distance 3"),
        (rungs([8], [0.5], [True]), "rung lo 8 must be below reach=8"),
    ],
)
def test_a_patterns_slots_are_ascending_from_0_and_below_reach(slots, problem):
    """What a built pattern must give; a kernel's guard (built=False) lets these through."""
    with pytest.raises(ValueError, match=rf"^Window: slots at length 16: {problem}"):
        slots.check(16, "Window")
    slots.check(16, "Window", built=False)


def test_an_absolute_key_outside_the_sequence_is_refused_when_built():
    slots = KeySlots(torch.tensor([0]), reach=1, block_keys=torch.tensor([[0], [8]]), block_size=4)
    with pytest.raises(ValueError, match=r"absolute key 8 is outside the sequence \(0..7\)$"):
        slots.check(8)
    slots.check(8, built=False)


@pytest.mark.parametrize(
    ("slots", "problem"),
    [
        (KeySlots(torch.zeros(0, dtype=torch.long), reach=1), "non-empty"),
        (KeySlots(torch.tensor([0.0, 1.0]), reach=2), "non-empty 1-D integer tensor, got"),
        (KeySlots(torch.tensor([0]), reach=1, block_size=0), "block_size=0 must be >= 1"),
        (
            KeySlots(torch.tensor([0]), reach=1, block_keys=torch.tensor([[0.5]])),
            "block_keys must be a 2-D integer tensor",
        ),
    ],
)
def test_slots_no_kernel_can_read_are_refused_by_the_guard(slots, problem):
    with pytest.raises(ValueError, match=problem):
        slots.check(4, built=False)


def test_a_kernel_reads_the_distances_and_valid_rungs_below_the_length():
    slots = rungs([2, 3, 6], [0.25, 0.5, 0.75], [True, False, True], distances=(0, 1, 5))
    exact, keep, lo, frac = slots.read_at(4, "k")
    assert exact.tolist() == [0, 1] and keep.tolist() == [0]  # rung 1 invalid, rung 2 too far
    assert lo.tolist() == [2] and frac.tolist() == [0.25]
    exact, keep, lo, frac = exact_slots([0, 3]).read_at(8, "k")
    assert exact.tolist() == [0, 3] and keep is None and lo.numel() == frac.numel() == 0


def test_split_is_the_adjoint_of_blend_and_rung_grad_scatters_the_kept():
    """<blend(rows), values> == <rows, split(values)> for any rows: the backward of the blend."""
    gen = torch.Generator().manual_seed(0)
    m, r, others = 2, 3, 1
    frac = torch.rand(r, generator=gen, dtype=torch.float64)
    rows = torch.randn(4, m + 2 * r + others, generator=gen, dtype=torch.float64)
    values = torch.randn(4, m + r + others, generator=gen, dtype=torch.float64)
    blended = blend_rungs(rows, m, r, frac)
    assert blended.shape == values.shape
    torch.testing.assert_close(blended[:, 2], rows[:, 2] + frac[0] * (rows[:, 5] - rows[:, 2]))
    torch.testing.assert_close(
        (blended * values).sum(), (rows * split_rungs(values, m, r, frac)).sum()
    )
    assert blend_rungs(rows, m, 0, None) is rows and split_rungs(values, m, 0, None) is values
    grad = rung_grad(torch.tensor([2.0, 3.0]), torch.tensor([0, 2]), 4, torch.float32)
    assert grad.tolist() == [2.0, 0.0, 3.0, 0.0] and grad.dtype == torch.float32
    assert rung_grad(torch.zeros(0), None, 0, torch.float32) is None
