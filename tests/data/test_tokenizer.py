"""lit_sparse.Tokenizer: text to ids exactly as the token cache tokenized documents, back to
text, the document prefix, and a round trip through save_pretrained / from_pretrained."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lit_sparse
from lit_sparse.data.tokenizer import Tokenizer, load_tokenizer
from lit_sparse.errors import ConfigError

TEXT = "ROMEO: But soft, what light through yonder window breaks?\nJULIET: Ay me! 42 * 7 = 294."


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return lit_sparse.Tokenizer.from_pretrained("embedded")


def test_encode_decode_round_trip_and_the_document_prefix(tokenizer):
    ids = tokenizer.encode(TEXT)
    assert ids == tokenizer.tokenizer.encode(TEXT, add_special_tokens=False).ids
    assert tokenizer.decode(ids) == TEXT
    assert tokenizer.encode_batch([TEXT, "Q:"]) == [ids, tokenizer.encode("Q:")]
    assert tokenizer.eos_id == 0 and tokenizer.eos_token == "<|endoftext|>"
    assert tokenizer.document_prefix == [tokenizer.eos_id]
    with_eos = tokenizer.encode(tokenizer.eos_token + "Q:")  # written out: its id
    assert with_eos == [tokenizer.eos_id, *tokenizer.encode("Q:")]
    assert tokenizer.decode(with_eos) == "Q:"  # special tokens left out by default
    assert tokenizer.decode(with_eos, skip_special_tokens=False) == "<|endoftext|>Q:"
    assert len(tokenizer) == tokenizer.size == 8192


@pytest.mark.slow
def test_encode_is_how_the_held_out_stream_was_tokenized(tokenizer, learned_run):
    """The held-out token file is each document's encode() followed by the EOS."""
    from lit_sparse.data.embedded import read_records

    dm = learned_run.datamodule
    held = dm._held_out("math")
    tokens = np.memmap(held.path, dtype=held.dtype, mode="r")[:2000]
    docs = [r["text"] for r in read_records("math", split="val")[:20]]
    stream = [i for ids in tokenizer.encode_batch(docs) for i in [*ids, tokenizer.eos_id]]
    assert stream[: len(tokens)] == tokens[: len(stream)].tolist()


def test_save_and_load_back(tokenizer, tmp_path):
    path = tokenizer.save_pretrained(tmp_path / "new" / "folder")
    assert path == tmp_path / "new" / "folder" / "tokenizer.json"
    again = Tokenizer.from_pretrained(tmp_path / "new" / "folder")
    assert again.sha256 == tokenizer.sha256 and again.eos_id == tokenizer.eos_id
    assert again.encode(TEXT) == tokenizer.encode(TEXT)
    assert load_tokenizer(str(path)).sha256 == tokenizer.sha256


def test_a_config_json_names_the_eos(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    newline = tokenizer.encode("\n")[0]
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": newline}))
    loaded = Tokenizer.from_pretrained(tmp_path)
    assert loaded.eos_id == newline and loaded.document_prefix == [newline]
    assert loaded.eos_token == tokenizer.tokenizer.id_to_token(newline)
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": [0, 5]}))
    assert Tokenizer.from_pretrained(tmp_path).eos_id == 0  # transformers' list form
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 99999}))
    with pytest.raises(ConfigError, match="eos_token_id=99999 is not an id of its tokenizer"):
        Tokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.decode([5, 8192]), r"ids\[1\]=8192: not a token id of the tokenizer "),
        (lambda t: t.decode([-1]), r"ids\[0\]=-1: not a token id of the tokenizer \(ids 0..8191\)"),
        (lambda t: t.decode([3.7]), r"ids\[0\]=3.7: expected an integer token id, got float"),
        (lambda t: t.decode(5), "ids: expected a sequence of token ids, got int"),
        (lambda t: t.encode("ok \ud800"), r"text: a lone surrogate '\\ud800' at character 3 "),
        (lambda t: t.encode(None), "text: expected a string, got NoneType None"),
        (lambda t: t.encode_batch(["a", 7]), r"texts\[1\]: expected a string, got int 7"),
    ],
    ids=["past-the-vocabulary", "negative", "float", "not-a-list", "surrogate", "none", "batch"],
)
def test_bad_input_is_one_line_naming_the_argument(tokenizer, call, message):
    """Issue 36: decode dropped ids past the vocabulary and truncated floats silently; -1, a
    lone surrogate and None were tokenizers' own errors."""
    with pytest.raises(ConfigError, match=message) as err:
        call(tokenizer)
    assert "\n" not in str(err.value)


def test_decode_takes_tensors_and_numpy_ids(tokenizer):
    import torch

    ids = tokenizer.encode(TEXT)
    assert tokenizer.decode(torch.tensor(ids)) == tokenizer.decode(np.array(ids)) == TEXT
