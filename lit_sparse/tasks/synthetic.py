"""Synthetic tasks: what every trained-on task shares (:class:`RecallDataModule`) and the seeded
helpers its generators draw with. Batch n of rank r is drawn from (seed, r, n); held-out sets
from ``val_seed``, rank r validating examples r, r + R, ...; labels are -100 but where asked."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from itertools import count
from typing import Any, ClassVar

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset

from lit_sparse.data.checks import check_int
from lit_sparse.data.windows import rank_of
from lit_sparse.errors import ConfigError
from lit_sparse.metrics import IGNORE_INDEX as IGNORE_INDEX  # the tasks' label padding
from lit_sparse.tasks.registry import TASKS, Task, list_tasks

Examples = tuple[Tensor, Tensor]
"""(inputs, labels), each (N, L) int64."""

Seed = int | Sequence[int]


def seeded_rng(seed: Seed) -> np.random.Generator:
    """numpy's generator of an integer ``seed`` >= 0 or a sequence of them (else ConfigError)."""
    keys = [seed] if isinstance(seed, (int, float, np.integer, np.floating)) else seed
    sequence = isinstance(keys, (Sequence, np.ndarray)) and not isinstance(keys, (str, bytes))
    if not sequence or not all(is_whole(k) for k in keys):
        raise ConfigError(f"seed={seed!r}: expected an integer >= 0, or a sequence of them")
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in keys]))


def is_whole(value) -> bool:
    """Whether ``value`` is a whole number >= 0 (an int, or a float such as 3.0)."""
    if isinstance(value, (int, np.integer)):
        return not isinstance(value, bool) and value >= 0
    if isinstance(value, (float, np.floating)):
        return math.isfinite(value) and value >= 0 and int(value) == value
    return False


def check_positive(**values: int) -> None:
    """One ConfigError line for the first value that is not an integer >= 1."""
    for name, value in values.items():
        check_int(name, value)


def sample_without_replacement(
    rng: np.random.Generator, rows: int, k: int, weights: np.ndarray
) -> np.ndarray:
    """(rows, k) indices into ``weights``, k distinct per row, as numpy's ``choice(replace=False,
    p=...)`` draws them, all rows at once: the k largest of log(u) / w (Efraimidis and Spirakis)."""
    scores = np.log(rng.random((rows, weights.shape[-1]))) / weights  # (rows, n), all < 0
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # (rows, k) the k largest, unordered
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


class _Stream(IterableDataset):
    """Endless training batches of one rank, from the batch of the trainer's step on."""

    def __init__(self, module: RecallDataModule, rank: int, first: int):
        super().__init__()
        self.module, self.rank, self.first = module, rank, first

    def __iter__(self) -> Iterator[Examples]:
        for n in count(self.first):
            seed = (self.module.seed, self.rank, n)
            batch = self.module.train_batch(self.module.batch_size, seed)
            if n == self.first:  # a generator's bad output is one line, not a torch traceback
                self.module.check_train_batch(batch, seed)
            yield batch


class HeldOutExamples(IterableDataset):
    """One rank's share (``rank::world_size``) of a fixed set, in batches, unpadded."""

    def __init__(self, examples: Examples, batch_size: int, rank: int = 0, world_size: int = 1):
        super().__init__()
        x, y = examples
        self.x, self.y = x[rank::world_size], y[rank::world_size]
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[Examples]:
        for start in range(0, self.x.shape[0], self.batch_size):
            yield self.x[start : start + self.batch_size], self.y[start : start + self.batch_size]


