"""The token cache: each source's training and held-out parts as flat token files.

``<cache_dir>/tokens/<slug>-<key16>.<part>.bin`` holds the tokens (uint16, or uint32 past 65536
ids), documents joined by end-of-text, with a ``.json`` of metadata beside it. The key hashes
all that decides the tokens; a file that does not match its metadata is rebuilt."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lit_sparse.data.sources import SourceConfig, iter_text_batches
from lit_sparse.data.tokenizer import LoadedTokenizer
from lit_sparse.formats.pretrained import file_sha256
from lit_sparse.io.atomic import (
    AtomicFile,
    fsync_dir,
    remove_stale_temporaries,
    storage_error,
    write_text,
)

FORMAT_VERSION = 1


def token_dtype(tokenizer_size: int) -> np.dtype:
    """uint16 when every id fits (size <= 65536), else uint32."""
    return np.dtype(np.uint16 if tokenizer_size <= 1 << 16 else np.uint32)


@dataclass(frozen=True)
class TokenFile:
    """A validated token file: open it with :func:`open_tokens`."""

    path: Path
    dtype: str
    num_tokens: int


@dataclass(frozen=True)
class CachePlan:
    """Where one source's token files live and what their metadata must say."""

    source: SourceConfig
    spec: dict
    key: str
    stem: Path
    dtype: str
    tokenizer_sha256: str
    max_tokens: int | None
    parts: tuple[str, ...]

    def bin_path(self, part: str) -> Path:
        return self.stem.with_name(f"{self.stem.name}.{part}.bin")

    def meta_path(self, part: str) -> Path:
        return self.stem.with_name(f"{self.stem.name}.{part}.json")

    def meta(self, part: str) -> dict[str, Any]:
        """What the metadata of ``part`` must say (and what else it records is not checked)."""
        return {
            "format_version": FORMAT_VERSION,
            "key": self.key,
            "part": part,
            "source_spec": self.spec,
            "tokenizer_sha256": self.tokenizer_sha256,
            "dtype": self.dtype,
        }


