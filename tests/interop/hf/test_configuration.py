"""A folder's config.json as a transformers config (lit_sparse/interop/hf/configuration.py):
the standard keys derived from ``arch`` and ``attention``, never the other way, and a config
without both refused."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from lit_sparse import build_attention  # noqa: E402
from lit_sparse.errors import ConfigError  # noqa: E402
from lit_sparse.formats.pretrained import FORMAT  # noqa: E402
from lit_sparse.interop.hf import LitSparseConfig  # noqa: E402
from tests.generation.cases import TRAINING_LENGTH, tiny_model  # noqa: E402


def test_the_config_derives_the_standard_keys_from_lit_sparse_s_own():
    network = tiny_model(build_attention("fibonacci", window=2, schedule="linear"))
    config = LitSparseConfig.from_network(network, eos_token_id=3)
    assert (config.hidden_size, config.num_hidden_layers, config.num_key_value_heads) == (32, 2, 2)
    assert config.max_position_embeddings == config.training_length == TRAINING_LENGTH
    assert config.eos_token_id == 3 and config.model_type == "lit_sparse"
    # the shape keys follow arch even when a config.json says otherwise
    again = LitSparseConfig(**{**config.to_dict(), "hidden_size": 999})
    assert again.hidden_size == 32 and again.attention == network.attention.to_config()
    with pytest.raises(ConfigError, match="n_heads"):
        LitSparseConfig(arch={**network.config.to_dict(), "n_heads": 3})


def test_a_config_without_arch_or_attention_is_refused_naming_the_folder():
    with pytest.raises(ConfigError, match=r"^'models/x': its config.json has no 'arch' \(the"):
        LitSparseConfig.from_dict({"attention": "dense"}, name_or_path="models/x")
    with pytest.raises(ConfigError, match=r"no 'arch' .* and no 'attention' \(the attention"):
        LitSparseConfig.from_dict({"model_type": "lit_sparse"})


def test_the_saved_keys_hold_the_shape_and_ours_even_at_their_defaults():
    """transformers saves only what differs from a default config; a folder needs them all."""
    config = LitSparseConfig()  # the paper's shape, dense: every value a default
    saved = config.to_diff_dict()
    assert saved["format"] == FORMAT and saved["attention"] == config.attention
    assert saved["arch"] == config.arch and saved["hidden_size"] == 512
    assert config.model_config.to_dict() == config.arch
