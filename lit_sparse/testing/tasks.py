"""The task conformance kit: the checks every registered task must pass (docs/tasks.md). Each
takes a task instance and returns None or raises AssertionError; :data:`TASK_CHECKS` lists them."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor

from lit_sparse.errors import ConfigError
from lit_sparse.metrics import IGNORE_INDEX, RecallAccuracy
from lit_sparse.tasks import ChoiceTask, RecallDataModule, Task, task_options

BATCH = 8


def _kind(task: Any) -> str:
    if isinstance(task, RecallDataModule):
        return "synthetic"
    if isinstance(task, ChoiceTask):
        return "choice"
    raise AssertionError(f"{type(task).__name__} is neither a RecallDataModule nor a ChoiceTask")


def _label(task: Task) -> str:
    return f"task {task.name or type(task).__name__!r}"


def _equal(a: tuple[Tensor, Tensor], b: tuple[Tensor, Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def check_task_seeded(task: Task) -> None:
    """The same seed gives the same examples (or items); another seed gives others."""
    if _kind(task) == "choice":
        items, again = task.items(), task.items()
        assert items == again, f"{_label(task)}: items() differ between two calls"
        other = type(task)(**{**_choice_args(task), "seed": task.seed + 1}).items()
        assert other != items, f"{_label(task)}: seed {task.seed + 1} gives the same items"
        return
    first = task.train_batch(BATCH, (task.seed, 0, 0))
    assert _equal(first, task.train_batch(BATCH, (task.seed, 0, 0))), (
        f"{_label(task)}: train_batch is not a function of its seed"
    )
    assert not _equal(first, task.train_batch(BATCH, (task.seed, 0, 1))), (
        f"{_label(task)}: batches 0 and 1 of the stream are equal"
    )
    name = task.set_names_at(task.seq_len)[0]
    held_out = task.make_set(task.seq_len, name, (task.val_seed, task.seq_len, 0))
    assert _equal(held_out, task.make_set(task.seq_len, name, (task.val_seed, task.seq_len, 0))), (
        f"{_label(task)}: held-out set {name!r} is not a function of its seed"
    )


def _choice_args(task: ChoiceTask) -> dict[str, Any]:
    return {name: getattr(task, name) for name in task_options(type(task)) if hasattr(task, name)}


def _check_examples(task: RecallDataModule, examples: Any, length: int, what: str) -> None:
    x, y = examples
    assert x.dtype == y.dtype == torch.int64, f"{what}: inputs and labels must be int64"
    assert x.shape == y.shape and x.dim() == 2 and x.shape[1] == length, (
        f"{what}: inputs {tuple(x.shape)} and labels {tuple(y.shape)}, expected (N, {length})"
    )
    assert 0 <= int(x.min()) and int(x.max()) < task.vocab_size, (
        f"{what}: an input token outside [0, {task.vocab_size})"
    )
    asked = y != IGNORE_INDEX
    assert bool(asked.any(-1).all()), f"{what}: an example asks for nothing (labels all -100)"
    answers = y[asked]
    assert 0 <= int(answers.min()) and int(answers.max()) < task.vocab_size, (
        f"{what}: a label outside [0, {task.vocab_size}) that is not -100"
    )
    if task.sparse_labels:
        share = float(asked.float().mean())
        assert share <= 0.5, f"{what}: {share:.0%} of positions labelled; sparse labels expected"


def check_task_labels(task: Task) -> None:
    """Labels only where asked (-100 elsewhere), in the vocabulary; choice answers among choices."""
    if _kind(task) == "choice":
        for item in task.items():
            assert item.prompt and len(item.choices) >= 2, f"{_label(task)}: {item}"
            assert 0 <= item.answer < len(item.choices), f"{_label(task)}: answer of {item}"
        return
    batch = task.train_batch(BATCH, (task.seed, 0, 0))
    _check_examples(task, batch, task.seq_len, f"{_label(task)}, a training batch")
    for name, examples in task.recall_sets().items():
        _check_examples(task, examples, task.seq_len, f"{_label(task)}, held-out set {name!r}")


def check_task_lengths(task: Task) -> None:
    """Held-out sets and loaders at half to four times the training length (or a one-line
    ConfigError)."""
    if _kind(task) == "choice":
        return
    lengths = {max(task.seq_len // 2, 2), task.seq_len, 2 * task.seq_len, 4 * task.seq_len}
    for length in sorted(lengths):
        try:
            task.check_length(length)
        except ConfigError as err:
            assert "\n" not in str(err), f"{_label(task)}: a multi-line error at {length}"
            continue
        sets = task.recall_sets(length)
        for name, examples in sets.items():
            what = f"{_label(task)}, set {name!r} at length {length}"
            _check_examples(task, examples, length, what)
            assert examples[0].shape[0] == task.examples_at(length), (
                f"{what}: {examples[0].shape[0]} examples, examples_at says "
                f"{task.examples_at(length)}"
            )
        loaders = task.loaders_at(length, batch_size=3)
        assert list(loaders) == list(sets), f"{_label(task)}: loaders and sets differ at {length}"


def _accuracy_state(task: RecallDataModule, rank: int, world: int) -> tuple[list[Tensor], Tensor]:
    """This rank's examples and the RecallAccuracy sums of a fixed guess over them."""
    saved = task.trainer
    task.trainer = SimpleNamespace(global_rank=rank, world_size=world)
    try:
        metric, rows = RecallAccuracy(), []
        for loader in task.loaders_at(task.seq_len, batch_size=3).values():
            for x, y in loader:
                labelled = y != IGNORE_INDEX
                metric.update(labelled & (x % 3 == 0), labelled)  # right on some examples
                rows.extend(x)
        return rows, torch.stack([metric.total, metric.exact.double(), metric.examples.double()])
    finally:
        task.trainer = saved


