"""The model's shape (lit_sparse/config.py): each bad field one ConfigError line naming it,
the derived widths following the fields they derive from, and the dict round trip."""

import pytest

from lit_sparse.config import ModelConfig
from lit_sparse.errors import ConfigError
from tests.shapes import small_config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"n_heads": 4, "n_kv_heads": 3}, r"n_heads \(4\) must be divisible by n_kv_heads \(3\)"),
        ({"d_model": 60}, r"d_model \(60\) must equal n_heads x head_dim \(4 x 16 = 64\)"),
        ({"context_length": 0}, "context_length must be a positive integer, got 0"),
        ({"vocab_size": -5}, "vocab_size must be a positive integer, got -5"),
        ({"head_dim": 16.0}, "head_dim must be a positive integer, got 16.0"),
        ({"rope_theta": -1.0}, r"rope_theta must be > 0, got -1.0"),
        ({"init_std": 0.0}, r"init_std must be > 0, got 0.0"),
        ({"ffn_hidden": -1}, r"ffn_hidden must be an integer >= 0 \(0: no MLP\)"),
    ],
)
def test_bad_config_raises_naming_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        small_config(**overrides)


def test_config_round_trips_through_dict():
    config = small_config()
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown fields"):
        ModelConfig.from_dict({**config.to_dict(), "n_expert": 2})


def test_derived_values_follow_their_fields():
    config = small_config()
    assert (config.ffn_width, config.std, config.n_groups) == (170, 64**-0.5, 2)
    assert ModelConfig().ffn_width == 1366  # int(512 * 8 / 3) = 1365, rounded up to even
    assert small_config(ffn_hidden=0).ffn_width == 0  # attention-only blocks
    assert small_config(ffn_hidden=96, init_std=0.02).ffn_width == 96
    assert small_config(init_std=0.02).std == 0.02


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"n_layers": True}, "n_layers must be a positive integer, got True"),
        ({"rope_theta": "1e4"}, "rope_theta must be > 0, got '1e4'"),
        ({"norm_eps": False}, "norm_eps must be > 0, got False"),
        ({"ffn_hidden": False}, r"ffn_hidden must be an integer >= 0 \(0: no MLP\)"),
        ({"head_dim": 15, "d_model": 60}, "head_dim must be even for RoPE, got 15"),
    ],
)
def test_a_bool_or_a_string_is_no_size_or_scale(overrides, message):
    """One line each, not a TypeError from comparing a string (a hand-edited config.json)."""
    with pytest.raises(ConfigError, match=message):
        small_config(**overrides)
