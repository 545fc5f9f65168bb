"""The chunked gather kernel (lit_sparse/kernels/gather.py) against the dense reference:
outputs and the gradients of q, k, v and the rungs' weights, for exact distances, rungs and
absolute keys together, with grouped heads, in one chunk and across several."""

from __future__ import annotations

import pytest
import torch

from lit_sparse.kernels import KeySlots, gather
from lit_sparse.kernels.gather import gather_attention
from lit_sparse.kernels.reference import slots_attention

LENGTH = 40


def mixed_slots() -> KeySlots:
    """Distances 0-2, rungs at 4 and 9 (one invalid), BigBird-like keys per block of 8."""
    gen = torch.Generator().manual_seed(1)
    return KeySlots(
        distances=torch.tensor([0, 1, 2]),
        reach=11,
        rung_lo=torch.tensor([4, 9, 6]),
        rung_frac=torch.tensor([0.3, 0.8, 0.5], dtype=torch.float64, requires_grad=True),
        rung_valid=torch.tensor([True, True, False]),
        block_keys=torch.randint(-1, LENGTH, (LENGTH // 8, 2), generator=gen),
        block_size=8,
        min_abs_distance=3,
    )


def outputs_and_grads(op, slots: KeySlots) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    shapes = [(2, 4, LENGTH, 8), (2, 2, LENGTH, 8), (2, 2, LENGTH, 8)]
    q, k, v = (
        torch.randn(s, generator=gen, dtype=torch.float64, requires_grad=True) for s in shapes
    )
    out = op(q, k, v, slots)
    weights = torch.randn(out.shape, generator=gen, dtype=out.dtype)
    return [out, *torch.autograd.grad((out * weights).sum(), (q, k, v, slots.rung_frac))]


@pytest.mark.parametrize("chunks", ["one chunk", "chunks of 16 queries"])
def test_outputs_and_gradients_equal_the_dense_reference(chunks, monkeypatch):
    if chunks != "one chunk":
        monkeypatch.setattr(gather, "_CHUNK_ELEMENTS", 1)  # the smallest chunk: 16 queries
    slots = mixed_slots()
    ours = outputs_and_grads(gather_attention, slots)
    want = outputs_and_grads(slots_attention, slots)
    for name, a, b in zip(["out", "dq", "dk", "dv", "dfrac"], ours, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=name)


def test_float32_inputs_give_float32_outputs_summed_in_float32():
    q, k, v = (torch.randn(1, 2, 12, 4) for _ in range(3))
    slots = KeySlots(torch.tensor([0, 1, 3]), reach=4)
    out = gather_attention(q, k, v, slots)
    assert out.dtype == torch.float32
    want = slots_attention(q.double(), k.double(), v.double(), slots)
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-6)