class RecallDataModule(Task, pl.LightningDataModule):
    """What every synthetic task shares: the stream, the held-out sets, the loaders. A task defines
    :meth:`train_batch`, :meth:`set_names_at` and :meth:`make_set`, and may refine
    :meth:`check_length`, :meth:`distance_range` and :meth:`examples_at`."""

    kind: ClassVar[str] = "synthetic"

    sparse_labels = True
    """Labels only at the asked positions: the module scores accuracy there."""

    def __init__(
        self, seq_len: int, batch_size: int, val_batch_size: int, seed: int, val_seed: int
    ):
        super().__init__()
        self.seq_len = check_int("data.seq_len", seq_len)
        self.batch_size = check_int("data.batch_size", batch_size)
        self.val_batch_size = check_int("data.val_batch_size", val_batch_size)
        self.seed = check_int("data.seed", seed, low=0)
        self.val_seed = check_int("data.val_seed", val_seed, low=0)
        self._sets: dict[tuple[int, str], Examples] = {}

    vocab_size: int
    """The model's vocabulary: every input token and label is below it."""

    val_examples: int = 64
    """Held-out examples per set at the training length (a task's option sets it)."""
    min_examples: int = 8
    """Held-out examples per set at longer lengths, at least (:meth:`examples_at`)."""

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        """``n`` fresh training examples from ``seed``."""
        raise NotImplementedError

    def check_train_batch(self, batch: Any = None, seed: tuple[int, ...] | None = None) -> None:
        """One ConfigError line, naming the task and :meth:`train_batch`, when a training batch
        (``batch``, drawn from ``seed``; None: the stream's first, drawn here) is not (inputs,
        labels) of int64 (batch_size, seq_len), inputs in the vocabulary, labels in it or
        -100, at least one labelled position."""
        seed = (self.seed, 0, 0) if seed is None else seed
        n = self.batch_size
        if batch is None:
            batch = self.train_batch(n, seed)
        name = vars(type(self)).get("name") or type(self).__name__  # a subclass: its own
        call = f"task {name!r}: train_batch({n}, {seed})"

        def refuse(gave: str, expected: str) -> None:
            raise ConfigError(f"{call} gave {gave}; expected {expected}")

        pair = isinstance(batch, tuple | list) and len(batch) == 2
        if not pair or not all(isinstance(t, Tensor) for t in batch):
            refuse(f"a {type(batch).__name__}", "a tuple (inputs, labels) of two tensors")
        x, y = batch
        if x.dtype != torch.int64 or y.dtype != torch.int64:
            refuse(f"inputs of {x.dtype} and labels of {y.dtype}", "token ids, both torch.int64")
        if x.shape != y.shape or tuple(x.shape) != (n, self.seq_len):
            refuse(
                f"inputs of shape {tuple(x.shape)} and labels of shape {tuple(y.shape)}",
                f"both (data.batch_size, data.seq_len) = {(n, self.seq_len)}",
            )
        vocab = self.vocab_size
        low, high = int(x.min()), int(x.max())
        if low < 0 or high >= vocab:
            refuse(f"an input id of {low if low < 0 else high}", f"ids in [0, {vocab})")
        asked = y != IGNORE_INDEX
        if not bool(asked.any()):
            refuse(f"labels all {IGNORE_INDEX}", "a labelled position to learn from")
        answers = y[asked]
        low, high = int(answers.min()), int(answers.max())
        if low < 0 or high >= vocab:
            refuse(
                f"a label of {low if low < 0 else high}",
                f"labels in [0, {vocab}) or {IGNORE_INDEX} (no label)",
            )

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
        """One ConfigError line, naming the shortest allowed, when ``length`` is too short."""

    def examples_at(self, length: int) -> int:
        """Examples per held-out set at ``length``: ``val_examples`` at the training length, beyond
        it the same tokens, but at least ``min_examples``."""
        if length <= self.seq_len:
            return self.val_examples
        return max(self.min_examples, self.val_examples * self.seq_len // length)

    @property
    def val_set_names(self) -> list[str]:
        """The held-out sets at the training length, in the order of the loaders."""
        return self.set_names_at(self.seq_len)

    def recall_sets(self, length: int | None = None) -> dict[str, Examples]:
        """Every held-out set at ``length`` (default: training): name -> (x, y), fixed examples."""
        length = self.seq_len if length is None else check_int("data.length", length)
        names = self.set_names_at(length)
        for index, name in enumerate(names):
            key = (length, name)
            if key not in self._sets:
                self._sets[key] = self.make_set(length, name, (self.val_seed, length, index))
        return {name: self._sets[length, name] for name in names}

    def loaders_at(self, length: int, batch_size: int | None = None) -> dict[str, DataLoader]:
        """This rank's share of every held-out set at ``length``, one loader per set."""
        rank, world = rank_of(self.trainer)
        size = batch_size or self.val_batch_size
        return {
            name: DataLoader(HeldOutExamples(examples, size, rank, world), batch_size=None)
            for name, examples in self.recall_sets(length).items()
        }

    def train_dataloader(self) -> DataLoader:
        trainer, first = self.trainer, 0
        if trainer is not None:  # a resume continues the stream at its step
            first = int(trainer.global_step) * int(trainer.accumulate_grad_batches)
        rank, _ = rank_of(trainer)
        return DataLoader(_Stream(self, rank, first), batch_size=None)

    def val_dataloader(self) -> list[DataLoader]:
        return list(self.loaders_at(self.seq_len).values())

    def test_dataloader(self) -> list[DataLoader]:
        """The held-out sets, as ``val_dataloader``."""
        return self.val_dataloader()


def recall_data_from_config(data: Any, **overrides: Any) -> RecallDataModule:
    """The synthetic task of a run config's ``data`` section, ``overrides`` applied to its init args
    (ConfigError for other data)."""
    from lit_sparse.io.class_paths import import_class

    class_path = data.get("class_path") if isinstance(data, dict) else None
    synthetic = list_tasks("synthetic")
    cls = TASKS.get(class_path) if class_path in synthetic else import_class(class_path)
    if not (isinstance(cls, type) and issubclass(cls, RecallDataModule)):
        raise ConfigError(
            f"data.class_path={class_path!r}: not a synthetic task; registered: "
            f"{', '.join(synthetic)} (or the class path of a RecallDataModule)"
        )
    init_args = {**(data.get("init_args") or {}), **overrides}
    return cls(**init_args)
