"""Fibonacci's patterns (lit_sparse.attention.fibonacci_patterns) where the paper's code and a
plain reading of its text differ (docs/paper.md, "Differences"): the learned rung's first row,
the learned skip rule, pow2 rungs below and beyond the training length. (The coprime
schedule's warning: test_schedules.py.)"""

from __future__ import annotations

import math

import pytest
import torch

from lit_sparse import FibonacciAttention
from lit_sparse.attention import offsets
from lit_sparse.attention.fibonacci_patterns import LearnedFibonacciPattern
from lit_sparse.attention.schedules import Custom, Linear

FIB15 = offsets.fibonacci_rungs(15)


def learned(window: int, training_length: int, theta: float = 0.0) -> LearnedFibonacciPattern:
    pattern = FibonacciAttention(window=window, schedule="learned").build(0, 1, training_length)
    with torch.no_grad():
        pattern.theta.fill_(theta)
    return pattern


def qkv(length: int, dtype=torch.float64, seed: int = 0, heads: int = 4, kv_heads: int = 2):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, heads, length, 16, generator=gen, dtype=dtype)
    k = torch.randn(1, kv_heads, length, 16, generator=gen, dtype=dtype)
    v = torch.randn(1, kv_heads, length, 16, generator=gen, dtype=dtype)
    return q, k, v


def paper_read(pattern: LearnedFibonacciPattern, q, k, v):
    """The learned layer as the paper's code computes it, written out densely: every rung's
    virtual row (1 - frac) * row[i - lo] + frac * row[i - lo - 1], the row index clamped to
    0 where it would be -1, valid for i >= lo; rungs kept by the floor rule."""
    length, dim = q.shape[-2], q.shape[-1]
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    alpha = pattern.alpha
    i = torch.arange(length)
    logits, values = [], []
    for d in range(pattern.window + 1):
        row = (i - d).clamp(min=0)
        logits.append(((q * k[:, :, row]).sum(-1) / math.sqrt(dim)).masked_fill(i < d, -1e30))
        values.append(v[:, :, row])
    used = set(range(pattern.window + 1))
    for f in FIB15:
        target = alpha * f
        lo = math.floor(float(target.detach()))
        if lo in used or lo > length - 1:
            continue
        used.add(lo)
        frac = target - lo
        low, high = (i - lo).clamp(min=0), (i - lo - 1).clamp(min=0)
        key = (1 - frac) * k[:, :, low] + frac * k[:, :, high]
        value = (1 - frac) * v[:, :, low] + frac * v[:, :, high]
        logits.append(((q * key).sum(-1) / math.sqrt(dim)).masked_fill(i < lo, -1e30))
        values.append(value)
    probs = torch.softmax(torch.stack(logits, -1), -1)  # (B, H, T, slots)
    return (probs[..., None] * torch.stack(values, -2)).sum(-2)


@pytest.mark.parametrize("theta", [0.0, 0.37, -1.1])
def test_learned_layer_equals_the_papers_read_with_its_theta_gradient(theta):
    """At the paper's init (alpha = 1, frac = 0) and away from it, T = 256 (the quickstart)."""
    pattern = learned(window=8, training_length=256, theta=theta).double()
    q, k, v = qkv(256)
    weights = torch.randn(1, 4, 256, 16, dtype=torch.float64)
    ours = pattern(q, k, v)
    (grad,) = torch.autograd.grad((ours * weights).sum(), pattern.theta)
    theirs = paper_read(pattern, q, k, v)
    (their_grad,) = torch.autograd.grad((theirs * weights).sum(), pattern.theta)
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(grad, their_grad, rtol=1e-8, atol=1e-10)


def test_a_rungs_first_row_gives_theta_no_gradient():
    """W = 8, alpha = 1: at row 13 the only rung is 13, at its first row, where its upper
    tap's row -1 does not exist: that row's output does not depend on theta."""
    pattern = learned(window=8, training_length=64).double()
    q, k, v = qkv(64)
    out = pattern(q, k, v)
    (grad,) = torch.autograd.grad(out[:, :, 13].sum(), pattern.theta)
    assert grad.item() == 0.0
    (grad_next,) = torch.autograd.grad(pattern(q, k, v)[:, :, 14].sum(), pattern.theta)
    assert grad_next.item() != 0.0  # one row later both taps exist: theta's gradient flows


