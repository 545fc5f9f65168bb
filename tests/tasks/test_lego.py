"""LEGO's items (lit_sparse/tasks/lego.py): each answer right by hand-evaluating its chain,
balanced within every chain length, seeded, and each impossible setting one line."""

from __future__ import annotations

import pytest

from lit_sparse.errors import ConfigError
from lit_sparse.tasks import lego_items
from lit_sparse.tasks.lego import Lego, lego_value


def lego_answer(prompt: str) -> int:
    """Evaluate a LEGO prompt by hand: 0 for +1, 1 for -1."""
    *statements, query = prompt.split(" ; ")
    rules = dict(s.split(" = ") for s in statements)

    def value(name: str) -> int:
        rhs = rules[name].rstrip(" ;")
        if rhs in ("+1", "-1"):
            return int(rhs)
        sign = 1 if rhs[0] == "+" else -1
        return sign * value(rhs[1:])

    return 0 if value(query.rstrip(" =")) == 1 else 1


def test_lego_items_are_right_and_balanced():
    items = lego_items(per_length=40, seed=3)
    assert len(items) == 120
    for item in items:
        assert item.choices == (" +1", " -1")
        assert item.answer == lego_answer(item.prompt)
        assert item.prompt.count(";") == item.group
    for n in (2, 3, 4):
        answers = [i.answer for i in items if i.group == n]
        assert answers.count(0) == answers.count(1) == 20


def test_the_value_flips_once_per_minus():
    assert lego_value(1, []) == 1 and lego_value(-1, ["+", "+"]) == -1
    assert lego_value(1, ["-", "+", "-"]) == 1 and lego_value(1, ["+", "-"]) == -1


def test_the_task_draws_the_generators_seeded_items():
    task = Lego(chain_lengths=[3, 5], per_group=4, seed=7)
    assert task.items() == lego_items([3, 5], 4, 7)
    assert sorted({item.group for item in task.items()}) == [3, 5]
    assert lego_items(seed=1) != lego_items(seed=2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"chain_lengths": [1, 3]}, r"^chain_lengths=\[1, 3\]: expected lengths in 2..26$"),
        ({"chain_lengths": [27]}, r"^chain_lengths=\[27\]: expected lengths in 2..26$"),
        ({"per_group": 0}, r"^per_group=0: expected an integer >= 1$"),
    ],
)
def test_an_impossible_setting_is_one_line(options, message):
    with pytest.raises(ConfigError, match=message):
        Lego(**options)
