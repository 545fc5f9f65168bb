"""Prefill: a prompt into a decoding cache, whole or in fixed-size chunks (the first through each
pattern's training path, later ones through its decoder's ``extend``), logits at the last
position only: memory is bounded by the chunk and the cache, not the prompt."""

from __future__ import annotations

import torch
from torch import Tensor

from lit_sparse.errors import ConfigError

DEFAULT_CHUNK = 2048
"""Prompt tokens per chunk: efficient products, activations of tens of MB at the paper's shape."""


def check_chunk(chunk: int | None) -> None:
    """``chunk`` must be None (the whole prompt at once) or an integer >= 1."""
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ConfigError(f"prefill_chunk={chunk!r}: must be an integer >= 1, or None (no chunks)")


def prefill(model, ids: Tensor, cache, chunk: int | None = DEFAULT_CHUNK) -> Tensor:
    """Run ``ids`` (B, T) into ``cache`` in chunks of ``chunk`` tokens; the last logits (B, V)."""
    check_chunk(chunk)
    step = chunk or ids.shape[1]
    logits = None
    with torch.inference_mode():
        for start in range(0, ids.shape[1], step):
            logits = model(ids[:, start : start + step], cache, logits_to_keep=1)
    return logits[:, -1]
