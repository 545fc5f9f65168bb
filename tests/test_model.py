"""The language model: the paper's shape and init, RoPE, seeding, and its compiled
decoding step beside the modules' path."""

import math

import pytest
import torch

from lit_sparse import FibonacciAttention, LanguageModel, ModelConfig, build_attention
from lit_sparse.generation.weights import bfloat16_weights
from lit_sparse.model import RotaryEmbedding
from tests.shapes import small_config


def test_paper_parameter_counts():
    with torch.device("meta"):
        model = LanguageModel(ModelConfig())
        learned = LanguageModel(ModelConfig(), FibonacciAttention(schedule="learned"))
    assert model.num_parameters() == 60_850_688
    assert model.num_parameters(exclude_embedding=True) == 44_073_472
    assert learned.num_parameters() - model.num_parameters() == 16


def test_paper_defaults():
    config = ModelConfig()
    assert config.ffn_width == 1366
    assert config.std == pytest.approx(512**-0.5)
    # derived values follow the fields they derive from (a default stays a default)
    assert ModelConfig(d_model=128, n_heads=2).ffn_width == 342
    assert ModelConfig(d_model=128, n_heads=2).std == pytest.approx(128**-0.5)
    block = LanguageModel(small_config()).blocks[0]
    assert block.attn.k_proj.out_features == 2 * 16  # K/V at their own head count


def test_init_standard_deviations():
    torch.manual_seed(0)
    model = LanguageModel(ModelConfig(n_layers=2))
    std = 512**-0.5
    assert model.embedding.weight.std().item() == pytest.approx(std, rel=0.01)
    assert model.blocks[0].attn.q_proj.weight.std().item() == pytest.approx(std, rel=0.01)
    residual = std / math.sqrt(2 * 2)
    assert model.blocks[1].attn.o_proj.weight.std().item() == pytest.approx(residual, rel=0.01)
    assert model.blocks[1].ffn.down.weight.std().item() == pytest.approx(residual, rel=0.01)
    assert torch.equal(model.norm.weight, torch.ones(512))


def test_head_is_tied_and_there_are_no_biases():
    model = LanguageModel(small_config())
    names = [name for name, _ in model.named_parameters()]
    assert not any("bias" in name for name in names)
    ids = torch.randint(0, 101, (1, 5))
    hidden = model.embedding(ids)
    for block in model.blocks:
        hidden = block(hidden)
    torch.testing.assert_close(model(ids), model.norm(hidden) @ model.embedding.weight.T)


def test_same_seed_builds_bit_identical_models():
    states = []
    for _ in range(2):
        torch.manual_seed(42)
        states.append(LanguageModel(small_config(), "fibonacci").state_dict())
    assert all(torch.equal(states[0][key], states[1][key]) for key in states[0])


def test_rope_scores_depend_only_on_relative_position():
    rope = RotaryEmbedding(16, 1e4)
    q, k = (
        torch.randn(1, 1, 1, 16).expand(1, 1, 50, 16),
        torch.randn(1, 1, 1, 16).expand(1, 1, 50, 16),
    )
    scores = rope(q)[0, 0] @ rope(k)[0, 0].T  # (50, 50)
    torch.testing.assert_close(scores[10, 3], scores[40, 33], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(scores[7, 7], scores[49, 49], rtol=1e-4, atol=1e-4)
    assert rope.state_dict() == {}  # tables are never saved


def test_rope_rotates_halves():
    rope = RotaryEmbedding(4, 1e4)
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 1, 1, 4).expand(1, 1, 2, 4)
    out = rope(x)[0, 0, 1]  # position 1; frequencies 1 and 1e-2
    c0, s0, c1, s1 = math.cos(1), math.sin(1), math.cos(0.01), math.sin(0.01)
    expected = [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1]
    torch.testing.assert_close(out, torch.tensor(expected))


@pytest.mark.parametrize("length", [1, 32, 100])
def test_the_same_weights_run_at_any_length(length):
    model = LanguageModel(small_config(), FibonacciAttention(schedule="linear"))
    logits = model(torch.randint(0, 101, (2, length)))
    assert logits.shape == (2, length, 101) and torch.isfinite(logits).all()


@pytest.mark.parametrize("narrow", [bfloat16_weights, lambda model: model.to(torch.bfloat16)])
def test_forward_is_the_head_of_the_features_in_bfloat16(narrow):
    """The sparse-label path (``head(features(x))`` at the labelled positions) runs the
    network ``forward`` runs: bfloat16 matrices with float32 norms (decoding weights) and a
    model wholly in bfloat16 alike, bit for bit."""
    torch.manual_seed(0)
    model = narrow(LanguageModel(small_config(), FibonacciAttention(schedule="learned")))
    idx = torch.randint(0, 101, (2, 40))  # 80 rows: every product takes one path
    with torch.no_grad():
        logits = model(idx)
        assert logits.dtype == model.norm.weight.dtype
        assert torch.equal(model.head(model.features(idx)), logits)


