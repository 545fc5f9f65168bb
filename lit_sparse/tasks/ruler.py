"""RULER variable tracking (docs/paper.md section 5): follow a chain of copies among distractors.

``v0 = VAL ;`` then ``vi = v(i-1) ;`` for h hops, plus 8 distractors ``u = VAL' ;``, shuffled;
the query ``v_h =`` is a forced choice among the prompt's 9 values (2-digit numbers, one pool
per seed). The right value cycles through the pool, so a constant answer scores chance (1/9)."""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from typing import Any

from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.forced_choice import ChoiceItem
from lit_sparse.tasks.choice import ChoiceTask
from lit_sparse.tasks.registry import register_task

N_VALUES = 9


def value_pool(seed: int = 0, size: int = N_VALUES) -> list[str]:
    """``size`` distinct 2-digit numbers (the candidates of every item)."""
    rng = random.Random(f"ruler-values-{seed}")
    return [str(v) for v in rng.sample(range(10, 100), size)]


def ruler_vt_items(
    hops: Sequence[int] = (2, 3, 4),
    per_hops: int = 120,
    distractors: int = N_VALUES - 1,
    seed: int = 0,
) -> list[ChoiceItem]:
    """``per_hops`` items for every number of hops (>= 1)."""
    if per_hops < 1:
        raise ConfigError(f"per_hops={per_hops}: expected >= 1")
    if not 1 <= distractors:
        raise ConfigError(f"distractors={distractors}: expected >= 1")
    bad = [h for h in hops if h < 1 or h + 1 + distractors > 26]
    if bad:
        raise ConfigError(
            f"hops={list(hops)}: expected hops >= 1 with hops + 1 + distractors <= 26 variables"
        )
    pool = value_pool(seed, distractors + 1)
    choices = tuple(f" {v}" for v in pool)
    rng = random.Random(seed)
    items = []
    for h in hops:
        for _ in range(per_hops):
            answer = len(items) % len(pool)
            names = rng.sample(string.ascii_uppercase, h + 1 + distractors)
            chain, others = names[: h + 1], names[h + 1 :]
            statements = [f"{chain[0]} = {pool[answer]} ;"]
            statements += [f"{chain[i]} = {chain[i - 1]} ;" for i in range(1, h + 1)]
            rest = [v for i, v in enumerate(pool) if i != answer]
            statements += [f"{name} = {value} ;" for name, value in zip(others, rest, strict=True)]
            rng.shuffle(statements)
            prompt = " ".join(statements) + f" {chain[-1]} ="
            items.append(ChoiceItem(prompt, choices, answer, h))
    rng.shuffle(items)
    return items


@register_task("ruler_vt")
class RulerVariableTracking(ChoiceTask):
    """RULER variable tracking: the last value of a chain of copies among distractors (chance 1/9).

    Args:
        hops: copies in the chain, one group each (>= 1).
        distractors: assignments of the other values.
        per_group: items per number of hops (the paper: 120).
        seed: seed of the items.
    """

    @classmethod
    def kit_options(cls) -> dict[str, Any]:
        return {"per_group": 3}

    summary = "follow a chain of copies among distractor assignments (chance 1/9)"
    group_label = "hops"

    def __init__(
        self,
        hops: list[int] | None = None,
        distractors: int = N_VALUES - 1,
        per_group: int = 120,
        seed: int = 0,
    ):
        super().__init__(per_group, seed)
        self.hops = [2, 3, 4] if hops is None else list(hops)
        self.distractors = distractors
        self.check()

    def draw(self, per_group: int) -> list[ChoiceItem]:
        return ruler_vt_items(self.hops, per_group, self.distractors, self.seed)

    @classmethod
    def impossible_settings(cls) -> list[dict]:
        return [*super().impossible_settings(), {"hops": [0]}, {"distractors": 0}]
