"""Segment copy: a random segment, filler, then the segment again; the labels ask for each
next token of the copy, so a model must find where the segment was first seen and read on
from there (the induction pattern), at a distance of at least the filler's length.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError
from lit_sparse.tasks import IGNORE_INDEX, RecallDataModule

__all__ = ["SegmentCopyDataModule", "segment_copy"]


def segment_copy(
    num_examples: int, seq_len: int, segment: int, vocab_size: int, seed: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels), each (N, seq_len): the segment at a random start in the first half,
    its copy ending the sequence, filler between; labels on the copy (all but its first
    token: that one is where the model sees which segment is copied)."""
    if 2 * segment + 1 > seq_len:
        raise ConfigError(
            f"segment={segment}: two copies and a token between need 2 * segment + 1 <= "
            f"seq_len ({seq_len})"
        )
    rng = np.random.default_rng(np.random.SeedSequence(list(seed)))
    n = num_examples
    inputs = rng.integers(0, vocab_size, size=(n, seq_len))
    segments = rng.integers(0, vocab_size, size=(n, segment))
    free = seq_len - 2 * segment  # positions before the copy not taken by the segment
    starts = rng.integers(0, free, size=n)
    rows = np.arange(n)[:, None]
    inputs[rows, starts[:, None] + np.arange(segment)] = segments
    inputs[:, seq_len - segment :] = segments
    labels = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    labels[:, seq_len - segment : seq_len - 1] = segments[:, 1:]
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(labels)


class SegmentCopyDataModule(RecallDataModule):
    """Segment copy at one training length; one held-out set per evaluation length.

    Args:
        seq_len: T, the training length.
        segment: tokens of the copied segment (2 * segment + 1 <= T).
        vocab_size: V, tokens drawn uniformly from [0, V).
        batch_size: training examples per batch.
        val_examples: held-out examples at T (fewer, longer ones beyond it).
        min_examples: held-out examples at the longer lengths, at least.
        val_batch_size: held-out examples per validation batch.
        seed: seed of the training stream.
        val_seed: seed of the held-out sets.
    """

    summary = "copy a segment seen earlier, token by token (an induction task)"

    @classmethod
    def kit_options(cls) -> dict:
        """A small instance for lit_sparse's task kit."""
        return {"seq_len": 48, "segment": 6, "val_examples": 12, "min_examples": 4}

    def __init__(
        self,
        seq_len: int = 128,
        segment: int = 8,
        vocab_size: int = 256,
        batch_size: int = 32,
        val_examples: int = 64,
        min_examples: int = 8,
        val_batch_size: int = 64,
        seed: int = 0,
        val_seed: int = 1234,
    ):
        super().__init__(seq_len, batch_size, val_batch_size, seed, val_seed)
        self.segment = check_int("data.segment", segment, low=2)
        self._vocab_size = check_int("data.vocab_size", vocab_size, low=2)
        self.val_examples = check_int("data.val_examples", val_examples)
        self.min_examples = check_int("data.min_examples", min_examples)
        self.check_length(seq_len, field="data.seq_len")

    @classmethod
    def model_vocab_size(cls, vocab_size: int = 256, **init_args: Any) -> int:
        return check_int("data.vocab_size", vocab_size, low=2)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @classmethod
    def impossible_settings(cls) -> list[dict[str, Any]]:
        return [{"segment": 1}, {"segment": 64}, {"vocab_size": 1}]

    def check_length(self, length: int, field: str = "length") -> None:
        if 2 * self.segment + 1 > length:
            raise ConfigError(
                f"{field}={length}: a segment of {self.segment} and its copy need at least "
                f"{2 * self.segment + 1} tokens"
            )

    def train_batch(self, n: int, seed: tuple[int, ...]):
        return segment_copy(n, self.seq_len, self.segment, self._vocab_size, seed)

    def set_names_at(self, length: int) -> list[str]:
        return [f"copy{self.segment}_T{length}"]

    def make_set(self, length: int, name: str, seed: tuple[int, ...]):
        n = self.examples_at(length)
        return segment_copy(n, length, self.segment, self._vocab_size, seed)
