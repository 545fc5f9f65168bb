"""Statistics over seeds: mean, sample standard deviation and the "beyond the spread" rule,
against hand-computed values."""

from __future__ import annotations

import math

import pytest

from lit_sparse.study.seeds import Spread, beyond_spread


def test_mean_and_sample_sd():
    spread = Spread.of([1.0, 2.0, 4.0, None, math.nan])  # missing values are left out
    assert spread.n == 3
    assert spread.mean == pytest.approx(7 / 3)
    # sum of squared deviations 14/3 over n - 1 = 2
    assert spread.sd == pytest.approx(math.sqrt(7 / 3))
    assert spread.format(2) == "2.33 ± 1.53"
    assert Spread.of([0.5]).format(1, sign=True) == "+0.5"  # one seed: no spread shown
    assert math.isnan(Spread.of([0.5]).sd)
    assert Spread.of([]).format() == "-"


def test_two_means_differ_beyond_the_spread_when_the_gap_exceeds_both_sds():
    a = Spread.of([10.0, 12.0])  # mean 11, sd sqrt(2) = 1.414
    b = Spread.of([14.0, 16.0])  # mean 15, sd 1.414: gap 4 > 2.83
    c = Spread.of([13.0, 14.0])  # mean 13.5, sd 0.707: gap 2.5 > 2.12
    d = Spread.of([12.0, 13.0])  # mean 12.5, sd 0.707: gap 1.5 < 2.12
    assert beyond_spread(a, b) is True and beyond_spread(b, a) is True
    assert beyond_spread(a, c) is True
    assert beyond_spread(a, d) is False


def test_a_change_differs_from_zero_when_its_mean_exceeds_its_sd():
    assert beyond_spread(Spread.of([1.0, 3.0])) is True  # mean 2 > sd 1.41
    assert beyond_spread(Spread.of([-1.0, 3.0])) is False  # mean 1 < sd 2.83


def test_one_seed_has_no_spread_to_compare_with():
    assert beyond_spread(Spread.of([1.0])) is None
    assert beyond_spread(Spread.of([1.0, 2.0]), Spread.of([5.0])) is None
