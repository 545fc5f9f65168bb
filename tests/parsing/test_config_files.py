"""The model of layered ``--config`` files (lit_sparse/parsing/config_files.py): the data's
sequence length and vocabulary taken as fit takes them, overrides by registry name, each bad
input one ConfigError line before any parsing, and a short name of the attention."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lit_sparse.attention import build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.errors import ConfigError
from lit_sparse.parsing.config_files import ModelSpec, read_model_config

ROOT = Path(__file__).resolve().parents[2]
FIXED, TINY = ROOT / "configs" / "fixed.yaml", ROOT / "tests" / "configs" / "tiny.yaml"


def test_layered_configs_take_the_datas_length_and_vocabulary():
    spec = read_model_config([FIXED, TINY])
    assert (spec.arch.n_layers, spec.arch.d_model) == (2, 32)  # tiny.yaml over fixed.yaml
    assert spec.seq_len == spec.arch.context_length == 48  # data.seq_len
    assert spec.arch.vocab_size == 8192  # the embedded tokenizer's
    assert spec.configs == [str(FIXED), str(TINY)]
    assert [p.distances(48)[:3] for p in spec.patterns()] == [[0, 1, 2]] * 2
    spec = read_model_config([FIXED, TINY], ["--data.seq_len=64", "--model.attention", "dense"])
    assert spec.seq_len == 64 and spec.describe() == "dense"


@pytest.mark.parametrize(
    ("configs", "overrides", "message"),
    [
        ([], [], "--config: expected at least one config file"),
        ([TINY], ["--trainer.max_steps", "3"], "--trainer.max_steps: unknown option; allowed "),
        ([TINY], ["--model.lr"], "--model.lr: expected a value"),
        ([ROOT / "missing.yaml"], [], f"--config {ROOT / 'missing.yaml'}: cannot be read"),
    ],
)
def test_bad_input_is_one_line_before_any_parsing(configs, overrides, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        read_model_config(configs, overrides)


@pytest.mark.parametrize(
    ("attention", "name"),
    [
        ("fibonacci", "fibonacci fixed W=8"),
        (
            {"class_path": "fibonacci", "init_args": {"schedule": "linear", "window": 4}},
            "fibonacci linear W=4",
        ),
        ("bigbird", "bigbird window=8 n_global=4 n_random=8"),
        ("dense", "dense"),
        (
            {"class_path": "hybrid", "init_args": {"global_rope": False}},
            "hybrid: fibonacci fixed W=8 local, dense NoPE in layers [3]",
        ),
    ],
)
def test_the_attention_has_a_short_name(attention, name):
    arch = ModelConfig(
        vocab_size=64, context_length=32, n_layers=4, d_model=32, n_heads=2, n_kv_heads=1,
        head_dim=16,
    )  # fmt: skip
    assert ModelSpec(arch, build_attention(attention), []).describe() == name
