"""Every registered plugin through the conformance kit (lit_sparse.testing), over each
plugin's ``conformance_cases``: training path == dense reference, causality, prefix
consistency, config round trips; checkpoint round trips over each plugin's bench
configurations; parameter counts. (Linear memory: test_kernel_memory.py.)"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lit_sparse import LanguageModel, ModelConfig, build_attention, list_attention, testing
from lit_sparse.attention.registry import all_bench_cases
from lit_sparse.attention.schedules import Learned

from .cases import plugin_cases

WINDOWS = (0, 6, 12)
LENGTHS = (1, 7, 64, 257)
CASE_IDS = sorted(plugin_cases(8))
MAIN_CASES = all_bench_cases(keys=23, window=12)  # each plugin's main configurations


def test_every_registered_plugin_has_cases():
    covered = {type(plugin).name for plugin in plugin_cases(8).values()}
    assert covered == set(list_attention())


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_training_path_matches_reference(case, length, window):
    testing.check_reference(plugin_cases(window)[case], lengths=(length,))


@pytest.mark.parametrize("rungs", ("fibonacci", "pow2"))
@pytest.mark.parametrize("window", WINDOWS)
def test_learned_theta_gradient_float64(rungs, window):
    """In float64 the learned paths agree to 1e-10, theta's gradient included."""
    plugin = build_attention("fibonacci", window=window, schedule="learned", rungs=rungs)
    for pattern in testing.layer_patterns(plugin):
        pattern.double()
        inputs = [*testing.qkv(257, dtype=torch.float64), *pattern.parameters()]
        out, grads = testing.output_and_grads(pattern, inputs)
        ref, ref_grads = testing.output_and_grads(pattern.reference, inputs)
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
        for grad, ref_grad in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(grad, ref_grad, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", CASE_IDS)
@settings(max_examples=12, deadline=None)
@given(length=st.integers(2, 80), cut=st.integers(0, 79), seed=st.integers(0, 2**16))
def test_causality(case, length, cut, seed):
    """Changing q, k, v after position t leaves outputs at positions <= t unchanged."""
    plugin = plugin_cases(6)[case]
    testing.check_causality(plugin, (length,), (cut,), seed=seed, whole_model=False)


@pytest.mark.parametrize("case", CASE_IDS)
def test_causality_of_a_whole_model(case):
    testing.check_causality(plugin_cases(6)[case])


@pytest.mark.parametrize("case", CASE_IDS)
def test_prefix_consistency(case):
    testing.check_prefix_consistency(plugin_cases(6)[case])


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_slot_bounds(case, window):
    testing.check_slot_bounds(plugin_cases(window)[case])


@pytest.mark.parametrize("case", CASE_IDS)
def test_config_round_trip(case):
    testing.check_config_round_trip(plugin_cases(6)[case])


@pytest.mark.parametrize("case", sorted(MAIN_CASES))
def test_checkpoint_round_trip(case):
    testing.check_checkpoint_round_trip(MAIN_CASES[case])


@pytest.mark.parametrize("case", CASE_IDS)
def test_parameter_count_equals_dense(case):
    plugin = plugin_cases(8, n_layers=16)[case]
    extra = 16 if isinstance(getattr(plugin, "schedule", None), Learned) else 0
    with torch.device("meta"):  # shapes only: the paper's model
        assert LanguageModel(ModelConfig(), plugin).num_parameters() == 60_850_688 + extra


@pytest.mark.parametrize("length", (7, 64, 257))
def test_dense_equals_fibonacci_with_full_window(length):
    q, k, v = (x.detach() for x in testing.qkv(length))
    dense = build_attention("dense").build(0, 1, length)
    full = build_attention("fibonacci", window=length - 1).build(0, 1, length)
    torch.testing.assert_close(full(q, k, v), dense(q, k, v), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("window", WINDOWS)
def test_sliding_window_equals_fibonacci_without_rungs(window):
    q, k, v = (x.detach() for x in testing.qkv(100))
    sliding = build_attention("sliding_window", window=window).build(0, 1, 100)
    no_rungs = build_attention("fibonacci", window=window, n_rungs=0).build(0, 1, 100)
    torch.testing.assert_close(sliding(q, k, v), no_rungs(q, k, v))
