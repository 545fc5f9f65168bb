"""The pretrained folder's checks (lit_sparse/formats/pretrained.py), as pure functions: the
attention the weights were trained with and how a folder's differs, the weights' and the
tokenizer's recorded digests, the weights' fit to the config, and a damaged config.json.
Folders saved and loaded: tests/interop/, tests/reliability/test_exports.py."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from lit_sparse import LanguageModel, build_attention
from lit_sparse.errors import ConfigError, DamagedFileError
from lit_sparse.formats.pretrained import (
    TOKENIZER_SHA256,
    TRAINED_ATTENTION,
    WEIGHTS_SHA256,
    attention_changes,
    check_fit,
    check_tokenizer_digest,
    check_weights_digest,
    file_sha256,
    read_config,
    trained_attention,
    weight_shapes,
)
from tests.shapes import tiny_config

TINY = tiny_config()


def folder_config(window: int = 8) -> dict:
    """config.json of a model trained with fibonacci W=8 at length 16, now set to ``window``."""
    record = trained_attention(LanguageModel(TINY, build_attention("fibonacci", window=8)))
    attention = build_attention("fibonacci", window=window).to_config()
    return {"arch": TINY.to_dict(), "attention": attention, TRAINED_ATTENTION: record}


def test_the_attention_a_model_was_trained_with_is_recorded_with_its_digest():
    config = folder_config()
    record = config[TRAINED_ATTENTION]
    assert record["attention"] == config["attention"] and record["context_length"] == 16
    assert len(record["sha256"]) == 64
    assert attention_changes(config, config["attention"]) == []
    assert attention_changes({"arch": {}}, config["attention"]) == []  # no record: nothing to say


def test_each_change_from_training_is_named():
    config = folder_config(window=4)
    assert attention_changes(config, config["attention"]) == ["window=4 (trained with 8)"]
    policy = build_attention("fibonacci", window=8, new_offsets="drop").to_config()
    assert attention_changes(config, policy) == []  # chosen at load on purpose
    longer = {**config, "arch": {**config["arch"], "context_length": 32}}
    dense = build_attention("dense").to_config()
    changes = attention_changes(longer, dense)
    assert changes[0] == (
        "class_path='lit_sparse.attention.dense.DenseAttention' "
        "(trained with 'lit_sparse.attention.fibonacci.FibonacciAttention')"
    )
    assert changes[-1] == "arch.context_length=32 (trained with 16)"
    edited = {**config, TRAINED_ATTENTION: {**config[TRAINED_ATTENTION], "context_length": 8}}
    assert attention_changes(edited, config["attention"])[0] == (
        f"the {TRAINED_ATTENTION} record itself (its sha256 does not match)"
    )


def test_the_recorded_digests_must_match_the_files(tmp_path):
    weights = tmp_path / "model.safetensors"
    save_file({"embedding.weight": torch.zeros(8, 8)}, weights)
    check_weights_digest(weights, {WEIGHTS_SHA256: file_sha256(weights)})
    check_weights_digest(weights, {})  # no record: passes
    with pytest.raises(DamagedFileError, match="does not match the sha256 its config.json records"):
        check_weights_digest(weights, {WEIGHTS_SHA256: "0" * 64})
    check_tokenizer_digest("tok.json", {TOKENIZER_SHA256: "ab" * 32}, "ab" * 32)
    with pytest.raises(DamagedFileError) as caught:
        check_tokenizer_digest("tok.json", {TOKENIZER_SHA256: "ab" * 32}, "cd" * 32, "--tokenizer")
    message = str(caught.value)
    assert message.startswith("'tok.json' is not the tokenizer its config.json records (")
    assert "abababababab..., the file cdcdcdcdcdcd..." in message
    assert message.endswith("choose another tokenizer on purpose with --tokenizer")


def test_the_weights_must_fit_the_config(tmp_path):
    weights = tmp_path / "model.safetensors"
    save_file({"a": torch.zeros(2, 3), "b": torch.zeros(4)}, weights)
    found = weight_shapes(weights)
    assert found == {"a": (2, 3), "b": (4,)}
    check_fit({"a": (2, 3), "b": (4,)}, found, "m")
    check_fit({"a": (2, 3)}, found, "m", strict=False)  # names may differ, shapes may not
    with pytest.raises(ConfigError) as caught:
        check_fit({"a": (3, 3), "c": (1,)}, found, "m")
    assert str(caught.value) == (
        "'m': model.safetensors does not fit its config.json (missing c, unexpected b, "
        "a is [2, 3] in the weights, [3, 3] for the config)"
    )
    (tmp_path / "bad.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(DamagedFileError):
        weight_shapes(tmp_path / "bad.safetensors")


def test_a_damaged_config_json_is_one_line(tmp_path):
    assert read_config(tmp_path) is None
    (tmp_path / "config.json").write_text('{"arch": ')
    with pytest.raises(DamagedFileError, match=r"config.json' is not valid JSON \(JSONDecodeError"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(DamagedFileError, match=r"config.json': expected a JSON object, got list"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text('{"arch": {}}')
    assert read_config(tmp_path) == {"arch": {}}
