"""Prefill: a prompt into a decoding cache, whole or in fixed-size chunks.

A chunk runs through every layer at once (the first through each pattern's training path,
later ones through its decoder's :meth:`~lit_sparse.attention.decoding.LayerDecoder.extend`),
and only the last position gets logits, so a prompt's memory is bounded by the chunk and the
cache (a ring of the largest distance + 1 rows for Fibonacci layers), not by its length.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lit_sparse.errors import ConfigError

__all__ = ["DEFAULT_CHUNK", "prefill"]

DEFAULT_CHUNK = 2048
"""Prompt tokens per chunk by default: large enough for efficient matrix products, small
enough that a chunk's activations are a few tens of MB at the paper's shape."""


def check_chunk(chunk: int | None) -> None:
    """``chunk`` must be None (the whole prompt at once) or an integer >= 1."""
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ConfigError(f"prefill_chunk={chunk!r}: must be an integer >= 1, or None (no chunks)")


def prefill(model, ids: Tensor, cache, chunk: int | None = DEFAULT_CHUNK) -> Tensor:
    """Run ``ids`` (B, T) into ``cache`` (``model.new_cache``, empty or continuing) in chunks of
    ``chunk`` tokens (None: all at once) and return the last position's logits (B, vocab)."""
    check_chunk(chunk)
    step = chunk or ids.shape[1]
    logits = None
    with torch.inference_mode():
        for start in range(0, ids.shape[1], step):
            logits = model(ids[:, start : start + step], cache, logits_to_keep=1)
    return logits[:, -1]
