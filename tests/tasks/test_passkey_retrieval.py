"""Passkey retrieval (lit_sparse.tasks.passkey_retrieval): the needle at its depth and the
question at the end, the embedded template, a length without room refused; its DataModule's
training and held-out plays."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from lit_sparse.errors import ConfigError
from lit_sparse.tasks import (
    IGNORE_INDEX,
    PasskeyDataModule,
    PasskeyTemplate,
    corpus_tokens,
    embedded_template,
    passkey,
)

TEMPLATE = PasskeyTemplate(
    needle_prefix=(1, 2), needle_suffix=(3,), question=(4, 5), digits=tuple(range(10, 20))
)


def test_passkey_hides_the_key_at_its_depth_and_asks_for_it_at_the_end():
    filler = np.arange(100, 1100)
    length, key_length = 30, 3
    room = length - TEMPLATE.overhead(key_length)  # 30 - (2 + 1 + 2 + 6) = 19 filler tokens
    x, y = passkey(3, length, [0.0, 0.5, 1.0], filler, TEMPLATE, key_length, seed=4)
    for row_x, row_y, at in zip(x.tolist(), y.tolist(), (0, round(0.5 * room), room), strict=True):
        key = row_x[-key_length:]
        assert all(10 <= k < 20 for k in key)
        assert row_x[at : at + 6] == [1, 2, *key, 3]  # the needle at its depth of the text
        assert row_x[-key_length - 2 : -key_length] == [4, 5]  # the question, then the key
        text = row_x[:at] + row_x[at + 6 : -key_length - 2]
        assert len(text) == room and text == list(range(text[0], text[0] + room))  # one window
        asked = [t for t, label in enumerate(row_y) if label != IGNORE_INDEX]
        assert asked == list(range(length - key_length - 1, length - 1))
        assert [row_y[t] for t in asked] == key  # each digit asked at the token before it


def test_the_embedded_template_is_english_in_the_embedded_tokenizer():
    from lit_sparse.data.tokenizer import load_tokenizer

    tokenizer = load_tokenizer("embedded").tokenizer
    template = embedded_template()
    assert tokenizer.decode(list(template.needle_prefix)) == " The pass key is"
    assert tokenizer.decode(list(template.question)).endswith("The pass key is")
    assert [tokenizer.decode([d]) for d in template.digits] == [f" {d}" for d in range(10)]


def test_passkey_refuses_a_length_without_room():
    with pytest.raises(ConfigError, match="seq_len=11: a passkey example needs more than 11"):
        passkey(2, 11, 0.5, np.arange(100), TEMPLATE, key_length=3)
    with pytest.raises(ConfigError, match="depths"):
        passkey(2, 30, 1.5, np.arange(100), TEMPLATE, key_length=3)


def batches(dm, n: int, global_step: int = 0, rank: int = 0, accumulate: int = 1):
    dm.trainer = SimpleNamespace(
        global_step=global_step, accumulate_grad_batches=accumulate, global_rank=rank, world_size=2
    )
    return list(itertools.islice(iter(dm.train_dataloader()), n))


@pytest.mark.slow  # tokenizes the embedded corpus when the session's token cache has none
def test_passkey_reads_the_training_plays_for_training_and_the_held_out_plays_for_its_sets():
    dm = PasskeyDataModule(seq_len=64, val_examples=4, depths=[0.0, 1.0])
    assert dm.val_set_names == ["depth0", "depth100"] and dm.vocab_size == 8192
    train, held_out = corpus_tokens("train"), corpus_tokens("val")
    assert train.size > 1_000_000 and 100_000 < held_out.size < train.size

    def in_corpus(window: np.ndarray, tokens: np.ndarray) -> bool:
        starts = np.flatnonzero(tokens[: tokens.size - window.size] == window[0])
        return any(np.array_equal(tokens[s : s + window.size], window) for s in starts)

    x, _ = dm.recall_sets()["depth0"]  # the needle first: the text follows it
    needle = 4 + 5 + 6  # " The pass key is", 5 digits, ". Remember it."
    text = x[0, needle : needle + 20].numpy()
    assert in_corpus(text, held_out) and not in_corpus(text, train)
    train_x, train_y = batches(dm, 1)[0]
    assert train_x.shape == (32, 64) and ((train_y != IGNORE_INDEX).sum(-1) == 5).all()