def make_plan(
    src: SourceConfig, tok: LoadedTokenizer, cache_dir: str | os.PathLike, max_tokens: int | None
) -> CachePlan:
    """The cache plan of ``src`` tokenized by ``tok`` with training budget ``max_tokens``."""
    # as it reads back from the metadata JSON (tuples become lists), so the two compare equal
    spec = json.loads(json.dumps(src.content_spec(max_tokens), sort_keys=True))
    dtype = token_dtype(tok.size).name
    key_material = {
        "format": FORMAT_VERSION,
        "spec": spec,
        "tokenizer": tok.sha256,
        "eos_id": tok.eos_id,
        "dtype": dtype,
    }
    key = hashlib.sha256(json.dumps(key_material, sort_keys=True).encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", src.path).strip("-.")[:60] or "source"
    stem = Path(cache_dir).expanduser() / "tokens" / f"{slug}-{key[:16]}"
    parts = tuple(p for p, on in (("train", src.has_train), ("val", src.has_val)) if on)
    return CachePlan(src, spec, key, stem, dtype, tok.sha256, max_tokens, parts)


def check_part(plan: CachePlan, part: str, verify_checksum: bool) -> TokenFile | str:
    """The part's :class:`TokenFile` if present and consistent, else why it must be rebuilt."""
    meta_path, bin_path = plan.meta_path(part), plan.bin_path(part)
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        return "not cached"
    except (OSError, ValueError) as err:
        return f"unreadable metadata ({err})"
    if not isinstance(meta, dict):
        return f"metadata is not a JSON object (a {type(meta).__name__})"
    for field, value in plan.meta(part).items():
        if meta.get(field) != value:
            return f"metadata field {field!r} differs"
    try:
        size = bin_path.stat().st_size
    except FileNotFoundError:
        return "token file missing"
    itemsize = np.dtype(plan.dtype).itemsize
    num_tokens = meta.get("num_tokens")
    if not isinstance(num_tokens, int) or meta.get("file_bytes") != num_tokens * itemsize:
        return "metadata token count and file_bytes disagree"
    if size != meta["file_bytes"]:
        return f"token file has {size} bytes, metadata says {meta['file_bytes']}"
    if verify_checksum and file_sha256(bin_path) != meta.get("sha256"):
        return "checksum mismatch"
    return TokenFile(bin_path, plan.dtype, num_tokens)


def open_tokens(tf: TokenFile) -> np.ndarray:
    """Read-only memory map of a token file (an empty array for an empty file)."""
    if tf.num_tokens == 0:
        return np.zeros(0, dtype=tf.dtype)
    return np.memmap(tf.path, dtype=tf.dtype, mode="r", shape=(tf.num_tokens,))


class _AtomicTokenWriter:
    """Streams tokens to a temporary file; ``commit`` moves it and its metadata into place."""

    def __init__(self, path: Path, meta_path: Path, dtype: str) -> None:
        self.path, self.meta_path, self.dtype = path, meta_path, np.dtype(dtype)
        self.file = AtomicFile(path)  # committed in commit(), removed in abort()
        self.sha = hashlib.sha256()
        self.num_tokens = 0
        self.num_documents = 0
        self.truncated = False  # the budget cut the last document

    def write(self, ids: np.ndarray) -> None:
        data = ids.astype(self.dtype, copy=False).tobytes()
        self.file.write(data)
        self.sha.update(data)
        self.num_tokens += int(ids.size)

    def commit(self, meta: dict) -> TokenFile:
        meta = dict(
            meta,
            num_tokens=self.num_tokens,
            num_documents=self.num_documents,
            file_bytes=self.num_tokens * self.dtype.itemsize,
            truncated=self.truncated,
            sha256=self.sha.hexdigest(),
            dtype=self.dtype.name,
        )
        # the metadata goes first, so a crash between the two renames leaves tokens without
        # matching metadata: a part that is rebuilt, never one that is trusted
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.meta_path)
        fsync_dir(self.path.parent)
        self.file.commit()
        write_text(self.meta_path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
        return TokenFile(self.path, self.dtype.name, self.num_tokens)

    def abort(self) -> None:
        self.file.abort()


def _fill(
    batches: Iterable[list[str]],
    targets: list[tuple[_AtomicTokenWriter | None, int | None]],
    tok: LoadedTokenizer,
    progress,
) -> None:
    """Tokenize documents into the targets in order, each taking whole documents up to its token
    budget (None = unlimited), cut exactly there; a None writer ends reading."""
    targets = list(targets)
    if not targets or targets[0][0] is None:
        return
    writer, budget = targets.pop(0)
    eos = tok.eos_id
    # encode_batch_fast (tokenizers >= 0.21) skips offset tracking, which we do not need
    encode = getattr(tok.tokenizer, "encode_batch_fast", tok.tokenizer.encode_batch)
    for texts in batches:
        for enc in encode(texts, add_special_tokens=False):
            ids = np.array([*enc.ids, eos], dtype=np.int64)
            if budget is not None and ids.size > budget - writer.num_tokens:
                ids = ids[: budget - writer.num_tokens]
                writer.truncated = True
            writer.write(ids)
            writer.num_documents += 1
            progress.update(int(ids.size))
            if budget is not None and writer.num_tokens >= budget:
                if not targets or targets[0][0] is None:
                    return
                writer, budget = targets.pop(0)


def build_source(plan: CachePlan, tok: LoadedTokenizer) -> dict[str, TokenFile]:
    """Tokenize and write every part of ``plan``'s source (once, announced on stderr)."""
    from tqdm.auto import tqdm

    src = plan.source
    print(
        f"tokenizing {src.name} ({src.describe()}) into the token cache, once: later runs "
        f"read it from {plan.stem.parent} ...",
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        plan.stem.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise storage_error(plan.stem.parent, err, "create the token cache folder") from None
    remove_stale_temporaries(plan.stem.parent)  # a killed build's half-written files
    writers = {
        p: _AtomicTokenWriter(plan.bin_path(p), plan.meta_path(p), plan.dtype) for p in plan.parts
    }
    budgets = {
        p: b for p, b in (("val", src.val_tokens), ("train", plan.max_tokens)) if p in writers
    }
    total = None if None in budgets.values() or not budgets else sum(budgets.values())
    progress = tqdm(
        total=total,
        unit="tok",
        unit_scale=True,
        leave=False,
        desc=f"tokenizing {src.name}",
        disable=src.kind == "embedded" or None,
    )
    if src.val_mode == "head":  # one stream: the held-out documents first, then training's
        reads = {"train": [(writers.get(p), budgets.get(p)) for p in ("val", "train")]}
    else:
        reads = {p: [(writers[p], budget)] for p, budget in budgets.items()}
    try:
        for part, targets in reads.items():
            stream = iter_text_batches(src, part)
            try:
                _fill(stream, targets, tok, progress)
            finally:
                stream.close()
        about = {
            "source_name": src.name,
            "tokenizer_source": tok.source,
            "eos_token": tok.eos_token,
            "eos_id": tok.eos_id,
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        out = {part: w.commit({**plan.meta(part), **about}) for part, w in writers.items()}
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    finally:
        progress.close()
    print(
        f"tokenized {src.name} in {time.perf_counter() - t0:.0f} s: "
        + ", ".join(f"{part} {tf.num_tokens:,} tokens" for part, tf in out.items()),
        file=sys.stderr,
        flush=True,
    )
    return out
