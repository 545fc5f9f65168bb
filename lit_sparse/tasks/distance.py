"""Distance-controlled retrieval: a key-value pair and its query exactly d tokens after the key,
in random filler; accuracy per d measures how far a pattern reaches through depth."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError
from lit_sparse.tasks.registry import register_task
from lit_sparse.tasks.synthetic import (
    IGNORE_INDEX,
    Examples,
    RecallDataModule,
    Seed,
    check_positive,
    is_whole,
    sample_without_replacement,
    seeded_rng,
)


def distance_retrieval(
    num_examples: int,
    seq_len: int,
    distances: int | Sequence[int] | np.ndarray,
    vocab_size: int,
    seed: Seed = 0,
    values_in_filler: bool = True,
) -> tuple[Tensor, Tensor]:
    """(inputs, labels): a key from [1, V/2) at a random p, its value from [V/2, V) at p + 1, the
    key again at p + d (labelled with the value), filler from [0, V) without the key (from
    [0, V/2) with ``values_in_filler=False``). ``distances``: one d or one per example."""
    check_positive(num_examples=num_examples, seq_len=seq_len, vocab_size=vocab_size)
    d = _distances(distances, num_examples)
    bad = d[(d < 2) | (d > seq_len - 2)]
    if bad.size:
        raise ConfigError(
            f"distance={int(bad[0])}: expected a distance in [2, seq_len - 2] = [2, {seq_len - 2}]"
        )
    if vocab_size < 4:
        raise ConfigError(f"vocab_size={vocab_size}: expected at least 4 tokens")
    rng = seeded_rng(seed)
    n, half = num_examples, vocab_size // 2
    keys = rng.integers(1, half, size=n)
    values = rng.integers(half, vocab_size, size=n)
    start = (rng.random(n) * (seq_len - 1 - d)).astype(np.int64)  # p in [0, L - 2 - d]
    top = vocab_size if values_in_filler else half
    filler = rng.integers(0, top - 1, size=(n, seq_len))
    inputs = filler + (filler >= keys[:, None])  # uniform over [0, top) without the key
    rows = np.arange(n)
    inputs[rows, start], inputs[rows, start + 1], inputs[rows, start + d] = keys, values, keys
    labels = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    labels[rows, start + d] = values
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(labels)


def check_pairs(pairs: int, seq_len: int, vocab_size: int, field: str = "pairs") -> None:
    """ConfigError naming ``field`` unless 4 * ``pairs`` <= ``seq_len`` and pairs <= V/2 - 1."""
    check_positive(**{field: pairs})
    if 4 * pairs > seq_len:
        raise ConfigError(f"{field}={pairs}: needs 4 * pairs <= seq_len ({seq_len})")
    if pairs > vocab_size // 2 - 1:
        raise ConfigError(
            f"{field}={pairs}: needs distinct keys, at most V/2 - 1 = {vocab_size // 2 - 1}"
        )


def distance_pairs(
    num_examples: int,
    seq_len: int,
    pairs: int,
    vocab_size: int,
    seed: Seed = 0,
    values_in_filler: bool = True,
) -> tuple[Tensor, Tensor]:
    """As :func:`distance_retrieval` with ``pairs`` distinct keys per example, each asked once at
    its own d uniform in [2, L - 2], and filler without any of them (one answer per query)."""
    check_positive(num_examples=num_examples, seq_len=seq_len, vocab_size=vocab_size)
    check_pairs(pairs, seq_len, vocab_size)
    half = vocab_size // 2
    rng = seeded_rng(seed)
    n = num_examples
    keys = sample_without_replacement(rng, n, pairs, np.ones(half - 1)) + 1  # (n, pairs)
    values = rng.integers(half, vocab_size, size=(n, pairs))
    top = vocab_size if values_in_filler else half
    inputs = rng.integers(0, top, size=(n, seq_len))
    while (clash := (inputs[:, :, None] == keys[:, None, :]).any(-1)).any():
        inputs[clash] = rng.integers(0, top, size=int(clash.sum()))
    labels = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    for row in range(n):
        free = np.ones(seq_len, dtype=bool)
        for key, value in zip(keys[row], values[row], strict=True):
            for _ in range(1000):
                d = int(rng.integers(2, seq_len - 1))
                span = seq_len - 1 - d  # starts p in [0, L - 2 - d]: p, p + 1, p + d free
                starts = np.flatnonzero(free[:span] & free[1 : span + 1] & free[d : d + span])
                if starts.size:
                    break
            else:  # unreachable at 4 * pairs <= L: far more room than three slots a pair
                raise ConfigError(f"pairs={pairs}: no room for a pair at seq_len={seq_len}")
            p = int(starts[rng.integers(starts.size)])
            free[[p, p + 1, p + d]] = False
            inputs[row, [p, p + 1, p + d]] = key, value, key
            labels[row, p + d] = value
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(labels)


def _distances(distances, num_examples: int) -> np.ndarray:
    """``distances`` as (num_examples,) int64: one whole number, or one per example."""
    values = np.asarray(distances, dtype=object if isinstance(distances, str) else None)
    if values.ndim > 1 or (values.ndim == 1 and values.shape[0] != num_examples):
        count = f"{values.shape[0]} values" if values.ndim == 1 else f"shape {values.shape}"
        raise ConfigError(
            f"distances: {count} for num_examples={num_examples}; give one distance, or one "
            "per example"
        )
    bad = next((v for v in values.reshape(-1).tolist() if not is_whole(v)), None)
    if bad is not None or values.dtype == bool:
        shown = bad if bad is not None else distances
        raise ConfigError(f"distances={shown!r}: expected whole numbers of tokens (>= 2)")
    return np.broadcast_to(values.astype(np.int64), (num_examples,))


def distance_buckets(low: int, high: int) -> list[tuple[int, int]]:
    """Inclusive power-of-two ranges [2, 3], [4, 7], ... covering [low, high] (the ends cut)."""
    if not 1 <= low <= high:
        raise ConfigError(f"distances [{low}, {high}]: expected 1 <= low <= high")
    buckets, edge = [], 1 << max(0, low.bit_length() - 1)
    while edge <= high:
        lo, hi = max(edge, low), min(2 * edge - 1, high)
        if lo <= hi:
            buckets.append((lo, hi))
        edge *= 2
    return buckets


@register_task("distance")
class DistanceDataModule(RecallDataModule):
    """Distance-controlled retrieval: one key-value pair, its query exactly d tokens later.

    Held-out sets at length T' are the power-of-two buckets ``d2-3``, ``d4-7``, ... of d <= T' - 2.

    Args:
        seq_len: T, the training length.
        vocab_size: V, keys from [1, V/2), values from [V/2, V), filler from [0, V).
        batch_size: training examples per batch, each with d uniform in [2, T - 2].
        pairs: key-value pairs per training example (held-out examples have one).
        values_in_filler: filler from the whole vocabulary, or (false) from [0, V/2) only.
        val_examples: examples per distance bucket at T.
        min_examples: examples per bucket at longer lengths, at least.
        val_batch_size: held-out examples per validation batch.
        seed: seed of the training stream (the preset sets it to the run's seed).
        val_seed: seed of the held-out sets (the same for every run).
    """

    @classmethod
    def kit_options(cls) -> dict[str, Any]:
        return {"seq_len": 32, "vocab_size": 64, "val_examples": 8, "min_examples": 4}

    summary = "one key-value pair, its query exactly d tokens later; accuracy per distance"

    @classmethod
    def impossible_settings(cls) -> list[dict[str, Any]]:
        return [{"seq_len": 3}, {"pairs": 100}, {"vocab_size": 3}]

    def __init__(
        self,
        seq_len: int = 256,
        vocab_size: int = 512,
        batch_size: int = 32,
        pairs: int = 1,
        values_in_filler: bool = True,
        val_examples: int = 64,
        min_examples: int = 8,
        val_batch_size: int = 64,
        seed: int = 0,
        val_seed: int = 1234,
    ):
        super().__init__(seq_len, batch_size, val_batch_size, seed, val_seed)
        if seq_len < 4:
            raise ConfigError(f"data.seq_len={seq_len}: the distance task needs at least 4")
        self.vocab_size = self.model_vocab_size(vocab_size)
        check_pairs(pairs, seq_len, self.vocab_size, field="data.pairs")
        self.pairs = pairs
        if not isinstance(values_in_filler, bool):
            raise ConfigError(f"data.values_in_filler={values_in_filler!r}: expected true or false")
        self.values_in_filler = values_in_filler
        self.val_examples = check_int("data.val_examples", val_examples)
        self.min_examples = check_int("data.min_examples", min_examples)

    @classmethod
    def model_vocab_size(cls, vocab_size: int = 512, **init_args: Any) -> int:
        return check_int("data.vocab_size", vocab_size, low=4)

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        if self.pairs > 1:
            return distance_pairs(
                n, self.seq_len, self.pairs, self.vocab_size, seed, self.values_in_filler
            )
        distances = seeded_rng((*seed, 1)).integers(2, self.seq_len - 1, size=n)  # in [2, T - 2]
        return distance_retrieval(
            n, self.seq_len, distances, self.vocab_size, seed, self.values_in_filler
        )

    def check_length(self, length: int) -> None:
        if length < 4:
            raise ConfigError(
                f"length {length}: the distance task evaluates lengths >= 4 (its shortest "
                "bucket asks for a value 2 or 3 tokens back, after its key)"
            )

    @staticmethod
    def buckets_at(length: int) -> list[tuple[int, int]]:
        """The buckets with a distance at ``length``, named by their whole power-of-two range."""
        return [(lo, 2 * lo - 1 if lo > 2 else 3) for lo, _ in distance_buckets(2, length - 2)]

    def set_names_at(self, length: int) -> list[str]:
        return [f"d{lo}-{hi}" for lo, hi in self.buckets_at(length)]

    def distance_range(self, name: str) -> tuple[int, int] | None:
        """A bucket's whole range (at a length L its distances stop at L - 2)."""
        low, high = name[1:].split("-")
        return int(low), int(high)

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        low, high = self.distance_range(name)
        high = min(high, length - 2)
        n = self.examples_at(length)
        distances = seeded_rng((*seed, 1)).integers(low, high + 1, size=n)
        return distance_retrieval(
            n, length, distances, self.vocab_size, seed, self.values_in_filler
        )
