"""Forced-choice tasks: items a text model answers by the likeliest of a few continuations, drawn
from ``seed``, scored per group (accuracy, chance rate, the most common answer's share)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from torch import nn

from lit_sparse.data.checks import check_int
from lit_sparse.evaluation.forced_choice import ChoiceItem, TaskResult, score_task
from lit_sparse.tasks.registry import Task


class ChoiceTask(Task):
    """A task of forced-choice items.

    Args:
        per_group: items per group (per chain length, per number of hops).
        seed: seed of the items.
    """

    kind: ClassVar[str] = "choice"
    group_label: ClassVar[str] = "group"
    """What the groups of items are (a column of the results table)."""

    def __init__(self, per_group: int = 120, seed: int = 0):
        self.per_group = check_int("per_group", per_group)
        self.seed = check_int("seed", seed, low=0)

    def check(self) -> None:
        """Draw one item a group: a bad option is refused before any work (subclasses call it)."""
        self.draw(1)

    def draw(self, per_group: int) -> list[ChoiceItem]:
        """``per_group`` items of every group, in a seeded order."""
        raise NotImplementedError

    def items(self) -> list[ChoiceItem]:
        """Every item, in a seeded order."""
        return self.draw(self.per_group)

    def score(
        self, model: nn.Module, encode: Callable[[str], list[int]], batch_size: int = 64
    ) -> TaskResult:
        """The model's answers to every item, per group."""
        return score_task(
            self.name, self.group_label, model, encode, self.items(), batch_size=batch_size
        )

    @classmethod
    def impossible_settings(cls) -> list[dict]:
        return [{"per_group": 0}, {"seed": -1}]
