"""The Gaussian ("blur") rung read (gaussian_read.py) and learned alphas from a given start."""

from __future__ import annotations

import math

import pytest
import torch

from lit_sparse import FibonacciAttention, LanguageModel, ModelConfig
from lit_sparse.attention.gaussian_read import GaussianFibonacciPattern, rung_width_at
from lit_sparse.attention.schedules import Gaussian, Interpolate, Learned


def gaussian_pattern(window=2, length=40, theta=0.3, width=3.0, n_rungs=8):
    plugin = FibonacciAttention(window=window, n_rungs=n_rungs, schedule=Learned(read="gaussian"))
    pattern = plugin.build(0, 1, length).double()
    assert isinstance(pattern, GaussianFibonacciPattern)
    with torch.no_grad():
        pattern.theta.fill_(theta)
        pattern.rung_width.fill_(width)
    return pattern


def direct(pattern, q, k, v):
    """Loops over queries, heads and rungs: each rung a virtual key and value, the Gaussian
    average of the rows j <= i weighted by exp(-(i - j - alpha f)^2 / (2 sigma^2))."""
    batch, heads, length, dim = q.shape
    groups = heads // k.shape[1]
    alpha = float(pattern.alpha)
    sigma = float(pattern.rung_width)
    window = pattern.window
    kept, used = [], set()
    for f in pattern.rung_values(length)[0]:  # the learned rung rules, written out
        t = alpha * f
        lo = math.floor(t)
        if lo <= window or lo > length - 1 or lo in used:  # the window's distances are used
            continue
        used.add(lo)
        kept.append((t, lo))
    out = torch.zeros_like(q)
    for b in range(batch):
        for h in range(heads):
            kk, vv = k[b, h // groups], v[b, h // groups]
            for i in range(length):
                keys, values = [], []
                for d in range(min(window, i) + 1):
                    keys.append(kk[i - d])
                    values.append(vv[i - d])
                for t, lo in kept:
                    if i < lo:
                        continue
                    w = torch.tensor(
                        [math.exp(-((i - j - t) ** 2) / (2 * sigma**2)) for j in range(i + 1)],
                        dtype=q.dtype,
                    )
                    w = w / w.sum()
                    keys.append((w[:, None] * kk[: i + 1]).sum(0))
                    values.append((w[:, None] * vv[: i + 1]).sum(0))
                scores = torch.stack(keys) @ q[b, h, i] / math.sqrt(dim)
                out[b, h, i] = torch.softmax(scores, 0) @ torch.stack(values)
    return out


@pytest.mark.parametrize("theta, width", [(0.3, 3.0), (-1.2, 0.5), (2.0, 12.0)])
def test_gaussian_read_matches_direct_computation(theta, width):
    pattern = gaussian_pattern(theta=theta, width=width)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 40, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 40, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    torch.testing.assert_close(pattern(q, k, v), direct(pattern, q, k, v))


def test_narrow_band_at_integer_targets_equals_exact_distances():
    """alpha = 1 (theta 0) puts every centre on an integer: a tiny width reads that row."""
    pattern = gaussian_pattern(window=3, length=64, theta=0.0, width=0.05)
    fixed = FibonacciAttention(window=3, n_rungs=8).build(0, 1, 64)
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 64, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, 2, 64, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    torch.testing.assert_close(pattern(q, k, v), fixed.reference(q, k, v))


def test_theta_gets_a_gradient_and_it_matches_finite_differences():
    pattern = gaussian_pattern(theta=0.3, width=4.0)
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(1, 4, 40, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 40, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    (grad,) = torch.autograd.grad(pattern(q, k, v).square().sum(), pattern.theta)

    def loss_at(theta):
        with torch.no_grad():
            pattern.theta.fill_(theta)
            return float(pattern(q, k, v).square().sum())

    eps = 1e-6
    numeric = (loss_at(0.3 + eps) - loss_at(0.3 - eps)) / (2 * eps)
    assert abs(float(grad)) > 1e-4
    assert float(grad) == pytest.approx(numeric, rel=1e-5)


def test_width_anneals_linearly_then_holds():
    assert rung_width_at(0.0, 40, 0.5, 0.8) == 40
    assert rung_width_at(0.4, 40, 0.5, 0.8) == pytest.approx(40 + (0.5 - 40) * 0.5)
    assert rung_width_at(0.8, 40, 0.5, 0.8) == pytest.approx(0.5)
    assert rung_width_at(1.0, 40, 0.5, 0.8) == pytest.approx(0.5)
    pattern = gaussian_pattern()
    pattern.set_progress(0.2)
    assert float(pattern.rung_width) == pytest.approx(40 + (0.5 - 40) * 0.25)


def test_width_is_saved_with_the_weights():
    pattern = gaussian_pattern(width=7.5)
    assert float(pattern.state_dict()["rung_width"]) == 7.5


def test_default_read_is_unchanged():
    plugin = FibonacciAttention(schedule="learned")
    assert plugin.schedule.read == Interpolate()
    assert type(plugin.build(0, 2, 64)).__name__ == "LearnedFibonacciPattern"


def test_learned_alphas_start_from_a_given_list():
    start = [0.55, 1.45]
    config = ModelConfig(
        vocab_size=64,
        context_length=64,
        n_layers=2,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )
    model = LanguageModel(config, FibonacciAttention(schedule=Learned(init=start)))
    torch.testing.assert_close(model.alphas(), torch.tensor(start))
    assert all(p.theta.requires_grad for p in model.patterns)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Learned(init=[0.5, 1.0]), "strictly between alpha_min=0.5"),
        (lambda: Learned(init=[]), "expected one alpha per layer"),
        (lambda: Learned(read="blur"), "read must be one of 'interpolate', 'gaussian'"),
        (lambda: Gaussian(width_end=0.0), "width_end must be > 0 and finite, got 0.0"),
        (lambda: Gaussian(anneal=1.5), "anneal must be in (0, 1], got 1.5"),
    ],
)
def test_bad_options_name_the_field(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        build()


def test_alpha_init_of_the_wrong_length_fails_at_model_build():
    config = ModelConfig(
        vocab_size=64,
        context_length=64,
        n_layers=3,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )
    with pytest.raises(ValueError, match=r"init: needs one alpha per layer \(3\), got 2"):
        LanguageModel(config, FibonacciAttention(schedule=Learned(init=[1.0, 1.1])))
