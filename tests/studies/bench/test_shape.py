"""The benched model's shape (lit_sparse_studies/bench/shape.py): the paper's by default, its
model config (head_dim = d_model // n_heads), and a shape that cannot be built one
ConfigError naming the field."""

from __future__ import annotations

import pytest

from lit_sparse import ConfigError, ModelConfig
from lit_sparse_studies.bench.shape import ModelShape


def test_the_default_is_the_papers_model_and_builds_its_config():
    paper = ModelConfig()
    assert ModelShape().model_config() == paper
    shape = ModelShape(window=4, n_layers=2, d_model=96, n_heads=4, n_kv_heads=2, vocab_size=256)
    config = shape.model_config()
    assert (config.n_layers, config.d_model, config.head_dim, config.vocab_size) == (2, 96, 24, 256)
    assert config.context_length == paper.context_length
    assert ModelShape(**shape.shape()) == shape  # its fields by name make the same shape


@pytest.mark.parametrize(
    ("fields", "counts", "message"),
    [
        ({"window": -1}, (), "window=-1: must be >= 0"),
        ({"n_layers": 0}, (), "n_layers=0: must be >= 1"),
        ({"threads": 0}, ("threads",), "threads=0: must be >= 1"),
        (
            {"n_heads": 6, "n_kv_heads": 4},
            (),
            "n_heads=6 must be a multiple of n_kv_heads=4 and divide d_model=512",
        ),
        ({"d_model": 100, "n_heads": 8}, (), "and divide d_model=100"),
    ],
)
def test_a_shape_that_cannot_be_built_is_one_config_error(fields, counts, message):
    ModelShape(window=0).check_shape()  # a window of 0 builds
    with pytest.raises(ConfigError, match=message):
        ModelShape(**fields).check_shape(*counts)
