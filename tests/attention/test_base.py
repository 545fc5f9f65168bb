"""A wide slot set runs on the CPU as SDPA with its mask (lit_sparse.kernels.masked), with the
slot op's outputs and gradients; narrow sets and interpolated rungs keep the slot op (when
the mask is cheaper: tests/kernels/test_masked.py)."""

from __future__ import annotations

import pytest
import torch

from lit_sparse import BigBirdAttention, FibonacciAttention, SlidingWindowAttention
from lit_sparse.attention import base
from lit_sparse.kernels import sparse_attention

LENGTH = 96


@pytest.fixture
def ops(monkeypatch) -> list[str]:
    """The ops the patterns' forward called, in order."""
    called = []
    for name in ("masked_attention", "sparse_attention"):
        real = getattr(base, name)
        monkeypatch.setattr(base, name, lambda *a, _n=name, _f=real: called.append(_n) or _f(*a))
    return called


def inputs(length=LENGTH, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(2, 4, length, 16), (2, 2, length, 16), (2, 2, length, 16)]
    return [torch.randn(s, generator=gen, dtype=torch.float64, requires_grad=True) for s in shapes]


def outputs_and_grads(op, q, k, v):
    out = op(q, k, v)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    return [out, *torch.autograd.grad((out * weights).sum(), (q, k, v))]


WIDE = {
    "a window of 60 keys": SlidingWindowAttention(window=60),
    "a window as long as the sequence": SlidingWindowAttention(window=LENGTH),
    "bigbird with a wide window": BigBirdAttention(
        window=60, n_global=2, n_random=3, block_size=16
    ),
    "fibonacci fixed at a short length": FibonacciAttention(window=60),
}


@pytest.mark.parametrize("name", sorted(WIDE))
def test_a_wide_slot_set_runs_masked_and_matches_the_slot_op(name, ops):
    pattern = WIDE[name].build(0, 2, LENGTH).double()
    slots = pattern.slots(LENGTH, torch.device("cpu"))
    q, k, v = inputs()
    ours = outputs_and_grads(pattern, q, k, v)
    assert ops == ["masked_attention"]
    slot_op = outputs_and_grads(lambda *x: sparse_attention(*x, slots), q, k, v)
    for a, b in zip(ours, slot_op, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "plugin",
    [SlidingWindowAttention(window=8), FibonacciAttention(window=60, schedule="learned")],
    ids=["a narrow window", "learned rungs (a mask cannot blend two rows)"],
)
def test_narrow_sets_and_rungs_keep_the_slot_op(plugin, ops):
    pattern = plugin.build(0, 2, LENGTH).double()
    pattern(*inputs())
    assert ops == ["sparse_attention"]


def test_the_mask_is_built_once_per_length(ops, monkeypatch):
    built = []
    real = base.slots_mask
    monkeypatch.setattr(base, "slots_mask", lambda *a: built.append(a[1]) or real(*a))
    pattern = SlidingWindowAttention(window=60).build(0, 2, LENGTH).double()
    for length in (LENGTH, LENGTH, 80, LENGTH):
        pattern(*inputs(length))
    assert built == [LENGTH, 80]
