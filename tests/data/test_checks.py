"""The integer check the data modules and lm-eval's model arguments share
(lit_sparse/data/checks.py): the value back, or one ConfigError line naming the field."""

from __future__ import annotations

import numpy as np
import pytest

from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError


def test_an_integer_at_or_above_the_floor_comes_back():
    assert check_int("data.batch_size", 1) == 1
    assert check_int("data.num_workers", 0, low=0) == 0
    assert check_int("data.seed", np.int64(7)) == 7
    assert check_int("data.max_items", None, allow_none=True) is None


@pytest.mark.parametrize(
    ("value", "shown"), [(0, "0"), (True, "True"), (2.0, "2.0"), ("4", "'4'"), (None, "None")]
)
def test_a_bad_value_is_one_line_naming_the_field_and_the_floor(value, shown):
    with pytest.raises(ConfigError) as err:
        check_int("data.batch_size", value)
    assert str(err.value) == f"data.batch_size={shown}: expected an integer >= 1"


def test_the_message_says_when_none_is_allowed():
    with pytest.raises(ConfigError, match=r"^data.max_items=-1: expected an integer >= 0 or None$"):
        check_int("data.max_items", -1, low=0, allow_none=True)