def test_theta_gradient_equals_a_finite_difference_of_the_loss():
    pattern = learned(window=6, training_length=200, theta=0.21).double()
    q, k, v = qkv(200, seed=3)
    weights = torch.randn(1, 4, 200, 16, dtype=torch.float64)

    def loss() -> torch.Tensor:
        return (pattern(q, k, v) * weights).sum()

    (grad,) = torch.autograd.grad(loss(), pattern.theta)
    eps = 1e-6
    with torch.no_grad():
        pattern.theta += eps
        up = loss()
        pattern.theta -= 2 * eps
        down = loss()
        pattern.theta += eps
    assert grad.item() == pytest.approx(((up - down) / (2 * eps)).item(), rel=1e-6)


@pytest.mark.parametrize("window", [6, 8, 12])
def test_a_rung_whose_lower_tap_is_a_window_distance_is_dropped(window):
    """alpha * f in (W + 0.5, W + 1): round(alpha f) = W + 1 is beyond the window, but its
    lower tap floor(alpha f) = W is one of the window's distances: the paper drops it."""
    f = 13 if window == 12 else next(f for f in FIB15 if f > window)
    alpha = (window + 0.75) / f
    assert offsets.interpolated_rungs(alpha, [f], window, 1024) == []
    theta = math.log((alpha - 0.5) / (1.5 - alpha))  # alpha = 0.5 + sigmoid(theta)
    pattern = learned(window=window, training_length=1024, theta=theta)
    slots = pattern.slots(1024, torch.device("cpu"))
    rung = FIB15.index(f)
    assert int(slots.rung_lo[rung]) == window and not bool(slots.rung_valid[rung])


def test_every_alpha_in_the_dropped_band_at_w12():
    """For W = 12 the rung 13 is dropped for every alpha in (12.5/13, 1), where a learned
    alpha goes as soon as it dips below its start."""
    for alpha in torch.linspace(12.5 / 13 + 1e-4, 1 - 1e-4, 50).tolist():
        lows = [lo for lo, _ in offsets.interpolated_rungs(alpha, FIB15, 12, 1024)]
        assert 12 not in lows and all(lo > 12 for lo in lows)


@pytest.mark.parametrize("schedule", ["fixed", "linear", "coprime"])
@pytest.mark.parametrize("new_offsets", ["use", "drop"])
def test_pow2_distances_of_a_prefix_are_the_prefix_of_the_distances(schedule, new_offsets):
    """A position's distances do not depend on the sequence's length, below and beyond the
    training length (64 here): the powers of two come from the training length."""
    plugin = FibonacciAttention(window=2, rungs="pow2", schedule=schedule, new_offsets=new_offsets)
    for layer in range(8):
        pattern = plugin.build(layer, 8, 64)
        longest = pattern.distances(300)
        for length in range(1, 300):
            assert pattern.distances(length) == [d for d in longest if d < length], (
                layer,
                length,
            )


def test_pow2_keeps_the_papers_sets_at_the_training_length():
    """At the length the model is built at, the rungs are the paper's: every power of two
    <= T - 1, kept when round(alpha f) fits (a layer with alpha < 1 keeps rung 512)."""
    for alpha in Linear().layer_alphas(16):
        pattern = FibonacciAttention(window=8, rungs="pow2", schedule=Custom([alpha]))
        layer = pattern.build(0, 1, 1024)
        paper = offsets.layer_distances(alpha, offsets.pow2_rungs(1024), 8, 1024)
        assert layer.distances(1024) == paper
        assert layer.distances(600) == [d for d in paper if d < 600]


@pytest.mark.parametrize("theta", [0.0, 0.8, -0.6])
def test_learned_pow2_beyond_the_training_length_is_prefix_consistent(theta):
    """A learned layer's later pow2 rungs exist at a length as soon as some alpha in range
    could read them there: at alpha 1 (theta 0), rung 64 of a model trained at 64 is read
    by position 64 of a 65-token sequence as in a 300-token one (found by the conformance
    kit: the rung was added only once alpha_max * 64 fit)."""
    plugin = FibonacciAttention(window=2, rungs="pow2", schedule="learned")
    pattern = plugin.build(0, 1, 64).double()
    with torch.no_grad():
        pattern.theta.fill_(theta)
    q, k, v = qkv(300)
    full = pattern(q, k, v)
    for length in (64, 65, 97, 129, 200):
        part = pattern(q[:, :, :length], k[:, :, :length], v[:, :, :length])
        torch.testing.assert_close(part, full[:, :, :length], rtol=1e-10, atol=1e-10)
