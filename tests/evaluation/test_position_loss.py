"""Loss by position, binned (lit_sparse/evaluation/position_loss.py): the bin edges of
docs/paper.md section 5, the metric's per-position means within a bin, and states that are
sums (they reduce across processes)."""

from __future__ import annotations

import pytest
import torch
from torchmetrics.utilities.data import dim_zero_sum

from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.position_loss import PositionBinnedNLL, bin_edges


def test_bin_edges_follow_the_reference():
    assert bin_edges(1023, 8) == [0, 127, 255, 383, 511, 639, 767, 895, 1023]
    assert bin_edges(1024, 8) == [0, 128, 256, 384, 512, 640, 768, 896, 1024]
    assert bin_edges(32, 4) == [0, 8, 16, 24, 32]
    assert bin_edges(10, 3) == [0, 3, 6, 10]
    assert bin_edges(3, 3) == [0, 1, 2, 3]  # a bin per position
    for bad in (0, 11):
        expected = rf"^n_bins={bad}: expected 1 <= n_bins <= positions \(10\)$"
        with pytest.raises(ConfigError, match=expected):
            bin_edges(10, bad)


def test_metric_bins_per_position_means():
    metric = PositionBinnedNLL(length=6, n_bins=3)  # edges 0, 2, 4, 6
    metric.update(torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]))
    metric.update(torch.tensor([[3.0, 2.0, 1.0, 0.0, 1.0, 2.0], [2.0, 2.0, 2.0, 2.0, 3.0, 1.0]]))
    # per position: 2, 2, 2, 2, 3, 3
    torch.testing.assert_close(metric.compute(), torch.tensor([2.0, 2.0, 3.0]))
    assert metric.windows == 3
    with pytest.raises(ConfigError, match=r"^nll: expected shape \(B, 6\), got \(2, 5\)$"):
        metric.update(torch.zeros(2, 5))


def test_metric_states_are_sums_that_reduce_across_processes():
    metric = PositionBinnedNLL(length=8, n_bins=2)
    assert metric._reductions["nll_sum"] is dim_zero_sum
    assert metric._reductions["count"] is dim_zero_sum
    assert torch.isnan(metric.per_position()).all()  # no window yet
