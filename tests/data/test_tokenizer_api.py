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
