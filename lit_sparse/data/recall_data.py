"""DataModules of the recall tasks (:mod:`lit_sparse.data.recall`): an endless seeded training
stream and fixed held-out sets, for ``fit`` with any attention variant.

- :class:`MQARDataModule`: multi-query associative recall at one setting (L, kv); held-out
  sets ``L<L>_kv<kv>`` (the training setting, and any others asked for).
- :class:`DistanceDataModule`: one pair and its query d tokens later, d uniform in
  [2, T - 2] for training; held-out sets per distance bucket (``d2-3``, ``d4-7``, ...).
- :class:`PasskeyDataModule`: a key of digits hidden in Shakespeare (the embedded corpus:
  training plays for training, the four held-out plays for the held-out sets) at a depth
  uniform in [0, 1]; held-out sets per depth (``depth0``, ``depth25``, ... in percent).

The training stream: batch n of rank r is drawn from the seed (seed, r, n), so it is fresh
every step (no fixed training set to memorise) and reproducible; a resumed run continues
at the batch of its step, so it sees what the uninterrupted run would have seen. Held-out
sets are drawn from ``val_seed`` (the same for every run whatever its seed), and
:meth:`RecallDataModule.recall_sets` gives them at any evaluation length (4x to 64x the
training length for the distance and passkey tasks). Under several processes each rank
validates its share of the examples (rank r takes r, r + R, ...; no padding).

Labels are -100 except where an answer is asked, so ``sparse_labels`` is True: the module
computes its output layer at the labelled positions only and scores accuracy
(:class:`lit_sparse.evaluation.recall.RecallAccuracy`) per held-out set.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from itertools import count
from typing import Any

import lightning.pytorch as pl
import numpy as np
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset

from lit_sparse.data.checks import check_int
from lit_sparse.data.recall import (
    IGNORE_INDEX,
    PasskeyTemplate,
    check_pairs,
    distance_buckets,
    distance_pairs,
    distance_retrieval,
    multiquery_ar,
    passkey,
)
from lit_sparse.data.windows import rank_of
from lit_sparse.errors import ConfigError

__all__ = [
    "IGNORE_INDEX",
    "DistanceDataModule",
    "HeldOutExamples",
    "MQARDataModule",
    "PasskeyDataModule",
    "RecallDataModule",
    "recall_data_from_config",
]

Examples = tuple[Tensor, Tensor]


class _Stream(IterableDataset):
    """Endless training batches of one rank, from the batch of the trainer's step on."""

    def __init__(self, module: RecallDataModule, rank: int, first: int):
        super().__init__()
        self.module, self.rank, self.first = module, rank, first

    def __iter__(self) -> Iterator[Examples]:
        for n in count(self.first):
            yield self.module.train_batch(self.module.batch_size, (self.module.seed, self.rank, n))


class HeldOutExamples(IterableDataset):
    """One rank's share (examples ``rank::world_size``) of a fixed set, in batches; an
    IterableDataset, so Lightning adds no padding DistributedSampler."""

    def __init__(self, examples: Examples, batch_size: int, rank: int = 0, world_size: int = 1):
        super().__init__()
        x, y = examples
        self.x, self.y = x[rank::world_size], y[rank::world_size]
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[Examples]:
        for start in range(0, self.x.shape[0], self.batch_size):
            yield self.x[start : start + self.batch_size], self.y[start : start + self.batch_size]


