"""The plugin option checks (lit_sparse/attention/options.py): a real number, at least a floor,
positive and finite, a share in (0, 1], one of a ``Literal``'s choices; each failure one
ConfigError line ``<option> must be <allowed>, got <value>``."""

from __future__ import annotations

import math
from typing import Literal

import pytest

from lit_sparse.attention.options import (
    at_least,
    check_choices,
    choices_of,
    numbers,
    positive,
    share,
)
from lit_sparse.errors import ConfigError


@pytest.mark.parametrize(
    ("check", "values", "message"),
    [
        (numbers, {"alpha_min": "0.5"}, "alpha_min must be a number, got '0.5'"),
        (numbers, {"alpha_max": True}, "alpha_max must be a number, got True"),
        (numbers, {"alpha_max": None}, "alpha_max must be a number, got None"),
        (positive, {"width": 0.0}, "width must be > 0 and finite, got 0.0"),
        (positive, {"width": math.inf}, "width must be > 0 and finite, got inf"),
        (positive, {"width": math.nan}, "width must be > 0 and finite, got nan"),
        (share, {"anneal": 1.5}, "anneal must be in (0, 1], got 1.5"),
        (share, {"anneal": 0}, "anneal must be in (0, 1], got 0"),
        (share, {"anneal": "1"}, "anneal must be a number, got '1'"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_option(check, values, message):
    with pytest.raises(ConfigError) as err:
        check(**values)
    assert str(err.value) == message


def test_at_least_names_the_floor_and_refuses_nan():
    at_least(0, window=0, n_global=3)
    with pytest.raises(ConfigError, match=r"^window must be >= 0, got -1$"):
        at_least(0, n_global=3, window=-1)
    with pytest.raises(ConfigError, match=r"^scale must be >= 1, got nan$"):
        at_least(1, scale=math.nan)


def test_good_values_pass():
    numbers(a=1, b=2.5)
    positive(a=1e-9, b=3)
    share(a=1, b=0.25)


class Plugin:
    def __init__(self, mode: Literal["sum", "max"] = "sum", size: int = 1, tag: str = "x"):
        self.mode, self.size, self.tag = mode, size, tag


def test_the_literal_arguments_and_their_choices():
    assert choices_of(Plugin) == {"mode": ("sum", "max")}
    check_choices(Plugin(mode="max"))
    with pytest.raises(ConfigError, match=r"^mode must be one of 'sum', 'max', got 'mean'$"):
        check_choices(Plugin(mode="mean"))
