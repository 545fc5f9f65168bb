"""Model shapes the unit tests share: ``small_config`` (2 layers, grouped heads) and
``tiny_config`` (one layer of one head, no MLP: 336 parameters), each with overrides."""

from __future__ import annotations

from lit_sparse.config import ModelConfig


def small_config(**overrides) -> ModelConfig:
    """2 layers, d_model 64, 4 heads over 2 KV heads of 16, vocab 101, length 32."""
    values = dict(
        vocab_size=101, context_length=32, n_layers=2, d_model=64, n_heads=4, n_kv_heads=2,
        head_dim=16,
    )  # fmt: skip
    return ModelConfig(**{**values, **overrides})


def tiny_config(**overrides) -> ModelConfig:
    """One layer of one head of 8, no MLP, vocab 8, length 16: 336 parameters."""
    values = dict(
        vocab_size=8, context_length=16, n_layers=1, d_model=8, n_heads=1, n_kv_heads=1,
        head_dim=8, ffn_hidden=0,
    )  # fmt: skip
    return ModelConfig(**{**values, **overrides})
