"""Training windows: an endless, seeded stream of (x, y) batches drawn from the sources.

Sample ``n`` of rank ``r`` is a pure function of ``(seed, r, n)``: a hash picks the source by
weight (windows are all T tokens, so token shares equal weights), another a uniform start. Worker
``w`` of ``W`` makes batches ``w, w + W, ...``: the same stream for any number of workers."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from itertools import accumulate, count

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import IterableDataset, get_worker_info

from lit_sparse.data.token_cache import TokenFile, open_tokens
from lit_sparse.errors import ConfigError

_MASK64 = (1 << 64) - 1
_TWO64 = float(1 << 64)


def mix64(x: int) -> int:
    """SplitMix64 finaliser: a bijection of 64-bit integers with good avalanche."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def sample_key(seed: int, rank: int, n: int) -> int:
    """64-bit key of sample ``n`` of rank ``rank``: distinct ``n`` give distinct keys."""
    return mix64(mix64(mix64(seed & _MASK64) ^ rank) ^ n)


class MixtureWindows(IterableDataset):
    """Endless batches ``(x, y)`` of LongTensors (B, T) for one rank; ``y`` is ``x`` shifted by one.
    ``weights`` (> 0) are normalised; ``start_sample``: samples already consumed."""

    def __init__(
        self,
        files: Sequence[TokenFile],
        weights: Sequence[float],
        seq_len: int,
        batch_size: int,
        seed: int,
        rank: int = 0,
        start_sample: int = 0,
    ) -> None:
        if len(files) != len(weights) or not files:
            raise ConfigError("files and weights must be non-empty and of equal length")
        if any(not (w > 0 and math.isfinite(w)) for w in weights):
            raise ConfigError(f"weights must be finite and > 0, got {list(weights)}")
        for f in files:
            if f.num_tokens < seq_len + 1:
                raise ConfigError(
                    f"{f.path} has {f.num_tokens} tokens, fewer than seq_len + 1 = {seq_len + 1}"
                )
        total = float(sum(weights))
        self.files = list(files)
        self.probs = [w / total for w in weights]
        self._cum = list(accumulate(self.probs))
        self.seq_len, self.batch_size = int(seq_len), int(batch_size)
        self.seed, self.rank = int(seed), int(rank)
        self.start_sample = int(start_sample)

    def draw(self, n: int) -> tuple[int, int]:
        """(source index, window start) of sample ``n`` of this rank."""
        key = sample_key(self.seed, self.rank, n)
        u = mix64(key ^ 0x5EED_0001) / _TWO64
        src = min(bisect.bisect_right(self._cum, u), len(self.files) - 1)
        start = mix64(key ^ 0x5EED_0002) % (self.files[src].num_tokens - self.seq_len)
        return src, start

    def make_batch(self, arrays: Sequence[np.ndarray], first: int) -> tuple[Tensor, Tensor]:
        """The batch whose first sample is ``first``."""
        rows = np.empty((self.batch_size, self.seq_len + 1), dtype=np.int64)
        for i in range(self.batch_size):
            src, start = self.draw(first + i)
            rows[i] = arrays[src][start : start + self.seq_len + 1]
        t = torch.from_numpy(rows)
        return t[:, :-1], t[:, 1:]

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        arrays = [open_tokens(f) for f in self.files]  # opened per process, never pickled
        for j in count(worker, num_workers):
            yield self.make_batch(arrays, self.start_sample + j * self.batch_size)
