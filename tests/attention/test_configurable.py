"""Objects that write themselves back as their constructor's arguments
(lit_sparse/attention/configurable.py): ``to_config``, nested objects as their configs,
equality by options, and a repr of them."""

from __future__ import annotations

import pytest

from lit_sparse.attention.configurable import Configurable, plain


class Step(Configurable):
    def __init__(self, size: int = 1):
        self.size = size


class Ladder(Configurable):
    def __init__(self, steps: list, top: Step, *extra, name: str = "l", **more):
        self.steps, self.top, self.name = steps, top, name


STEP = f"{__name__}.Step"


def test_the_config_is_the_class_path_and_the_arguments_nested_as_configs():
    ladder = Ladder([Step(2), 3], Step(), name="x")
    assert ladder.to_config() == {
        "class_path": f"{__name__}.Ladder",
        "init_args": {
            "steps": [{"class_path": STEP, "init_args": {"size": 2}}, 3],
            "top": {"class_path": STEP, "init_args": {"size": 1}},
            "name": "x",
        },
    }


def test_plain_turns_tuples_into_lists_and_leaves_other_values():
    assert plain((Step(4), "a")) == [{"class_path": STEP, "init_args": {"size": 4}}, "a"]
    assert plain({"k": 1}) == {"k": 1}


def test_equal_by_type_and_options_and_not_hashable():
    assert Step(2) == Step(2) and Step(2) != Step(3)
    assert Ladder([Step(2)], Step()) == Ladder([Step(2)], Step())

    class Twin(Configurable):
        def __init__(self, size: int = 1):
            self.size = size

    assert Twin(2) != Step(2)  # the same options, another class
    with pytest.raises(TypeError, match="unhashable"):
        hash(Step())


def test_the_repr_shows_each_option():
    assert repr(Ladder([Step(2)], Step(), name="x")) == (
        "Ladder(steps=[Step(size=2)], top=Step(size=1), name='x')"
    )
