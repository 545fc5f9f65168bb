"""Fixtures of the data tests: tiny word-level tokenizers and local sources on disk.

The word-level tokenizer maps ``a<i>``, ``b<i>``, ``c<i>`` to disjoint id ranges, so a token
tells which source it came from; ``<|endoftext|>`` is id 0.
"""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path

import pytest

PREFIXES = ("a", "b", "c")
WORDS_PER_PREFIX = 300


def word_tokenizer_json(
    path: Path, words_per_prefix: int = WORDS_PER_PREFIX, extra: tuple[str, ...] = ()
) -> Path:
    """Write a WordLevel tokenizer: id 0 ``<|endoftext|>``, then ``a0..``, ``b0..``, ``c0..``."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    vocab = {"<|endoftext|>": 0, "[UNK]": 1}
    for p in PREFIXES:
        for i in range(words_per_prefix):
            vocab[f"{p}{i}"] = len(vocab)
    for w in extra:
        vocab[w] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def prefix_range(prefix: str, words_per_prefix: int = WORDS_PER_PREFIX) -> range:
    """Token ids of the words with ``prefix``."""
    k = PREFIXES.index(prefix)
    return range(2 + k * words_per_prefix, 2 + (k + 1) * words_per_prefix)


def random_doc(rng: random.Random, prefix: str, n_words: int) -> str:
    return " ".join(f"{prefix}{rng.randrange(WORDS_PER_PREFIX)}" for _ in range(n_words))


@pytest.fixture
def word_tok(tmp_path) -> Path:
    return word_tokenizer_json(tmp_path / "tok" / "tokenizer.json")


@pytest.fixture
def local_sources(tmp_path) -> dict[str, Path]:
    """Three local sources of very different document lengths, read through ``datasets``:

    - ``a``: JSON lines, 6000 short documents (3-12 words), about 45k tokens;
    - ``b``: 12 text files, one long document each (4000-9000 words), about 75k tokens;
    - ``c``: parquet, 600 medium documents (20-120 words), about 45k tokens.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(1234)
    root = tmp_path / "sources"
    (root / "b").mkdir(parents=True)
    with open(root / "a.jsonl", "w") as f:
        for _ in range(6000):
            f.write(json.dumps({"text": random_doc(rng, "a", rng.randint(3, 12))}) + "\n")
    for i in range(12):
        (root / "b" / f"book{i:02d}.txt").write_text(random_doc(rng, "b", rng.randint(4000, 9000)))
    docs = [random_doc(rng, "c", rng.randint(20, 120)) for _ in range(600)]
    pq.write_table(pa.table({"body": docs, "id": list(range(len(docs)))}), root / "c.parquet")
    return {"a": root / "a.jsonl", "b": root / "b", "c": root / "c.parquet"}


@pytest.fixture
def no_network(monkeypatch):
    """Fail any attempt to open a network connection."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def embedded_cache(tmp_path_factory) -> Path:
    """A token cache folder shared by the tests of the embedded corpus (built once)."""
    return tmp_path_factory.mktemp("embedded_cache")
