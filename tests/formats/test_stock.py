"""The stock Llama / Mistral layouts (lit_sparse/formats/stock.py): which plugin has one, the
config.json transformers reads (Mistral's window counting the query), the weight names both
ways, and each model no stock layout holds refused in one line."""

from __future__ import annotations

import pytest

from lit_sparse.attention import build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.errors import ConfigError
from lit_sparse.formats.stock import (
    BLOCK_NAMES,
    from_stock_names,
    shape_fields,
    stock_config,
    stock_layout_of,
    to_stock_names,
)

ARCH = ModelConfig(
    vocab_size=64, context_length=32, n_layers=2, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16
)


def keys(attention: str, **init_args) -> dict:
    return {
        "arch": ARCH.to_dict(),
        "attention": build_attention(attention, **init_args).to_config(),
    }


def test_dense_is_llama_the_sliding_window_mistral_others_none():
    assert stock_layout_of(keys("dense")["attention"]) == "llama"
    assert stock_layout_of(keys("sliding_window")["attention"]) == "mistral"
    assert stock_layout_of(keys("fibonacci")["attention"]) is None
    assert stock_layout_of({}) is None


def test_the_stock_config_keeps_ours_under_lit_sparse_and_counts_the_query_in_the_window():
    ours = keys("sliding_window", window=7)
    config = stock_config("mistral", ARCH, ours)
    assert config["architectures"] == ["MistralForCausalLM"] and config["model_type"] == "mistral"
    assert config["sliding_window"] == 8  # distances 0..7: 8 keys with the query's own
    assert config["lit_sparse"] == ours
    assert config.items() >= shape_fields(ARCH).items()
    assert (config["hidden_size"], config["intermediate_size"]) == (32, ARCH.ffn_width)
    assert config["bos_token_id"] is config["eos_token_id"] is None
    llama = stock_config("llama", ARCH, keys("dense"))
    assert llama["architectures"] == ["LlamaForCausalLM"] and "sliding_window" not in llama


def test_a_model_without_a_stock_form_is_one_line():
    with pytest.raises(ConfigError, match=r"^format='llama': the model's attention \(lit_sparse"):
        stock_config("llama", ARCH, keys("sliding_window"))
    no_mlp = ModelConfig(**{**ARCH.to_dict(), "ffn_hidden": 0})
    with pytest.raises(ConfigError, match=r"blocks have no MLP \(ffn_hidden 0\)"):
        stock_config("llama", no_mlp, keys("dense"))


def test_weight_names_map_both_ways_and_unknown_tensors_are_named():
    ours = {"embedding.weight": 0, "norm.weight": 1}
    ours |= {f"blocks.{layer}.{name}": layer for layer in (0, 1) for name in BLOCK_NAMES}
    stock = to_stock_names(ours, n_layers=2)
    assert stock["model.embed_tokens.weight"] == 0
    assert stock["model.layers.1.self_attn.q_proj.weight"] == 1
    assert stock["model.layers.0.mlp.down_proj.weight"] == 0
    assert from_stock_names(stock, n_layers=2) == ours
    assert from_stock_names({"lm_head.weight": 5}, 2) == {"lm_head.weight": 5}  # kept to name
    with pytest.raises(ConfigError, match=r"tensors no Llama/Mistral layout holds \(blocks.0.x\)"):
        to_stock_names({**ours, "blocks.0.x": 2}, n_layers=2)
