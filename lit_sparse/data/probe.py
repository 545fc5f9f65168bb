"""The retrieval probe's data (paper section 4.4, table 2): marked shift-copy sequences.

A token is a payload ``p ~ U[0, P)`` plus a marker ``c ~ U{0, ..., C-1}`` times P; the target at
t is ``x[t - D[c_t]]`` with ``c_t = x[t] // P``, and positions with ``t < D[c_t]`` have no source
(label -100); the paper's P, C and D: docs/paper.md section 5. ``ProbeDataModule`` streams fresh
training sequences (seeded per seed and rank) and holds a fixed held-out set of
``val_sequences`` drawn from its own seed, so runs of any training seed are scored on the same
sequences.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import count
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError

__all__ = ["IGNORE_INDEX", "ProbeDataModule", "marked_shift_copy", "shift_copy_targets"]

IGNORE_INDEX = -100
"""The label of positions without a source (``F.cross_entropy``'s default ignore_index)."""


def shift_copy_targets(x: Tensor, distances: Sequence[int], payload: int) -> Tensor:
    """Targets (B, T) of marked shift-copy sequences x (B, T): ``y[t] = x[t - D[x[t] // P]]``,
    ``IGNORE_INDEX`` where ``t < D[x[t] // P]``."""
    length = x.shape[-1]
    shifts = torch.as_tensor(list(distances), device=x.device)[x // payload]  # (B, T) D of c_t
    t = torch.arange(length, device=x.device).expand_as(x)
    source = t - shifts
    y = torch.gather(x, -1, source.clamp(min=0))
    return torch.where(source >= 0, y, torch.full_like(y, IGNORE_INDEX))


def marked_shift_copy(
    batch: int,
    length: int = 512,
    distances: Sequence[int] = (200, 350),
    payload: int = 256,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """``batch`` probe sequences: x (B, T) tokens ``p + P * c`` and their targets y (B, T)."""
    p = torch.randint(0, payload, (batch, length), generator=generator)
    c = torch.randint(0, len(distances), (batch, length), generator=generator)
    x = p + payload * c
    return x, shift_copy_targets(x, distances, payload)


def batch_generator(*keys: int) -> torch.Generator:
    """A generator seeded from ``keys`` (e.g. seed, rank, batch) mixed into 32 bits (torch's
    CPU generator keeps only the low 32 bits of a seed, so keys cannot just be shifted)."""
    state = np.random.SeedSequence([k & 0xFFFFFFFF for k in keys]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))


class _Stream(IterableDataset):
    """Endless training batches; batch n of rank r is drawn from ``batch_generator(seed, r,
    n)``, so a stream is reproducible and the held-out set (``val_seed``) is not in it."""

    def __init__(self, module: ProbeDataModule, rank: int):
        super().__init__()
        self.module, self.rank = module, rank

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        dm = self.module
        for n in count():
            yield marked_shift_copy(
                dm.batch_size,
                dm.seq_len,
                dm.distances,
                dm.payload,
                batch_generator(dm.seed, self.rank, n),
            )


class ProbeDataModule(pl.LightningDataModule):
    """Marked shift-copy sequences for the retrieval probe.

    Args:
        seq_len: T, tokens per sequence (the paper: 512).
        distances: D, the copy distance of each marker value (the paper: 200 and 350).
        payload: P, payload values per marker (the paper: 256; vocabulary P x len(D)).
        batch_size: training sequences per batch (the paper: 2).
        val_sequences: held-out sequences accuracy is measured on (the paper scored one batch
            of 2; at least 64 here).
        val_batch_size: held-out sequences per validation batch.
        seed: seed of the training stream (the probe command sets it to the run's seed).
        val_seed: seed of the held-out set (the same for every run).
    """

    def __init__(
        self,
        seq_len: int = 512,
        distances: list[int] | None = None,
        payload: int = 256,
        batch_size: int = 2,
        val_sequences: int = 64,
        val_batch_size: int = 16,
        seed: int = 0,
        val_seed: int = 1234,
    ):
        super().__init__()
        distances = [200, 350] if distances is None else [int(d) for d in distances]
        for name, value in (
            ("seq_len", seq_len),
            ("payload", payload),
            ("batch_size", batch_size),
            ("val_sequences", val_sequences),
            ("val_batch_size", val_batch_size),
        ):
            check_int(f"data.{name}", value)
        if not distances or any(d < 1 or d >= seq_len for d in distances):
            raise ConfigError(
                f"data.distances={distances}: expected one or more distances in 1..seq_len-1 "
                f"(seq_len={seq_len})"
            )
        if len(set(distances)) != len(distances):
            raise ConfigError(f"data.distances={distances}: expected distinct distances")
        self.seq_len, self.distances, self.payload = seq_len, distances, payload
        self.batch_size, self.val_sequences = batch_size, val_sequences
        self.val_batch_size, self.seed, self.val_seed = val_batch_size, seed, val_seed
        self._val: tuple[Tensor, Tensor] | None = None

    @classmethod
    def model_vocab_size(
        cls, payload: int = 256, distances: list[int] | None = None, **init_args: Any
    ) -> int:
        """The vocabulary these init args imply: payload x number of markers."""
        return payload * len([200, 350] if distances is None else distances)

    @property
    def vocab_size(self) -> int:
        return self.payload * len(self.distances)

    @property
    def val_set_names(self) -> list[str]:
        return ["probe"]

    def held_out(self) -> tuple[Tensor, Tensor]:
        """The held-out sequences (x, y), each (val_sequences, T)."""
        if self._val is None:
            gen = torch.Generator().manual_seed(self.val_seed)
            self._val = marked_shift_copy(
                self.val_sequences, self.seq_len, self.distances, self.payload, gen
            )
        return self._val

    def train_dataloader(self) -> DataLoader:
        rank = self.trainer.global_rank if self.trainer is not None else 0
        return DataLoader(_Stream(self, rank), batch_size=None)

    def val_dataloader(self) -> DataLoader:
        x, y = self.held_out()
        return DataLoader(TensorDataset(x, y), batch_size=self.val_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        """The held-out sequences, as ``val_dataloader``."""
        return self.val_dataloader()
