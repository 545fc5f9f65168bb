"""BigBird-style attention adapted to causal decoding (against the original: docs/paper.md
section 7): distances 0..window, the first n_global positions, and per block of queries n_random
keys from before the block, outside the window and after the globals, drawn by hashing (seed,
layer, block, draw) so they do not depend on the sequence length."""

from __future__ import annotations

import numpy as np
import torch

from lit_sparse.attention.base import AttentionPlugin, SlotPattern
from lit_sparse.attention.options import at_least
from lit_sparse.attention.registry import register_attention
from lit_sparse.kernels import KeySlots

_MASK64 = (1 << 64) - 1


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on uint64 arrays (wrap-around arithmetic)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(_MASK64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def random_block_keys(
    seed: int, layer: int, n_blocks: int, block_size: int, n_random: int, window: int, n_global: int
) -> np.ndarray:
    """(n_blocks, R) random key positions per query block, -1 for none, R = min(``n_random``,
    the widest block's candidates): block b draws ``n_random`` of [n_global, b * block_size -
    window) uniformly (a repeat becomes -1), or takes them all if there are no more."""
    low = n_global
    high = np.arange(n_blocks)[:, None] * block_size - window  # exclusive
    span = np.maximum(high - low, 0)  # (n_blocks, 1) candidates per block
    width = int(min(n_random, span.max(initial=0)))
    blocks = np.arange(n_blocks, dtype=np.uint64)[:, None]
    draws = np.arange(width, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        state = _splitmix64(np.uint64(seed) * np.uint64(1_000_003) + np.uint64(layer))
        state = _splitmix64(state ^ _splitmix64(blocks * np.uint64(65_537) + draws))
    uniform = (state >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    keys = np.where(span > 0, low + np.floor(uniform * span).astype(np.int64), -1)
    column = np.arange(width)[None, :]
    every = np.where(column < span, low + column, -1)  # all of a block's candidates
    keys = np.sort(np.where(span <= n_random, every, keys), axis=1)
    repeated = np.zeros_like(keys, dtype=bool)
    repeated[:, 1:] = keys[:, 1:] == keys[:, :-1]
    return np.where(repeated, -1, keys)


class BigBirdPattern(SlotPattern):
    def __init__(
        self,
        training_length: int,
        layer: int,
        window: int,
        n_global: int,
        n_random: int,
        block_size: int,
        seed: int,
    ):
        super().__init__(training_length)
        self.layer, self.window, self.n_global = layer, window, n_global
        self.n_random, self.block_size, self.seed = n_random, block_size, seed

    def distances(self, length: int) -> list[int]:
        """The window's distances; global and random keys are absolute positions."""
        return list(range(min(self.window, length - 1) + 1))

    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        n_blocks = -(-length // self.block_size)
        randoms = random_block_keys(
            self.seed,
            self.layer,
            n_blocks,
            self.block_size,
            self.n_random,
            self.window,
            self.n_global,
        )
        first = np.arange(min(self.n_global, length))  # globals past the sequence: none
        globals_ = np.broadcast_to(first, (n_blocks, len(first)))
        keys = np.concatenate([globals_, randoms], axis=1)
        return KeySlots(
            distances=torch.tensor(self.distances(length), device=device),
            reach=min(self.window, length - 1) + 1,
            block_keys=torch.from_numpy(keys).to(device=device, dtype=torch.long),
            block_size=self.block_size,
            min_abs_distance=self.window + 1,
        )

    def extra_repr(self) -> str:
        return (
            f"window={self.window}, n_global={self.n_global}, n_random={self.n_random}, "
            f"block_size={self.block_size}"
        )


@register_attention("bigbird")
class BigBirdAttention(AttentionPlugin):
    """Window + global + random keys, adapted to causal decoding."""

    def __init__(
        self,
        window: int = 8,
        n_global: int = 4,
        n_random: int = 8,
        block_size: int = 64,
        seed: int = 0,
    ):
        """
        Args:
            window: each query attends to distances 0..window.
            n_global: the first n_global positions are attended by every later query.
            n_random: random earlier keys per block of queries.
            block_size: queries per block sharing one random draw (the original's 64).
            seed: seed of the random pattern (mixed with the layer index).
        """
        at_least(0, window=window, n_global=n_global, n_random=n_random, seed=seed)
        at_least(1, block_size=block_size)
        self.window, self.n_global, self.n_random = window, n_global, n_random
        self.block_size, self.seed = block_size, seed

    def build(self, layer: int, n_layers: int, training_length: int) -> BigBirdPattern:
        return BigBirdPattern(training_length, layer, **self.init_args())

    @classmethod
    def conformance_cases(cls, window: int, n_layers: int) -> dict[str, AttentionPlugin]:
        """Small blocks, so short test sequences hold several blocks of random keys."""
        return {"bigbird": cls(window=window, n_global=3, n_random=5, block_size=16, seed=1)}

    @classmethod
    def bench_cases(cls, keys: int, window: int) -> dict[str, AttentionPlugin]:
        """Window W, 2 global keys and random keys for the rest of ``keys``."""
        return {"bigbird": cls(window=window, n_global=2, n_random=max(0, keys - window - 3))}
