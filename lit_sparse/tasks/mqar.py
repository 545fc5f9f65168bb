"""Multi-query associative recall (MQAR) as Zoology (Arora et al., 2023) defines it: key-value
pairs, then the keys again as queries at power-law gaps, random tokens elsewhere; a query's
label is its value. ``gap`` (far MQAR) puts G filler tokens between the pairs and the queries."""

from __future__ import annotations

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
    sample_without_replacement,
    seeded_rng,
)


def gap_probabilities(space: int, power_a: float = 0.01) -> np.ndarray:
    """p(i) ∝ a·i^(a-1) for i = 1..space, normalised (Zoology's power law of query gaps)."""
    number = isinstance(power_a, (int, float, np.integer, np.floating))
    if isinstance(power_a, bool) or not number or not 0 < power_a < np.inf:
        raise ConfigError(f"power_a={power_a!r}: expected a finite number > 0 (Zoology: 0.01)")
    with np.errstate(all="ignore"):
        p = power_a * np.arange(1, space + 1, dtype=np.float64) ** (power_a - 1)
        p = p / p.sum()
    if not (np.isfinite(p).all() and (p > 0).all()):
        raise ConfigError(
            f"power_a={power_a!r}: too large for {space} query gaps (the weights a·i^(a-1) "
            "overflow or underflow float64); use a smaller power_a (Zoology: 0.01; above 1 "
            "the queries go to the far end)"
        )
    return p


def multiquery_ar(
    num_examples: int,
    seq_len: int,
    num_kv_pairs: int,
    vocab_size: int,
    power_a: float = 0.01,
    seed: Seed = 0,
    gap: int = 0,
) -> tuple[Tensor, Tensor]:
    """MQAR examples (inputs, labels), each (N, L) int64: distinct keys from [1, V/2) with values
    from [V/2, V) as ``k0 v0 k1 v1 ...``, G random tokens (far MQAR), then key i again at offset
    2·g_i of the rest (distinct gaps, p(i) ∝ a·i^(a-1)), random tokens from [0, V) elsewhere; the
    label at a query is its value. Needs L even, 4·kv + G <= L and V > L."""
    check_positive(num_examples=num_examples, seq_len=seq_len, num_kv_pairs=num_kv_pairs)
    check_positive(vocab_size=vocab_size)
    check_int("gap", gap, low=0)
    if seq_len % 2:
        raise ConfigError(f"seq_len={seq_len}: MQAR needs an even sequence length")
    if 4 * num_kv_pairs + gap > seq_len:
        if gap:
            raise ConfigError(
                f"gap={gap}: no room for the queries at seq_len={seq_len} and "
                f"num_kv_pairs={num_kv_pairs}; far MQAR needs 4 * num_kv_pairs + gap <= "
                f"seq_len, so gap <= {max(seq_len - 4 * num_kv_pairs, 0)}"
            )
        raise ConfigError(
            f"num_kv_pairs={num_kv_pairs}: MQAR needs 4 * num_kv_pairs <= seq_len ({seq_len})"
        )
    if vocab_size <= seq_len:
        raise ConfigError(f"vocab_size={vocab_size}: MQAR needs vocab_size > seq_len ({seq_len})")
    rng = seeded_rng(seed)
    n, kv, half = num_examples, num_kv_pairs, vocab_size // 2
    keys = 1 + sample_without_replacement(rng, n, kv, np.ones(half - 1))  # (N, kv) in [1, V/2)
    values = half + sample_without_replacement(rng, n, kv, np.ones(vocab_size - half))
    context = 2 * kv
    space = (seq_len - context - gap) // 2
    gaps = sample_without_replacement(rng, n, kv, gap_probabilities(space, power_a))  # (N, kv)

    inputs = rng.integers(0, vocab_size, size=(n, seq_len))  # random tokens everywhere first
    inputs[:, 0:context:2], inputs[:, 1:context:2] = keys, values
    rows = np.arange(n)[:, None]
    where = context + gap + 2 * gaps  # (N, kv) query positions, at most seq_len - 2
    inputs[rows, where] = keys
    labels = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    labels[rows, where] = values
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(labels)


