"""FLOPs: dense equals Lightning's measure_flops (torch's flop counter on the meta device);
sparse layers count their own key slots; training is 3x forward."""

from __future__ import annotations

import pytest
import torch
from lightning.fabric.utilities.throughput import measure_flops

from lit_sparse import LanguageModel, ModelConfig, build_attention
from lit_sparse.evaluation import (
    flops_per_batch,
    forward_flops_per_token,
    keys_per_query,
    model_flops_per_token,
)

TINY = dict(vocab_size=512, n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16)


def meta_model(attention, **shape) -> LanguageModel:
    with torch.device("meta"):
        return LanguageModel(ModelConfig(**{**TINY, **shape}), build_attention(attention))


@pytest.mark.parametrize(
    "shape, batch, length",
    [
        ({"context_length": 64}, 3, 64),
        ({"context_length": 128, "n_kv_heads": 3, "d_model": 96, "n_heads": 6}, 2, 100),
        (
            {
                "context_length": 1024,
                "n_layers": 16,
                "d_model": 512,
                "n_heads": 8,
                "head_dim": 64,
                "vocab_size": 32768,
            },
            1,
            1024,
        ),
    ],
    ids=["tiny", "odd-length", "paper"],
)
def test_dense_matches_measure_flops(shape, batch, length):
    model = meta_model({"class_path": "dense", "init_args": {"backend": "sdpa"}}, **shape)
    with torch.device("meta"):
        x = torch.randint(0, model.config.vocab_size, (batch, length))
    forward = measure_flops(model, lambda: model(x))
    training = measure_flops(model, lambda: model(x), lambda out: out.sum())
    assert flops_per_batch(model, batch, length, training=False) == pytest.approx(forward, rel=0.01)
    assert flops_per_batch(model, batch, length) == pytest.approx(training, rel=0.01)


def test_terms_by_hand():
    config = ModelConfig(**TINY, context_length=64)  # ffn_hidden = int(64 * 8 / 3) -> 170
    flops = forward_flops_per_token(config, keys=[10, 20])
    assert flops.attention_scores == flops.attention_mixing == 2 * 4 * 16 * 30
    assert flops.projections == 2 * 2 * 64 * (2 * 64 + 2 * 2 * 16)
    assert flops.mlp == 2 * 2 * 3 * 64 * 170
    assert flops.lm_head == 2 * 64 * 512
    assert flops.total == pytest.approx(
        sum(
            flops.as_dict()[k]
            for k in ("attention_scores", "attention_mixing", "projections", "mlp", "lm_head")
        )
    )
    assert flops.scaled(3).total == pytest.approx(3 * flops.total)
    with pytest.raises(ValueError, match="one count per layer"):
        forward_flops_per_token(config, keys=[1])


def test_sparse_layers_count_their_distances_and_absolute_keys():
    length = 256
    dense = model_flops_per_token(meta_model("dense", context_length=length))
    fib = LanguageModel(
        ModelConfig(**TINY, context_length=length),
        build_attention("fibonacci", window=4, schedule="linear"),
    )
    assert keys_per_query(fib) == [len(d) for d in fib.distances(length)]
    bigbird = LanguageModel(
        ModelConfig(**TINY, context_length=length),
        build_attention("bigbird", window=4, n_global=2, n_random=3),
    )
    assert keys_per_query(bigbird) == [5 + 2 + 3] * 2
    sparse = model_flops_per_token(fib)
    assert keys_per_query(meta_model("dense", context_length=length)) == [length, length]
    assert sparse.attention < dense.attention / 10
    for term in ("projections", "mlp", "lm_head"):
        assert getattr(sparse, term) == getattr(dense, term)
    # longer sequences: dense attention grows with T, the Fibonacci rungs stop at their reach
    assert model_flops_per_token(fib, 4 * length).attention < 1.5 * sparse.attention


def test_bigbird_counts_no_more_random_keys_than_a_sequence_holds():
    """Issue 47: n_random=100,000 at 256 tokens counted 100,000 random keys per query (46x
    dense's FLOPs); now the slots the kernel computes: the last block's candidates."""
    length, window, n_global = 256, 4, 2
    bigbird = LanguageModel(
        ModelConfig(**TINY, context_length=length),
        build_attention("bigbird", window=window, n_global=n_global, n_random=100_000),
    )
    candidates = length - 64 - window - n_global  # the last block of 64 draws from these
    assert keys_per_query(bigbird) == [window + 1 + n_global + candidates] * 2
    dense = model_flops_per_token(meta_model("dense", context_length=length))
    assert model_flops_per_token(bigbird).attention < dense.attention


def test_learned_alpha_counts_its_nominal_distances():
    learned = LanguageModel(
        ModelConfig(**TINY, context_length=128),
        build_attention("fibonacci", window=4, schedule="learned"),
    )
    assert keys_per_query(learned) == [len(d) for d in learned.distances(128)]
