"""The retrieval probe's data (paper section 4.4, table 2): marked shift-copy sequences.

A token is a payload ``p ~ U[0, P)`` plus a marker ``c`` times P; the target at t is
``x[t - D[c_t]]`` with ``c_t = x[t] // P`` (label -100 where ``t < D[c_t]``). The held-out set
comes from its own seed, so runs of any training seed are scored on the same sequences."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError
from lit_sparse.tasks.registry import register_task
from lit_sparse.tasks.synthetic import IGNORE_INDEX, Examples, RecallDataModule


def shift_copy_targets(x: Tensor, distances: Sequence[int], payload: int) -> Tensor:
    """Targets (B, T) of x (B, T): ``y[t] = x[t - D[x[t] // P]]``, ``IGNORE_INDEX`` before it."""
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
    """A torch generator seeded from ``keys`` mixed into 32 bits (torch keeps a seed's low 32)."""
    state = np.random.SeedSequence([k & 0xFFFFFFFF for k in keys]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))


@register_task("probe")
class ProbeDataModule(RecallDataModule):
    """Marked shift-copy sequences for the retrieval probe.

    Args:
        seq_len: T, tokens per sequence (the paper: 512).
        distances: D, the copy distance of each marker value (the paper: 200 and 350).
        payload: P, payload values per marker (the paper: 256; vocabulary P x len(D)).
        batch_size: training sequences per batch (the paper: 2).
        val_sequences: held-out sequences accuracy is measured on (at least 64).
        val_batch_size: held-out sequences per validation batch.
        seed: seed of the training stream (the probe command sets it to the run's seed).
        val_seed: seed of the held-out set (the same for every run).
    """

    @classmethod
    def kit_options(cls) -> dict[str, Any]:
        return {"seq_len": 64, "distances": [20, 30], "payload": 16, "val_sequences": 6}

    summary = "copy the token D[c] back, c the marker of the current token (the paper's probe)"
    sparse_labels = False
    """Every position with a source is asked."""

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
        super().__init__(seq_len, batch_size, val_batch_size, seed, val_seed)
        distances = [200, 350] if distances is None else [int(d) for d in distances]
        check_int("data.payload", payload)
        self.val_sequences = check_int("data.val_sequences", val_sequences)
        if not distances or any(d < 1 or d >= seq_len for d in distances):
            raise ConfigError(
                f"data.distances={distances}: expected one or more distances in 1..seq_len-1 "
                f"(seq_len={seq_len})"
            )
        if len(set(distances)) != len(distances):
            raise ConfigError(f"data.distances={distances}: expected distinct distances")
        self.distances, self.payload = distances, payload
        self.vocab_size = self.model_vocab_size(payload, distances)
        self.val_examples, self.min_examples = val_sequences, min(val_sequences, 8)

    @classmethod
    def model_vocab_size(
        cls, payload: int = 256, distances: list[int] | None = None, **init_args: Any
    ) -> int:
        """The vocabulary these init args imply: payload x number of markers."""
        return payload * len([200, 350] if distances is None else distances)

    @classmethod
    def impossible_settings(cls) -> list[dict[str, Any]]:
        return [{"distances": [0]}, {"distances": [512]}, {"payload": 0}]

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        """Batch ``seed`` = (seed, rank, n) is drawn from ``batch_generator(*seed)``."""
        return marked_shift_copy(
            n, self.seq_len, self.distances, self.payload, batch_generator(*seed)
        )

    def check_length(self, length: int) -> None:
        if length <= min(self.distances):
            raise ConfigError(
                f"length {length}: the probe evaluates lengths > {min(self.distances)} (its "
                "shortest copy distance: no position has a source before it)"
            )

    def set_names_at(self, length: int) -> list[str]:
        return ["probe"] if length > min(self.distances) else []

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        """At the training length the set of ``val_seed`` alone; at other lengths of ``seed``."""
        if length == self.seq_len:
            generator = torch.Generator().manual_seed(self.val_seed)
        else:
            generator = batch_generator(*seed)
        n = self.examples_at(length)
        return marked_shift_copy(n, length, self.distances, self.payload, generator)

    def held_out(self) -> tuple[Tensor, Tensor]:
        """The held-out sequences (x, y), each (val_sequences, T)."""
        return self.recall_sets()["probe"]
