"""LEGO (docs/paper.md section 5): follow a chain of sign assignments to its end.

``x0 = v ;`` (v = +1 or -1), then ``xi = op x(i-1) ;`` (op ``+`` or ``-``), shuffled; the query
``x_last =`` is a forced choice of `` +1`` or `` -1``, e.g. ``w = +q ; k = +1 ; q = -k ; w =``
-> `` -1``. Right answers alternate within each chain length, so a constant answer scores 0.5."""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from typing import Any

from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.forced_choice import ChoiceItem
from lit_sparse.tasks.choice import ChoiceTask
from lit_sparse.tasks.registry import register_task

CHOICES = (" +1", " -1")


def lego_value(start: int, ops: Sequence[str]) -> int:
    """The last variable's value: ``start`` (+1 or -1) through ``ops`` ("+" or "-")."""
    return start * (-1) ** sum(op != "+" for op in ops)


def lego_items(
    chain_lengths: Sequence[int] = (2, 3, 4), per_length: int = 120, seed: int = 0
) -> list[ChoiceItem]:
    """``per_length`` items for every chain length (number of variables, >= 2)."""
    if per_length < 1:
        raise ConfigError(f"per_length={per_length}: expected >= 1")
    bad = [n for n in chain_lengths if not 2 <= n <= 26]
    if bad:
        raise ConfigError(f"chain_lengths={list(chain_lengths)}: expected lengths in 2..26")
    rng = random.Random(seed)
    items = []
    for n in chain_lengths:
        for j in range(per_length):
            answer = j % 2  # 0: +1, 1: -1 (balanced)
            names = rng.sample(string.ascii_lowercase, n)
            ops = [rng.choice("+-") for _ in range(n - 1)]
            start = 1 if lego_value(1, ops) == (1 if answer == 0 else -1) else -1
            statements = [f"{names[0]} = {'+1' if start == 1 else '-1'} ;"]
            statements += [f"{names[i]} = {ops[i - 1]}{names[i - 1]} ;" for i in range(1, n)]
            rng.shuffle(statements)
            prompt = " ".join(statements) + f" {names[-1]} ="
            items.append(ChoiceItem(prompt, CHOICES, answer, n))
    rng.shuffle(items)
    return items


@register_task("lego")
class Lego(ChoiceTask):
    """LEGO: the value at the end of a shuffled chain of sign assignments (chance 0.5).

    Args:
        chain_lengths: variables per chain, one group each (2..26).
        per_group: items per chain length (the paper: 120).
        seed: seed of the items.
    """

    @classmethod
    def kit_options(cls) -> dict[str, Any]:
        return {"per_group": 4}

    summary = "follow a shuffled chain of sign assignments to its end (chance 0.5)"
    group_label = "chain length"

    def __init__(self, chain_lengths: list[int] | None = None, per_group: int = 120, seed: int = 0):
        super().__init__(per_group, seed)
        self.chain_lengths = [2, 3, 4] if chain_lengths is None else list(chain_lengths)
        self.check()

    def draw(self, per_group: int) -> list[ChoiceItem]:
        return lego_items(self.chain_lengths, per_group, self.seed)

    @classmethod
    def impossible_settings(cls) -> list[dict]:
        return [*super().impossible_settings(), {"chain_lengths": [1]}, {"chain_lengths": [27]}]