# ------------------------------------------------------------ the compiled decoding step
def fused_and_modules_logits(model, ids, prompt=5):
    """Logits of ``ids`` after a prefill of ``prompt`` tokens, one token at a time, through
    the compiled layer step and through the modules, and each cache's compiled steps."""
    runs = []
    for fused in (True, False):
        cache = model.new_cache(ids.shape[0], ids.shape[1], fused=fused)
        with torch.inference_mode():
            logits = [model(ids[:, :prompt], cache)]
            logits += [model(ids[:, t : t + 1], cache) for t in range(prompt, ids.shape[1])]
        runs.append((torch.cat(logits, dim=1), cache.steps))
    return runs


DECODE_CASES = {
    "fibonacci-learned": {
        "class_path": "fibonacci",
        "init_args": {"window": 2, "schedule": "learned"},
    },
    "bigbird": {"class_path": "bigbird", "init_args": {"window": 2, "n_global": 1, "n_random": 2}},
    "dense": "dense",
    "hybrid": {"class_path": "hybrid", "init_args": {"every": 2}},
}


@pytest.mark.parametrize("weights", ["float32", "decoding_layout", "bfloat16", "int8"])
@pytest.mark.parametrize("case", sorted(DECODE_CASES))
def test_the_compiled_layer_step_decodes_as_the_modules_do(case, weights):
    """Batch 2 past the ring's wrap: every layer takes the compiled step, the greedy tokens are
    the modules' and the logits agree to float32 rounding (norms and RoPE sum in another order),
    for float32 weights as trained and fused, bfloat16 and int8 ones."""
    from lit_sparse.generation import decoding_layout, quantize_int8

    torch.manual_seed(0)
    config = small_config(context_length=16, n_layers=4)
    model = LanguageModel(config, build_attention(DECODE_CASES[case])).eval()
    if weights == "decoding_layout":
        decoding_layout(model)
    elif weights == "bfloat16":
        decoding_layout(bfloat16_weights(model))
    elif weights == "int8":
        quantize_int8(model)
    ids = torch.randint(0, config.vocab_size, (2, 60), generator=torch.Generator().manual_seed(1))
    (fused, steps), (modules, no_steps) = fused_and_modules_logits(model, ids)
    assert all(step is not None for step in steps) and no_steps is None
    assert torch.equal(fused.argmax(-1), modules.argmax(-1))
    torch.testing.assert_close(fused, modules, rtol=0, atol=2e-5)


def test_a_pattern_with_its_own_step_and_gradients_keep_the_modules():
    """The Gaussian rung read decodes through its own step (no compiled layer step for it), and
    with gradients on every layer runs its modules (the compiled step records none)."""
    torch.manual_seed(0)
    gaussian = {"class_path": "fibonacci", "init_args": {"window": 2, "schedule": {
        "class_path": "learned", "init_args": {"read": "gaussian"}}}}  # fmt: skip
    model = LanguageModel(small_config(context_length=16), build_attention(gaussian)).eval()
    ids = torch.randint(0, 100, (1, 30), generator=torch.Generator().manual_seed(1))
    (fused, steps), (modules, _) = fused_and_modules_logits(model, ids)
    assert steps == [None] * len(model.blocks)
    assert torch.equal(fused, modules)
    model = LanguageModel(small_config(context_length=16), build_attention("fibonacci")).eval()
    cache = model.new_cache(1, 30)
    model(ids[:, :5], cache)
    logits = model(ids[:, 5:6], cache)  # gradients on
    assert cache.steps is None and logits.requires_grad


def test_compiled_and_module_layers_mix_in_one_stack():
    """A hybrid of Gaussian-read layers (their own step) and dense ones: the dense layers take
    the compiled step, the others their modules, and the tokens and logits are the modules'."""
    gaussian = {"class_path": "fibonacci", "init_args": {"window": 2, "schedule": {
        "class_path": "learned", "init_args": {"read": "gaussian"}}}}  # fmt: skip
    hybrid = {"class_path": "hybrid", "init_args": {"local_attention": gaussian, "every": 2}}
    torch.manual_seed(0)
    model = LanguageModel(small_config(context_length=16, n_layers=4), build_attention(hybrid))
    ids = torch.randint(0, 101, (2, 40), generator=torch.Generator().manual_seed(1))
    (fused, steps), (modules, _) = fused_and_modules_logits(model.eval(), ids)
    assert [step is not None for step in steps] == [False, True, False, True]
    assert torch.equal(fused.argmax(-1), modules.argmax(-1))
    torch.testing.assert_close(fused, modules, rtol=0, atol=2e-5)
