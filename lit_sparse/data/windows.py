"""Held-out windows: fixed, non-overlapping (x, y) windows over a held-out token file.

The stream is one end-of-text token, then the file. Window ``i`` of length L covers tokens
``[i*L, i*L + L]``, so every held-out token is predicted exactly once."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from lit_sparse.data.token_cache import TokenFile, open_tokens
from lit_sparse.errors import ConfigError


def rank_of(trainer) -> tuple[int, int]:
    """(rank, world size) of this process under ``trainer``; (0, 1) without one."""
    if trainer is None:
        return 0, 1
    return int(trainer.global_rank), int(trainer.world_size)


def num_windows(num_tokens: int, length: int, span: int | None = None) -> int:
    """Windows of ``length`` predictions in a stream of ``num_tokens`` tokens (the prefix
    counted), or within the first ``span`` predicted tokens (``span + 1`` tokens) when given."""
    if length < 1:
        raise ConfigError(f"length={length}: expected >= 1")
    avail = max(num_tokens - 1, 0) if span is None else min(span, max(num_tokens - 1, 0))
    return avail // length


class HeldOutWindows(IterableDataset):
    """Rank ``rank``'s share (windows ``rank::world_size``) of the first ``count`` windows of
    ``length`` predictions, as (x, y) batches; ``prefix``: the token before the file's first."""

    def __init__(
        self,
        file: TokenFile,
        length: int,
        count: int,
        batch_size: int,
        rank: int = 0,
        world_size: int = 1,
        prefix: int | None = None,
    ) -> None:
        available = file.num_tokens + (prefix is not None)
        if count * length + 1 > available and count > 0:
            raise ConfigError(
                f"{count} windows of length {length} need {count * length + 1} "
                f"tokens; {file.path} has {file.num_tokens}"
                + (" after the end-of-text prefix" if prefix is not None else "")
            )
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank={rank} must be in [0, world_size={world_size})")
        self.file, self.length, self.count = file, int(length), int(count)
        self.batch_size, self.rank, self.world_size = int(batch_size), int(rank), int(world_size)
        self.prefix = prefix

    def window_indices(self) -> list[int]:
        """Indices of this rank's windows (window i starts at stream token i * length)."""
        return list(range(self.rank, self.count, self.world_size))

    def _window(self, tokens, i: int) -> np.ndarray:
        """Stream tokens ``[i*L, i*L + L]``."""
        start, end = i * self.length, i * self.length + self.length + 1
        if self.prefix is None:
            return np.asarray(tokens[start:end], dtype=np.int64)
        if start == 0:
            return np.concatenate([[self.prefix], np.asarray(tokens[: end - 1], dtype=np.int64)])
        return np.asarray(tokens[start - 1 : end - 1], dtype=np.int64)

    @property
    def num_batches(self) -> int:
        return -(-len(self.window_indices()) // self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        tokens = open_tokens(self.file)
        mine = self.window_indices()
        for b in range(worker, self.num_batches, num_workers):
            idx = mine[b * self.batch_size : (b + 1) * self.batch_size]
            rows = np.stack([self._window(tokens, i) for i in idx])
            t = torch.from_numpy(rows)
            yield t[:, :-1], t[:, 1:]