def check_task_shares(task: Task) -> None:
    """Under two processes each held-out example is scored once and the reduced sums are correct."""
    if _kind(task) == "choice":
        return
    whole_rows, whole = _accuracy_state(task, 0, 1)
    shares = [_accuracy_state(task, rank, 2) for rank in (0, 1)]
    rows = [row for share, _ in shares for row in share]
    key = sorted(tuple(r.tolist()) for r in rows)
    assert key == sorted(tuple(r.tolist()) for r in whole_rows), (
        f"{_label(task)}: the two ranks' shares are not the held-out examples, each once"
    )
    summed = shares[0][1] + shares[1][1]
    assert torch.allclose(summed, whole), (
        f"{_label(task)}: accuracy sums over two ranks {summed.tolist()} vs one {whole.tolist()}"
    )


def check_task_refuses_impossible_settings(task: Task) -> None:
    """Each of ``impossible_settings`` is refused by a one-line ConfigError naming field, value."""
    cls = type(task)
    settings = cls.impossible_settings()
    assert settings, f"{cls.__name__}.impossible_settings() lists none to check"
    for setting in settings:
        try:
            cls(**setting)
        except ConfigError as err:
            message = str(err)
            assert "\n" not in message, f"{cls.__name__}({setting}): a multi-line error"
            field, value = next(iter(setting.items()))
            assert field in message, f"{cls.__name__}({setting}): {message!r} does not name {field}"
            shown = [repr(value), str(value)]
            assert any(v in message for v in shown), (
                f"{cls.__name__}({setting}): {message!r} does not show the value {value!r}"
            )
        else:
            raise AssertionError(f"{cls.__name__}({setting}) was accepted")


TASK_CHECKS: list[Callable[[Task], None]] = [
    check_task_seeded,
    check_task_labels,
    check_task_lengths,
    check_task_shares,
    check_task_refuses_impossible_settings,
]
"""Every check of the task kit, for ``pytest.mark.parametrize``."""
