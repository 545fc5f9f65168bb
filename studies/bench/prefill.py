"""A long prompt into the decoding caches: tokens/s and peak memory, whole or in chunks
(``python -m lit_sparse bench prefill``).

How it measures:

- the model is the paper's shape by default (as ``bench decode``: 16 layers, d_model 512,
  8/2 heads, vocabulary 32,768, trained at 1024 tokens), random weights, float32, batch 1;
  the plugins attend equal keys per query (:func:`lit_sparse_studies.bench.decode.decode_plugin`);
- each (length, plugin, chunk) runs in a fresh process: the model and an empty cache are
  made, then one prefill of a random prompt of that length
  (:func:`lit_sparse.generation.prefill.prefill`), which computes the output layer for the
  last position only; ``seconds`` is its wall time and ``tokens_per_s`` the length over it;
- ``peak_rss_mb`` is the process's peak resident set (VmHWM) after the prefill, and
  ``rise_mb`` its rise over the resident set just before it (the model, the libraries):
  what the prefill itself needed, the cache it filled included (``cache_mb``);
- ``chunk`` 0 is the whole prompt at once, the way to see what chunks save.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from lit_sparse import ConfigError
from lit_sparse.io import markdown_table
from lit_sparse_studies.bench.decode import DecodeBenchSpec, decode_model
from lit_sparse_studies.bench.shape import ModelShape
from lit_sparse_studies.bench.timing import cell, peak_rss_mb, run_child

__all__ = ["PrefillBenchSpec", "format_rows", "run_prefill_bench"]

MODULE = "lit_sparse_studies.bench.prefill"


@dataclass
class PrefillBenchSpec(ModelShape):
    """What ``bench prefill`` measures; the model shape defaults to the paper's."""

    lengths: list[int] = field(default_factory=lambda: [16384, 65536])
    plugins: list[str] = field(default_factory=lambda: ["fibonacci", "dense"])
    chunks: list[int] = field(default_factory=lambda: [2048])
    """Prompt tokens per chunk, one row each; 0 is the whole prompt at once."""

    def __post_init__(self):
        self.model_spec()  # the plugins and the shape, checked as bench decode checks them
        if not self.lengths or min(self.lengths) < 1:
            raise ConfigError(f"lengths={self.lengths}: expected prompt lengths >= 1")
        if not self.chunks or min(self.chunks) < 0:
            raise ConfigError(f"chunks={self.chunks}: expected chunk sizes >= 1, or 0 (whole)")

    def model_spec(self) -> DecodeBenchSpec:
        return DecodeBenchSpec(plugins=list(self.plugins), rss_tokens=0, **self.shape())


def _rss_mb() -> float:
    """The resident set now (Linux: /proc/self/statm), in MB."""
    import os

    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _measure(spec: PrefillBenchSpec, length: int, plugin: str, chunk: int) -> dict[str, Any]:
    """Child process: one prefill of ``length`` random tokens."""
    import torch

    from lit_sparse.generation import prefill

    if spec.threads:
        torch.set_num_threads(spec.threads)
    model = decode_model(spec.model_spec(), plugin)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, spec.vocab_size, (1, length), generator=gen)
    cache = model.new_cache(1, length + 1)
    before = _rss_mb()
    start = time.perf_counter()
    logits = prefill(model, ids, cache, chunk or None)
    seconds = time.perf_counter() - start
    peak = peak_rss_mb()
    assert logits.shape == (1, spec.vocab_size)
    return {
        "T": length,
        "plugin": plugin,
        "chunk": chunk,
        "seconds": seconds,
        "tokens_per_s": length / seconds,
        "peak_rss_mb": peak,
        "rise_mb": max(0.0, peak - before),
        "cache_mb": cache.nbytes / 2**20,
    }


def run_prefill_bench(spec: PrefillBenchSpec, progress=print) -> list[dict[str, Any]]:
    """One row per length, plugin and chunk (``error`` where its process failed)."""
    rows = []
    for length, plugin, chunk in itertools.product(spec.lengths, spec.plugins, spec.chunks):
        how = f"chunks of {chunk}" if chunk else "whole"
        progress(f"T={length} {plugin}: prefill, {how} ...")
        job = {"spec": asdict(spec), "length": length, "plugin": plugin, "chunk": chunk}
        row = run_child(MODULE, job)
        if row is None:
            row = {"T": length, "plugin": plugin, "chunk": chunk, "error": "failed"}
        else:
            progress(
                f"T={length} {plugin} ({how}): {row['tokens_per_s']:.0f} tokens/s, "
                f"peak RSS {row['peak_rss_mb']:.0f} MB (+{row['rise_mb']:.0f} MB)"
            )
        rows.append(row)
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    header = ["T", "plugin", "chunk", "s", "tokens/s", "peak RSS MB", "rise MB", "cache MB"]
    body = [
        [
            str(row["T"]),
            row["plugin"],
            str(row["chunk"]) if row["chunk"] else "whole",
            cell(row, "seconds", ".1f"),
            cell(row, "tokens_per_s", ".0f"),
            cell(row, "peak_rss_mb", ".0f"),
            cell(row, "rise_mb", ".0f"),
            cell(row, "cache_mb", ".1f") if "error" not in row else row["error"],
        ]
        for row in rows
    ]
    return markdown_table(header, body, align="lllrrrrr")


if __name__ == "__main__":  # a child process of run_prefill_bench
    job = json.loads(sys.argv[1])
    spec = PrefillBenchSpec(**job["spec"])
    print(json.dumps(_measure(spec, job["length"], job["plugin"], job["chunk"])))