class RecallDataModule(pl.LightningDataModule):
    """What every recall task shares: the stream, the held-out sets, the loaders.

    A task defines :meth:`train_batch`, :meth:`set_names_at` and :meth:`make_set`.
    """

    sparse_labels = True
    """Labels only at the asked positions: the module scores accuracy there."""

    def __init__(
        self,
        seq_len: int,
        batch_size: int,
        val_batch_size: int,
        seed: int,
        val_seed: int,
    ):
        super().__init__()
        self.seq_len = check_int("data.seq_len", seq_len)
        self.batch_size = check_int("data.batch_size", batch_size)
        self.val_batch_size = check_int("data.val_batch_size", val_batch_size)
        self.seed = check_int("data.seed", seed, low=0)
        self.val_seed = check_int("data.val_seed", val_seed, low=0)
        self._sets: dict[tuple[int, str], Examples] = {}

    # ------------------------------------------------------------------ the task
    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        """``n`` fresh training examples from ``seed``."""
        raise NotImplementedError

    def set_names_at(self, length: int) -> list[str]:
        """The held-out sets this task has at evaluation ``length``."""
        raise NotImplementedError

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        """Held-out set ``name`` at ``length``, drawn from ``seed``."""
        raise NotImplementedError

    def distance_range(self, name: str) -> tuple[int, int] | None:
        """The key-to-query distances of a held-out set, if it is a distance bucket."""
        return None

    def check_length(self, length: int) -> None:
        """One ConfigError line when the task cannot make examples of ``length``, naming
        the shortest it can (every length: nothing to say)."""

    def examples_at(self, length: int) -> int:
        """Examples per held-out set at an evaluation ``length``: ``val_examples`` at the
        training length, beyond it the same tokens (fewer examples), but at least
        ``min_examples``."""
        if length <= self.seq_len:
            return self.val_examples
        return max(self.min_examples, self.val_examples * self.seq_len // length)

    # ------------------------------------------------------------------ held-out sets
    @property
    def val_set_names(self) -> list[str]:
        """The held-out sets at the training length, in the order of the loaders."""
        return self.set_names_at(self.seq_len)

    def recall_sets(self, length: int | None = None) -> dict[str, Examples]:
        """Every held-out set at ``length`` (default: the training length): name -> (x, y),
        each (N, length); the same examples on every call and in every run."""
        length = self.seq_len if length is None else check_int("data.length", length)
        names = self.set_names_at(length)
        for index, name in enumerate(names):
            if (length, name) not in self._sets:
                self._sets[length, name] = self.make_set(
                    length, name, (self.val_seed, length, index)
                )
        return {name: self._sets[length, name] for name in names}

    def loaders_at(self, length: int, batch_size: int | None = None) -> dict[str, DataLoader]:
        """This rank's share of every held-out set at ``length``, one loader per set."""
        rank, world = rank_of(self.trainer)
        size = batch_size or self.val_batch_size
        return {
            name: DataLoader(HeldOutExamples(examples, size, rank, world), batch_size=None)
            for name, examples in self.recall_sets(length).items()
        }

    # ------------------------------------------------------------------ loaders
    def train_dataloader(self) -> DataLoader:
        trainer = self.trainer
        first = 0
        if trainer is not None:  # a resume continues the stream at its step
            first = int(trainer.global_step) * int(trainer.accumulate_grad_batches)
        rank, _ = rank_of(self.trainer)
        return DataLoader(_Stream(self, rank, first), batch_size=None)

    def val_dataloader(self) -> list[DataLoader]:
        return list(self.loaders_at(self.seq_len).values())

    def test_dataloader(self) -> list[DataLoader]:
        """The held-out sets, as ``val_dataloader``."""
        return self.val_dataloader()


def _setting_name(seq_len: int, num_kv_pairs: int) -> str:
    return f"L{seq_len}_kv{num_kv_pairs}"


class MQARDataModule(RecallDataModule):
    """Multi-query associative recall (Zoology's MQAR) at one training setting.

    Args:
        seq_len: L, tokens per example (even).
        num_kv_pairs: key-value pairs per example (4 * num_kv_pairs <= L).
        vocab_size: V, keys from [1, V/2), values from [V/2, V) (V > L; Zoology: 8,192).
        power_a: the power law of the query gaps, p(i) ∝ a·i^(a-1) (Zoology: 0.01).
        gap: G filler tokens between the pairs and the queries (far MQAR: every query more
            than G tokens after its value; 0 is Zoology's MQAR; 4 * num_kv_pairs + G <= L).
        batch_size: training examples per batch (fresh every step).
        val_examples: examples per held-out set.
        val_settings: held-out settings ``[[L, kv], ...]`` besides the training one (each
            with 4·kv <= L and V > L); validation runs at the training length only, the
            others are for ``recall_sets(L)``.
        val_batch_size: held-out examples per validation batch.
        seed: seed of the training stream (the preset sets it to the run's seed).
        val_seed: seed of the held-out sets (the same for every run).
    """

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
        self._vocab_size = check_int("data.vocab_size", vocab_size, low=2)
        self.power_a = float(power_a)
        self.gap = check_int("data.gap", gap, low=0)
        self.val_examples = self.min_examples = check_int("data.val_examples", val_examples)
        settings = [(seq_len, num_kv_pairs)]
        for entry in val_settings or []:
            if len(entry) != 2:
                raise ConfigError(f"data.val_settings: {entry!r} is not a pair [L, kv]")
            length, kv = entry
            pair = (check_int("data.val_settings L", length), check_int("data.val_settings kv", kv))
            if pair not in settings:
                settings.append(pair)
        self.settings = settings
        for length, kv in settings:  # every setting's constraints, before any work
            try:
                multiquery_ar(1, length, kv, self._vocab_size, self.power_a, gap=self.gap)
            except ConfigError as err:
                raise ConfigError(f"data.{err}") from None

    @classmethod
    def model_vocab_size(cls, vocab_size: int = 8192, **init_args: Any) -> int:
        return check_int("data.vocab_size", vocab_size, low=2)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        return multiquery_ar(
            n, self.seq_len, self.num_kv_pairs, self._vocab_size, self.power_a, seed, self.gap
        )

    def set_names_at(self, length: int) -> list[str]:
        return [_setting_name(L, kv) for L, kv in self.settings if L == length]

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        kv = next(kv for L, kv in self.settings if _setting_name(L, kv) == name)
        return multiquery_ar(
            self.val_examples, length, kv, self._vocab_size, self.power_a, seed, self.gap
        )

    def eval_lengths(self) -> list[int]:
        """The lengths of the held-out settings."""
        return sorted({L for L, _ in self.settings})


def _bucket_name(low: int, high: int) -> str:
    return f"d{low}-{high}"


class DistanceDataModule(RecallDataModule):
    """Distance-controlled retrieval: one key-value pair, its query exactly d tokens later.

    Args:
        seq_len: T, the training length.
        vocab_size: V, keys from [1, V/2), values from [V/2, V), filler from [0, V).
        batch_size: training examples per batch, each with d uniform in [2, T - 2].
        pairs: key-value pairs per training example, each asked for once at its own
            distance (``distance_pairs``); 1 is the held-out sets' form. More pairs give
            more answers a step for the same tokens (each held-out example has one).
        values_in_filler: whether the filler is drawn from the whole vocabulary (the
            default) or from the key range [0, V/2) only, so that the values stand out from
            it as MQAR's do (training and held-out sets alike).
        val_examples: examples per distance bucket at T.
        min_examples: examples per bucket at the longer lengths, at least (there the
            buckets hold the same tokens as at T: fewer, longer examples).
        val_batch_size: held-out examples per validation batch.
        seed: seed of the training stream (the preset sets it to the run's seed).
        val_seed: seed of the held-out sets (the same for every run).

    At an evaluation length T' the held-out sets are the power-of-two buckets of [2, T' - 2]
    (``d2-3``, ``d4-7``, ...; the last one, e.g. ``d128-255`` at T' = 256, holds the
    distances up to T' - 2), d uniform within a bucket.
    """

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
        self._vocab_size = check_int("data.vocab_size", vocab_size, low=4)
        self.pairs = check_int("data.pairs", pairs)
        check_pairs(self.pairs, seq_len, self._vocab_size, field="data.pairs")
        if not isinstance(values_in_filler, bool):
            raise ConfigError(f"data.values_in_filler={values_in_filler!r}: expected true or false")
        self.values_in_filler = values_in_filler
        self.val_examples = check_int("data.val_examples", val_examples)
        self.min_examples = check_int("data.min_examples", min_examples)

    @classmethod
    def model_vocab_size(cls, vocab_size: int = 512, **init_args: Any) -> int:
        return check_int("data.vocab_size", vocab_size, low=4)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        if self.pairs > 1:
            return distance_pairs(
                n, self.seq_len, self.pairs, self._vocab_size, seed, self.values_in_filler
            )
        rng = np.random.default_rng(np.random.SeedSequence([*seed, 1]))
        distances = rng.integers(2, self.seq_len - 1, size=n)  # uniform in [2, T - 2]
        return distance_retrieval(
            n, self.seq_len, distances, self._vocab_size, seed, self.values_in_filler
        )

    def check_length(self, length: int) -> None:
        if length < 4:
            raise ConfigError(
                f"length {length}: the distance task evaluates lengths >= 4 (its shortest "
                "bucket asks for a value 2 or 3 tokens back, after its key)"
            )

    @staticmethod
    def buckets_at(length: int) -> list[tuple[int, int]]:
        """The buckets with a distance at ``length``: [2, 3], [4, 7], ... named by their
        whole power-of-two range (the last one holds only the distances up to length - 2)."""
        return [(lo, 2 * lo - 1 if lo > 2 else 3) for lo, _ in distance_buckets(2, length - 2)]

    def set_names_at(self, length: int) -> list[str]:
        return [_bucket_name(lo, hi) for lo, hi in self.buckets_at(length)]

    def distance_range(self, name: str) -> tuple[int, int] | None:
        """A bucket's whole range (at a length L its distances stop at L - 2)."""
        low, high = name[1:].split("-")
        return int(low), int(high)

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        low, high = self.distance_range(name)
        high = min(high, length - 2)
        rng = np.random.default_rng(np.random.SeedSequence([*seed, 1]))
        n = self.examples_at(length)
        distances = rng.integers(low, high + 1, size=n)
        return distance_retrieval(
            n, length, distances, self._vocab_size, seed, self.values_in_filler
        )


@functools.cache
def corpus_tokens(part: str) -> np.ndarray:
    """The embedded Shakespeare, tokenised by the embedded tokenizer: ``train`` (the training
    plays) or ``val`` (the four held-out plays), through the token cache (built once)."""
    from lit_sparse.data.datamodule import default_cache_dir
    from lit_sparse.data.sources import SourceConfig
    from lit_sparse.data.token_cache import build_source, check_part, make_plan, open_tokens
    from lit_sparse.data.tokenizer import load_tokenizer

    tok = load_tokenizer("embedded")
    source = SourceConfig(name="shakespeare", path="embedded:shakespeare")
    plan = make_plan(source, tok, default_cache_dir(), None)
    found = check_part(plan, part, verify_checksum=False)
    files = {part: found} if not isinstance(found, str) else build_source(plan, tok)
    return np.asarray(open_tokens(files[part]), dtype=np.int64)


@functools.cache
def embedded_template() -> PasskeyTemplate:
    """The passkey prompt in the embedded tokenizer's ids."""
    from lit_sparse.data.tokenizer import load_tokenizer

    return PasskeyTemplate.from_tokenizer(load_tokenizer("embedded").tokenizer)


def _depth_name(depth: float) -> str:
    """``depth25``: the needle 25 % into the text (a module name: no dots)."""
    return f"depth{round(100 * depth)}"


class PasskeyDataModule(RecallDataModule):
    """Passkey retrieval in Shakespeare: a key of digits at a depth of the text, asked for
    at the end (the embedded tokenizer: vocabulary 8,192).

    Args:
        seq_len: T, the training length.
        key_length: digits of the key (each its own token).
        batch_size: training examples per batch, each at a depth uniform in [0, 1].
        depths: the held-out depths (0: the needle first, 1: right before the question).
        val_examples: examples per depth at T.
        min_examples: examples per depth at the longer lengths, at least (the same tokens
            as at T: fewer, longer examples).
        val_batch_size: held-out examples per validation batch.
        seed: seed of the training stream (the preset sets it to the run's seed).
        val_seed: seed of the held-out sets (the same for every run).
    """

    def __init__(
        self,
        seq_len: int = 256,
        key_length: int = 5,
        batch_size: int = 32,
        depths: list[float] | None = None,
        val_examples: int = 32,
        min_examples: int = 8,
        val_batch_size: int = 32,
        seed: int = 0,
        val_seed: int = 1234,
    ):
        super().__init__(seq_len, batch_size, val_batch_size, seed, val_seed)
        self.key_length = check_int("data.key_length", key_length)
        self.min_examples = check_int("data.min_examples", min_examples)
        self.depths = [0.0, 0.25, 0.5, 0.75, 1.0] if depths is None else [float(d) for d in depths]
        if not self.depths or any(not 0 <= d <= 1 for d in self.depths):
            raise ConfigError(f"data.depths={depths!r}: expected depths in [0, 1]")
        if len({_depth_name(d) for d in self.depths}) != len(self.depths):
            raise ConfigError(f"data.depths={depths!r}: expected distinct depths (in percent)")
        self.val_examples = check_int("data.val_examples", val_examples)
        overhead = embedded_template().overhead(self.key_length)
        if seq_len <= overhead:
            raise ConfigError(
                f"data.seq_len={seq_len}: a passkey example with a key of {key_length} digits "
                f"needs more than {overhead} tokens"
            )

    @classmethod
    def model_vocab_size(cls, **init_args: Any) -> int:
        from lit_sparse.data.tokenizer import load_tokenizer, round_up

        return round_up(load_tokenizer("embedded").size)

    @property
    def vocab_size(self) -> int:
        return self.model_vocab_size()

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        depths = np.random.default_rng(np.random.SeedSequence([*seed, 1])).random(n)
        return passkey(
            n, self.seq_len, depths, corpus_tokens("train"), embedded_template(),
            self.key_length, seed,
        )  # fmt: skip

    def check_length(self, length: int) -> None:
        overhead = embedded_template().overhead(self.key_length)
        if length <= overhead:
            raise ConfigError(
                f"length {length}: the passkey task evaluates lengths >= {overhead + 1} (an "
                f"example with a key of {self.key_length} digits needs more than {overhead} "
                "tokens)"
            )

    def set_names_at(self, length: int) -> list[str]:
        if length <= embedded_template().overhead(self.key_length):
            return []
        return [_depth_name(d) for d in self.depths]

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        depth = self.depths[[_depth_name(d) for d in self.depths].index(name)]
        return passkey(
            self.examples_at(length), length, depth, corpus_tokens("val"), embedded_template(),
            self.key_length, seed,
        )  # fmt: skip


def recall_data_from_config(data: Any, **overrides: Any) -> RecallDataModule:
    """The recall task of a run's config (its ``data`` section: ``class_path`` and
    ``init_args``), with ``overrides`` of its init args; ConfigError for other data."""
    from lit_sparse.io.class_paths import import_class

    class_path = data.get("class_path") if isinstance(data, dict) else None
    cls = import_class(class_path)
    if not (isinstance(cls, type) and issubclass(cls, RecallDataModule)):
        raise ConfigError(
            f"data.class_path={class_path!r}: not a recall task (expected MQARDataModule, "
            "DistanceDataModule or PasskeyDataModule of lit_sparse.data)"
        )
    init_args = {**(data.get("init_args") or {}), **overrides}
    return cls(**init_args)
