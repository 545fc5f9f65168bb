"""TextStream: a continuation's text as its tokens arrive, each decoded beside the tokens before
it, so a sentencepiece tokenizer keeps its spaces and a split character waits for its bytes."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

import lit_sparse
from lit_sparse.generation.text import REPLACEMENT, TextStream

from .cases import tiny_config


@pytest.fixture(scope="module")
def sentencepiece_like():
    """A Metaspace tokenizer (Llama's and Mistral's kind): a word's token carries its space."""
    words = ["<unk>", "▁Hello", "▁world", "▁again", "!"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    return tokenizer


def streamed(stream: TextStream, ids: list[int]) -> str:
    return "".join(stream.push(i) for i in ids) + stream.flush()


def test_a_sentencepiece_stream_keeps_the_spaces_between_words(sentencepiece_like):
    prompt, continuation = [1], [2, 3, 4]  # "Hello", then "world", "again", "!"
    assert streamed(TextStream(sentencepiece_like, prompt), continuation) == " world again!"
    assert streamed(TextStream(sentencepiece_like), continuation) == "world again!"
    assert TextStream(sentencepiece_like, prompt).text() == ""


def test_text_is_the_continuation_as_it_reads_after_the_prompt(sentencepiece_like):
    stream = TextStream(sentencepiece_like, sentencepiece_like.encode("Hello").ids)
    for i in sentencepiece_like.encode("world again").ids:
        stream.push(i)
    assert stream.text() == " world again"


def test_a_split_character_waits_for_its_bytes_and_the_text_is_whole():
    tokenizer = lit_sparse.Tokenizer.from_pretrained("embedded")
    text = "naïve café, 日本語 and “quotes” — ∑ 🙂 done"
    ids = tokenizer.encode(text)
    stream = TextStream(tokenizer.tokenizer, tokenizer.encode("ROMEO:"))
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) + stream.flush() == tokenizer.decode(ids)
    assert not any(REPLACEMENT in piece for piece in pieces)
    assert len(ids) > len([p for p in pieces if p])  # some tokens were held back


def test_generate_text_reads_each_continuation_after_its_prompt(sentencepiece_like, tmp_path):
    """A model's continuation of "Hello" that starts with a word starts with its space."""
    sentencepiece_like.add_special_tokens(["</s>"])
    sentencepiece_like.save(str(tmp_path / "tokenizer.json"))
    tokenizer = lit_sparse.Tokenizer.from_pretrained(tmp_path / "tokenizer.json")
    torch.manual_seed(0)
    config = dataclasses.replace(tiny_config(), vocab_size=64)
    model = lit_sparse.LanguageModel(config, "fibonacci").eval()
    prompt = tokenizer.encode("Hello")
    new = lit_sparse.generate(model, [prompt], 6, temperature=0, vocab_limit=len(tokenizer))
    new = new.run()[0].tolist()
    assert sentencepiece_like.id_to_token(new[0]).startswith("▁")  # the case this test is for
    (text,) = lit_sparse.generate_text(model, tokenizer, ["Hello"], 6, stop_at_eos=False)
    assert text.startswith(" ")
    assert text == tokenizer.decode(prompt + new)[len(tokenizer.decode(prompt)) :]
