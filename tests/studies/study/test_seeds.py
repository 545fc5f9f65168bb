"""Statistics over seeds: mean, sample standard deviation and the "beyond the spread" rule,
against hand-computed values; the bootstrap interval against analytic ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lit_sparse_studies.study.seeds import Spread, beyond_spread


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


def _interval(values, counts, seed=0):
    from lit_sparse_studies.study.seeds import bootstrap_means, percentile_interval

    return percentile_interval(bootstrap_means(values, counts, np.random.default_rng(seed)))


def test_the_bootstrap_interval_of_a_mean_of_normal_samples_is_the_analytic_one():
    """Seeds alone: the percentile interval of the mean of n normal draws is
    mean ± 1.96 sigma / sqrt(n) (sigma the population sd the bootstrap resamples)."""
    samples = np.random.default_rng(7).normal(0.5, 0.1, size=(400, 1))
    low, high = _interval(samples, None)
    half = 1.96 * samples.std() / math.sqrt(len(samples))
    assert low == pytest.approx(samples.mean() - half, abs=0.1 * half)
    assert high == pytest.approx(samples.mean() + half, abs=0.1 * half)


def test_the_bootstrap_redraws_a_sets_examples_as_binomial_draws_of_its_count():
    """One seed, one set of n examples at accuracy p: p ± 1.96 sqrt(p (1 - p) / n)."""
    p, n = 0.3, 5000
    low, high = _interval([[p]], [[n]])
    half = 1.96 * math.sqrt(p * (1 - p) / n)
    assert low == pytest.approx(p - half, abs=0.1 * half)
    assert high == pytest.approx(p + half, abs=0.1 * half)
    assert _interval([[p]], None) == (p, p)  # no counts: nothing to redraw


def test_the_bootstrap_is_deterministic_under_its_seed():
    values, counts = [[0.2, 0.9], [0.4, 0.7], [0.3, 0.8]], [[8, 8], [8, 8], [8, 8]]
    assert _interval(values, counts, seed=3) == _interval(values, counts, seed=3)
    assert _interval(values, counts, seed=3) != _interval(values, counts, seed=4)


def test_an_interval_excludes_zero_only_when_both_ends_are_on_one_side():
    from lit_sparse_studies.study.seeds import Interval

    assert Interval(0.2, 0.01, 0.4).excludes_zero
    assert Interval(-0.2, -0.4, -0.01).excludes_zero
    assert not Interval(0.2, -0.01, 0.4).excludes_zero
    assert Interval(0.1234, 0.1, 0.15).format(2) == "0.12 [0.10, 0.15]"
