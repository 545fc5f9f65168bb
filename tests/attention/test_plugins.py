"""Every registered plugin: training path == dense reference, causality, parameter counts."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lit_sparse import LanguageModel, ModelConfig, build_attention, list_attention
from lit_sparse.attention.fibonacci import LearnedFibonacciPattern

from .cases import plugin_cases

N_LAYERS, HEADS, KV_HEADS, HEAD_DIM = 2, 4, 2, 16
WINDOWS = (0, 6, 12)
LENGTHS = (1, 7, 64, 257)
CASE_IDS = sorted(plugin_cases(8))


def test_every_registered_plugin_has_cases():
    covered = {type(plugin).name for plugin in plugin_cases(8).values()}
    assert covered == set(list_attention())


def layer_patterns(plugin, training_length=64):
    """Both layers' patterns; learned thetas moved off 0 so rungs interpolate."""
    patterns = [plugin.build(layer, N_LAYERS, training_length) for layer in range(N_LAYERS)]
    for layer, pattern in enumerate(patterns):
        if isinstance(pattern, LearnedFibonacciPattern):
            with torch.no_grad():
                pattern.theta.fill_(0.37 - 0.9 * layer)
    return patterns


def qkv(length, batch=2, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, HEADS, length, HEAD_DIM), (batch, KV_HEADS, length, HEAD_DIM)
    q = torch.randn(shape[0], generator=gen, dtype=dtype).requires_grad_()
    k = torch.randn(shape[1], generator=gen, dtype=dtype).requires_grad_()
    v = torch.randn(shape[1], generator=gen, dtype=dtype).requires_grad_()
    return q, k, v


def outputs_and_grads(path, q, k, v, pattern):
    out = path(q, k, v)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    inputs = [q, k, v] + list(pattern.parameters())
    grads = torch.autograd.grad((out * weights).sum(), inputs, allow_unused=True)
    return out, [
        torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads, strict=True)
    ]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_training_path_matches_reference(case, length, window):
    plugin = plugin_cases(window)[case]
    for pattern in layer_patterns(plugin):
        q, k, v = qkv(length)
        out, grads = outputs_and_grads(pattern, q, k, v, pattern)
        ref, ref_grads = outputs_and_grads(pattern.reference, q, k, v, pattern)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        assert len(grads) == len(ref_grads)
        for grad, ref_grad in zip(grads[:3], ref_grads[:3], strict=True):  # q, k, v
            torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-5)
        for grad, ref_grad in zip(grads[3:], ref_grads[3:], strict=True):
            # theta's gradient sums every position's score differences: in fp32 both paths
            # sit ~2e-4 (relative) from the float64 value, so they agree to 1e-4 here and
            # to 1e-10 in float64 (test_learned_theta_gradient_float64)
            torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rungs", ("fibonacci", "pow2"))
@pytest.mark.parametrize("window", WINDOWS)
def test_learned_theta_gradient_float64(rungs, window):
    plugin = build_attention("fibonacci", window=window, schedule="learned", rungs=rungs)
    for pattern in layer_patterns(plugin):
        pattern.double()
        q, k, v = qkv(257, dtype=torch.float64)
        out, grads = outputs_and_grads(pattern, q, k, v, pattern)
        ref, ref_grads = outputs_and_grads(pattern.reference, q, k, v, pattern)
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
        for grad, ref_grad in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(grad, ref_grad, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", CASE_IDS)
@settings(max_examples=12, deadline=None)
@given(length=st.integers(2, 80), cut=st.integers(0, 79), seed=st.integers(0, 2**16))
def test_causality(case, length, cut, seed):
    """Changing q, k, v after position t leaves outputs at positions <= t unchanged."""
    cut = cut % length
    for pattern in layer_patterns(plugin_cases(6)[case], training_length=32):
        q, k, v = (x.detach() for x in qkv(length, seed=seed))
        q2, k2, v2 = (x.clone() for x in (q, k, v))
        for x in (q2, k2, v2):
            x[:, :, cut + 1 :] = torch.randn_like(x[:, :, cut + 1 :]) * 3
        before, after = pattern(q, k, v), pattern(q2, k2, v2)
        torch.testing.assert_close(before[:, :, : cut + 1], after[:, :, : cut + 1])


@pytest.mark.parametrize("case", CASE_IDS)
def test_whole_model_is_causal_and_runs_beyond_training_length(case):
    config = ModelConfig(
        vocab_size=97,
        context_length=32,
        n_layers=N_LAYERS,
        d_model=64,
        n_heads=HEADS,
        n_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
    )
    model = LanguageModel(config, plugin_cases(6)[case])
    ids = torch.randint(0, 97, (2, 80), generator=torch.Generator().manual_seed(3))
    changed = ids.clone()
    changed[:, 50:] = (changed[:, 50:] + 1) % 97
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[:, :50], model(changed)[:, :50])


@pytest.mark.parametrize("case", CASE_IDS)
def test_parameter_count_equals_dense(case):
    plugin = plugin_cases(8, n_layers=16)[case]
    extra = 16 if getattr(plugin, "schedule", None) == "learned" else 0
    with torch.device("meta"):  # shapes only
        assert LanguageModel(ModelConfig(), plugin).num_parameters() == 60_850_688 + extra


@pytest.mark.parametrize("length", (7, 64, 257))
def test_dense_equals_fibonacci_with_full_window(length):
    q, k, v = (x.detach() for x in qkv(length))
    dense = build_attention("dense").build(0, 1, length)
    full = build_attention("fibonacci", window=length - 1).build(0, 1, length)
    torch.testing.assert_close(full(q, k, v), dense(q, k, v), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("window", WINDOWS)
def test_sliding_window_equals_fibonacci_without_rungs(window):
    q, k, v = (x.detach() for x in qkv(100))
    sliding = build_attention("sliding_window", window=window).build(0, 1, 100)
    no_rungs = build_attention("fibonacci", window=window, n_rungs=0).build(0, 1, 100)
    torch.testing.assert_close(sliding(q, k, v), no_rungs(q, k, v))
