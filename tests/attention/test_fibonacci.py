"""Fibonacci plugin: schedules per layer, learned alpha, options, lengths beyond training."""

import math
import re

import pytest
import torch

from lit_sparse import FibonacciAttention, LanguageModel, ModelConfig
from lit_sparse.attention import offsets
from lit_sparse.attention.fibonacci_patterns import LearnedFibonacciPattern
from lit_sparse.attention.schedules import Coprime, Custom, Learned, Linear, to_schedule


def tiny(n_layers=16, context_length=1024):
    return ModelConfig(
        vocab_size=64,
        context_length=context_length,
        n_layers=n_layers,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )


def build(schedule="fixed", rungs="fibonacci", window=8, new_offsets="use", n_layers=16):
    plugin = FibonacciAttention(
        window=window, schedule=schedule, rungs=rungs, new_offsets=new_offsets
    )
    return LanguageModel(tiny(n_layers), plugin)


@pytest.mark.parametrize("schedule", ["linear", "coprime"])
def test_model_alphas_follow_the_schedule(schedule):
    model = build(schedule)
    expected = to_schedule(schedule).layer_alphas(16)
    torch.testing.assert_close(model.alphas(), torch.tensor(expected))


def test_learned_alpha_starts_at_one_with_theta_zero():
    model = build("learned")
    assert all(float(p.theta.detach()) == 0.0 for p in model.patterns)
    torch.testing.assert_close(model.alphas(), torch.ones(16))


def test_distance_counts_at_1024():
    assert [len(d) for d in build("fixed").distances()] == [19] * 16
    union = offsets.union_distances(build("linear").distances())
    assert len(union) == 133


@pytest.mark.parametrize(
    ("schedule", "rungs", "gainers"),
    [
        ("fixed", "fibonacci", {}),
        ("linear", "fibonacci", {layer: 1 for layer in range(9, 16)}),
        ("coprime", "fibonacci", {layer: 1 for layer in (2, 4, 6, 9, 11, 13, 15)}),
        ("learned", "fibonacci", {}),
        ("fixed", "pow2", {layer: 2 for layer in range(16)}),
        ("linear", "pow2", None),  # checked below: rungs 1024 and 2048, scaled
    ],
)
def test_unseen_distances_at_4096(schedule, rungs, gainers):
    model = build(schedule, rungs)
    used = model.unseen_distances(4096)
    dropped = build(schedule, rungs, new_offsets="drop").unseen_distances(4096)
    assert all(d == [] for d in dropped.values())
    if gainers is not None:
        assert {layer: len(d) for layer, d in used.items() if d} == gainers
    if rungs == "fibonacci":
        assert all(x > 1023 for d in used.values() for x in d)
    if rungs == "pow2":
        for layer, alpha in enumerate(model.alphas().tolist()):
            # the powers past the training base add distances from the training length on
            later = {round(alpha * f) for f in (1024, 2048, 4096)}
            assert set(used[layer]) == {d for d in later if 1024 <= d <= 4095}
            if alpha >= 1:  # the paper's set at 4096: rungs 1024 and 2048, scaled
                assert set(used[layer]) == {round(alpha * f) for f in (1024, 2048)}
    if rungs == "pow2" and schedule == "fixed":
        assert all(d == [1024, 2048] for d in used.values())


def test_drop_policy_matches_training_pattern_at_any_length():
    model = build("linear", new_offsets="drop")
    assert model.distances(4096) == model.distances(1024)


def test_learned_rung_rules_match_plain_reference():
    """The vectorised rung rules equal offsets.interpolated_rungs for many alphas."""
    pattern = FibonacciAttention(schedule="learned", window=6).build(0, 1, 300)
    assert isinstance(pattern, LearnedFibonacciPattern)
    for theta in torch.linspace(-6, 6, 97):
        with torch.no_grad():
            pattern.theta.fill_(theta)
        slots = pattern.slots(300, torch.device("cpu"))
        kept = [
            (int(lo), float(frac.detach()))
            for lo, frac, ok in zip(slots.rung_lo, slots.rung_frac, slots.rung_valid, strict=True)
            if ok
        ]
        expected = offsets.interpolated_rungs(
            pattern.alpha_value(), pattern.rung_values(300)[0], 6, 300
        )
        assert [lo for lo, _ in kept] == [lo for lo, _ in expected]
        assert [f for _, f in kept] == pytest.approx([f for _, f in expected], abs=1e-4)


def test_theta_gradient_is_nonzero_at_alpha_one_and_matches_finite_differences():
    pattern = FibonacciAttention(schedule="learned", window=4).build(0, 1, 120).double()
    assert float(pattern.alpha.detach()) == 1.0  # a learned alpha holds a graph
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 120, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 120, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    (grad,) = torch.autograd.grad(pattern(q, k, v).square().sum(), pattern.theta)
    assert grad.abs() > 1e-3

    def loss_at(theta):
        with torch.no_grad():
            pattern.theta.fill_(theta)
            return float(pattern(q, k, v).square().sum())

    # alpha = 1 is a kink of floor(): a one-sided difference from above
    eps = 1e-6
    assert float(grad) == pytest.approx((loss_at(eps) - loss_at(0.0)) / eps, rel=1e-4)
    pattern.theta.data.fill_(0.0)


@pytest.mark.slow
def test_theta_gradcheck_float64():
    pattern = FibonacciAttention(schedule="learned", window=3).build(0, 1, 90).double()
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 90, 4, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(1, 1, 90, 4, generator=gen, dtype=torch.float64) for _ in range(2))

    for start in (0.3, -1.1):  # away from the floor() kinks
        theta = torch.tensor(start, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(
            lambda q, k, v, theta: theta_bound_forward(pattern, q, k, v, theta), (q, k, v, theta)
        )


def theta_bound_forward(pattern, q, k, v, theta):
    """The pattern's forward with theta supplied as an input (for gradcheck)."""
    saved = pattern.theta
    del pattern.theta
    pattern.theta = theta
    try:
        return pattern(q, k, v)
    finally:
        del pattern.theta
        pattern.theta = saved


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": -1}, "window must be >= 0, got -1"),
        ({"rungs": "primes"}, "rungs must be one of"),
        ({"schedule": "cosine"}, "schedule must be one of"),
        ({"schedule": "custom"}, "schedule='custom' needs options"),
        ({"schedule": {"class_path": "Linear", "init_args": {"alphas": [1.0]}}}, "alphas"),
        ({"new_offsets": "keep"}, "new_offsets must be"),
    ],
)
def test_bad_options_raise_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        FibonacciAttention(**kwargs)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Linear(alpha_min=1.5, alpha_max=0.5), "0 < alpha_min < alpha_max"),
        (lambda: Coprime(alpha_min=0.0), "alpha_min=0.0"),
        (lambda: Learned(alpha_max=math.inf), "alpha_max=inf"),
        (lambda: Custom([1.0, -1.0]), "each in (0, inf), got [1.0, -1.0]"),
    ],
)
def test_bad_schedule_options_raise_naming_the_field(build, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


def test_custom_alphas_of_wrong_length_fail_at_model_build():
    with pytest.raises(ValueError, match=r"one alpha per layer \(16\), got 3"):
        LanguageModel(tiny(), FibonacciAttention(schedule=Custom([1.0, 1.1, 1.2])))