def _setting_name(seq_len: int, num_kv_pairs: int) -> str:
    return f"L{seq_len}_kv{num_kv_pairs}"


@register_task("mqar")
class MQARDataModule(RecallDataModule):
    """Multi-query associative recall (Zoology's MQAR) at one training setting.

    Args:
        seq_len: L, tokens per example (even).
        num_kv_pairs: key-value pairs per example (4 * num_kv_pairs <= L).
        vocab_size: V, keys from [1, V/2), values from [V/2, V) (V > L; Zoology: 8,192).
        power_a: the power law of the query gaps, p(i) ∝ a·i^(a-1) (Zoology: 0.01).
        gap: G filler tokens between the pairs and the queries (far MQAR; 0 is Zoology's).
        batch_size: training examples per batch (fresh every step).
        val_examples: examples per held-out set.
        val_settings: held-out settings ``[[L, kv], ...]`` besides the training one.
        val_batch_size: held-out examples per validation batch.
        seed: seed of the training stream (the preset sets it to the run's seed).
        val_seed: seed of the held-out sets (the same for every run).
    """

    @classmethod
    def kit_options(cls) -> dict[str, Any]:
        return {"seq_len": 64, "val_examples": 12}

    summary = "multi-query associative recall (Zoology's MQAR; far MQAR with gap > 0)"

    @classmethod
    def impossible_settings(cls) -> list[dict[str, Any]]:
        return [{"seq_len": 63}, {"num_kv_pairs": 17}, {"gap": 100}, {"vocab_size": 64}]

    def __init__(
        self,
        seq_len: int = 64,
        num_kv_pairs: int = 4,
        vocab_size: int = 8192,
        power_a: float = 0.01,
        gap: int = 0,
        batch_size: int = 64,
        val_examples: int = 1000,
        val_settings: list[list[int]] | None = None,
        val_batch_size: int = 250,
        seed: int = 0,
        val_seed: int = 1234,
    ):
        super().__init__(seq_len, batch_size, val_batch_size, seed, val_seed)
        self.num_kv_pairs = check_int("data.num_kv_pairs", num_kv_pairs)
        self.vocab_size = self.model_vocab_size(vocab_size)
        self.power_a = float(power_a)
        self.gap = check_int("data.gap", gap, low=0)
        self.val_examples = self.min_examples = check_int("data.val_examples", val_examples)
        self.settings = [(seq_len, num_kv_pairs)]
        for entry in val_settings or []:
            if len(entry) != 2:
                raise ConfigError(f"data.val_settings: {entry!r} is not a pair [L, kv]")
            length, kv = entry
            pair = (check_int("data.val_settings L", length), check_int("data.val_settings kv", kv))
            if pair not in self.settings:
                self.settings.append(pair)
        for length, kv in self.settings:  # every setting's constraints, before any work
            try:
                multiquery_ar(1, length, kv, self.vocab_size, self.power_a, gap=self.gap)
            except ConfigError as err:
                raise ConfigError(f"data.{err}") from None

    @classmethod
    def model_vocab_size(cls, vocab_size: int = 8192, **init_args: Any) -> int:
        return check_int("data.vocab_size", vocab_size, low=2)

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        return multiquery_ar(
            n, self.seq_len, self.num_kv_pairs, self.vocab_size, self.power_a, seed, self.gap
        )

    def set_names_at(self, length: int) -> list[str]:
        return [_setting_name(L, kv) for L, kv in self.settings if L == length]

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        kv = next(kv for L, kv in self.settings if _setting_name(L, kv) == name)
        return multiquery_ar(
            self.val_examples, length, kv, self.vocab_size, self.power_a, seed, self.gap
        )

    def eval_lengths(self) -> list[int]:
        """The lengths of the held-out settings."""
        return sorted({L for L, _ in self.settings})
