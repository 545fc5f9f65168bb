"""RULER variable tracking's items (lit_sparse/tasks/ruler.py): each answer right by following
its chain, the right value cycling through the pool, and each impossible setting one line."""

from __future__ import annotations

import re

import pytest

from lit_sparse.errors import ConfigError
from lit_sparse.tasks import ruler_vt_items, value_pool
from lit_sparse.tasks.ruler import RulerVariableTracking


def test_ruler_items_are_right_and_balanced():
    items = ruler_vt_items(seed=2)
    pool = value_pool(2)
    assert len(set(pool)) == 9
    counts = [0] * 9
    for item in items:
        assert item.choices == tuple(f" {v}" for v in pool)
        statements = dict(s.split(" = ") for s in item.prompt.split(" ; ")[:-1])
        statements = {k: v.rstrip(" ;") for k, v in statements.items()}
        assert len(statements) == item.group + 1 + 8
        assert sorted(v for v in statements.values() if v.isdigit()) == sorted(pool)
        name, hops = re.match(r".* ([A-Z]) =$", item.prompt).group(1), 0
        while not statements[name].isdigit():
            name, hops = statements[name], hops + 1
        assert hops == item.group
        assert item.choices[item.answer] == f" {statements[name]}"
        counts[item.answer] += 1
    assert counts == [40] * 9


def test_fewer_distractors_give_fewer_candidates():
    items = ruler_vt_items(hops=[1], per_hops=6, distractors=2, seed=4)
    assert all(len(item.choices) == 3 and item.prompt.count(";") == 4 for item in items)
    assert sorted(item.answer for item in items) == [0, 0, 1, 1, 2, 2]
    assert value_pool(4, 3) == value_pool(4, 3) != value_pool(5, 3)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"hops": [0]}, r"^hops=\[0\]: expected hops >= 1 with hops \+ 1 \+ distractors <= 26"),
        ({"hops": [18]}, r"^hops=\[18\]: expected hops >= 1"),  # 18 + 1 + 8 = 27 variables
        ({"distractors": 0}, r"^distractors=0: expected >= 1$"),
        ({"per_group": 0}, r"^per_group=0: expected an integer >= 1$"),
    ],
)
def test_an_impossible_setting_is_one_line(options, message):
    with pytest.raises(ConfigError, match=message):
        RulerVariableTracking(**options)
