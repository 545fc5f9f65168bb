"""TextDataModule's configuration (lit_sparse.data.datamodule): bad values raise ValueError
naming the field, the value and what is allowed; vocab_size and seq_len come from the
tokenizer and the data config."""

from __future__ import annotations

import pytest

from lit_sparse.data import SourceConfig, TextDataModule

from .conftest import word_tokenizer_json


def test_vocab_size_from_the_tokenizer(tmp_path):
    tok = word_tokenizer_json(tmp_path / "tokenizer.json")  # 902 ids
    dm = TextDataModule(tokenizer=str(tok), cache_dir=str(tmp_path), seq_len=77)
    assert dm.tokenizer_size == 902
    assert dm.vocab_size == 960  # rounded up to a multiple of 64
    assert dm.seq_len == 77
    assert (
        TextDataModule(tokenizer=str(tok), vocab_size=4096, cache_dir=str(tmp_path)).vocab_size
        == 4096
    )
    assert (
        TextDataModule(
            tokenizer=str(tok.parent), vocab_size=902, cache_dir=str(tmp_path)
        ).vocab_size
        == 902
    )
    with pytest.raises(ValueError) as info:
        TextDataModule(tokenizer=str(tok), vocab_size=900, cache_dir=str(tmp_path))
    msg = str(info.value)
    assert "vocab_size=900" in msg and "902" in msg


def test_model_vocab_size_without_building(tmp_path):
    tok = word_tokenizer_json(tmp_path / "tokenizer.json")
    assert TextDataModule.model_vocab_size() == 8192
    assert TextDataModule.model_vocab_size(tokenizer=str(tok), sources=None, seq_len=3) == 960
    # an explicit vocab_size needs no tokenizer at parse time; the DataModule checks it
    assert TextDataModule.model_vocab_size(tokenizer="no/such/tok", vocab_size=1000) == 1000
    with pytest.raises(ValueError, match="^vocab_size=0"):
        TextDataModule.model_vocab_size(tokenizer=str(tok), vocab_size=0)


def test_embedded_default_vocab(tmp_path):
    dm = TextDataModule(cache_dir=str(tmp_path))
    assert dm.vocab_size == 8192 and dm.seq_len == 1024 and dm.batch_size == 8
    assert dm.eos_token_id == 0
    assert TextDataModule(cache_dir=str(tmp_path), vocab_size=32768).vocab_size == 32768


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"seq_len": 0}, "seq_len"),
        ({"batch_size": -1}, "batch_size"),
        ({"val_windows": 0}, "val_windows"),
        ({"num_workers": -1}, "num_workers"),
        ({"token_budget": 0}, "token_budget"),
        ({"vocab_size": 100}, "vocab_size"),
        ({"vocab_size": 8192.0}, "vocab_size"),
        ({"sources": []}, "sources"),
        ({"tokenizer": "./missing/tokenizer.json"}, "tokenizer"),
        ({"tokenizer": ""}, "tokenizer"),
        (
            {
                "sources": [
                    SourceConfig(name="a", path="embedded:math"),
                    SourceConfig(name="a", path="embedded:shakespeare"),
                ]
            },
            "name",
        ),
        (
            {
                "sources": [
                    SourceConfig(name="a", path="embedded:math"),
                    SourceConfig(name="b", path="embedded:shakespeare", val_name="a"),
                ]
            },
            "val_name",
        ),
        (
            {"sources": [SourceConfig(name="a", path="org/ds", weight=0, val_split="test")]},
            "weights",
        ),
    ],
)
def test_data_module_rejects_bad_values(tmp_path, kwargs, field):
    with pytest.raises(ValueError, match=rf"^{field}="):
        TextDataModule(cache_dir=str(tmp_path), **kwargs)


def test_tokenizer_without_end_of_text(tmp_path):
    from tokenizers import Tokenizer, models

    path = tmp_path / "tokenizer.json"
    Tokenizer(models.WordLevel({"x": 0, "[UNK]": 1}, unk_token="[UNK]")).save(str(path))
    with pytest.raises(ValueError, match="end-of-text"):
        TextDataModule(tokenizer=str(path), cache_dir=str(tmp_path))


def test_setup_checks_lengths(tmp_path, word_tok, local_sources):
    dm = TextDataModule(
        sources=[
            SourceConfig(name="a", path="json", data_files=str(local_sources["a"]), val_tokens=100)
        ],
        tokenizer=str(word_tok),
        seq_len=256,
        cache_dir=str(tmp_path),
    )
    with pytest.raises(ValueError, match="held-out set 'a' has 100 tokens"):
        dm.setup("fit")
    with pytest.raises(RuntimeError, match="setup"):
        TextDataModule(cache_dir=str(tmp_path)).train_dataloader()
