"""The config.json keys and weight names transformers reads (pure functions): the ``lit_sparse``
layout (our names, an ``auto_map`` to remote code, any attention) and the stock ``llama`` /
``mistral`` ones (dense and sliding window, no remote code, our keys under ``lit_sparse``)."""

from __future__ import annotations

from typing import Any

from lit_sparse.errors import ConfigError

LIT_SPARSE_CLASS = "LitSparseForCausalLM"
STOCK_CLASSES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM"}
_STOCK_PLUGINS = {"llama": "DenseAttention", "mistral": "SlidingWindowAttention"}

BLOCK_NAMES = {  # our name in a block -> (transformers' name, gguf's MODEL_TENSOR member)
    "attn_norm.weight": ("input_layernorm.weight", "ATTN_NORM"),
    "attn.q_proj.weight": ("self_attn.q_proj.weight", "ATTN_Q"),
    "attn.k_proj.weight": ("self_attn.k_proj.weight", "ATTN_K"),
    "attn.v_proj.weight": ("self_attn.v_proj.weight", "ATTN_V"),
    "attn.o_proj.weight": ("self_attn.o_proj.weight", "ATTN_OUT"),
    "ffn_norm.weight": ("post_attention_layernorm.weight", "FFN_NORM"),
    "ffn.gate.weight": ("mlp.gate_proj.weight", "FFN_GATE"),
    "ffn.up.weight": ("mlp.up_proj.weight", "FFN_UP"),
    "ffn.down.weight": ("mlp.down_proj.weight", "FFN_DOWN"),
}


def shape_fields(config) -> dict[str, Any]:
    """The standard config.json keys of a ``ModelConfig`` (the one place its fields get
    transformers' names); ``max_position_embeddings`` is the training length."""
    return {
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "intermediate_size": config.ffn_width,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": config.norm_eps,
        "rope_theta": config.rope_theta,
        "max_position_embeddings": config.context_length,
        "training_length": config.context_length,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "mlp_bias": False,
    }


def stock_layout_of(attention_config: dict[str, Any]) -> str | None:
    """``llama`` for a dense plugin config, ``mistral`` for a sliding window, else None."""
    name = str(attention_config.get("class_path", "")).rpartition(".")[2]
    return next((layout for layout, cls in _STOCK_PLUGINS.items() if cls == name), None)


def stock_config(layout: str, config, lit_sparse_keys: dict[str, Any]) -> dict[str, Any]:
    """config.json of the stock ``layout`` (``llama`` or ``mistral``), ``lit_sparse_keys`` kept
    under ``lit_sparse``. Mistral's ``sliding_window`` counts the query: our window W is W + 1."""
    attention = lit_sparse_keys["attention"]
    if stock_layout_of(attention) != layout:
        raise ConfigError(
            f"format={layout!r}: the model's attention ({attention['class_path']}) has no "
            f"{STOCK_CLASSES.get(layout, layout)} form; {describe_stock_layouts()}"
        )
    if not config.ffn_width:
        raise ConfigError(
            f"format={layout!r}: the model's blocks have no MLP (ffn_hidden 0), and every "
            f"{STOCK_CLASSES[layout]} block has one; use format 'lit_sparse'"
        )
    fields = {
        "architectures": [STOCK_CLASSES[layout]],
        "model_type": layout,
        **shape_fields(config),
        # no special tokens unless the export knows them (Llama's defaults are 1 and 2)
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "lit_sparse": lit_sparse_keys,
    }
    if layout == "mistral":
        fields["sliding_window"] = int(attention["init_args"]["window"]) + 1
    return fields


def describe_stock_layouts() -> str:
    """Which plugins have a stock layout, in words."""
    return "only dense exports as llama and sliding_window as mistral; use format 'lit_sparse'"


def to_stock_names(state: dict[str, Any], n_layers: int) -> dict[str, Any]:
    """lit_sparse's state dict under transformers' Llama/Mistral names."""
    names = _names(n_layers)
    extra = sorted(set(state) - set(names))
    if extra:
        raise ConfigError(
            f"the model has tensors no Llama/Mistral layout holds ({', '.join(extra[:3])}); "
            f"{describe_stock_layouts()}"
        )
    return {names[key]: tensor for key, tensor in state.items()}


def from_stock_names(state: dict[str, Any], n_layers: int) -> dict[str, Any]:
    """The inverse of :func:`to_stock_names` (other names kept, for the strict load to name)."""
    back = {stock: ours for ours, stock in _names(n_layers).items()}
    return {back.get(key, key): tensor for key, tensor in state.items()}


def _names(n_layers: int) -> dict[str, str]:
    names = {"embedding.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    for layer in range(n_layers):
        for ours, (stock, _) in BLOCK_NAMES.items():
            names[f"blocks.{layer}.{ours}"] = f"model.layers.{layer}.{stock}"
    return names
