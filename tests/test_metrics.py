"""Validation's metrics (lit_sparse/metrics.py): token NLL weighted by tokens, recall accuracy
per example and exact, against hand-computed values; sums that reduce across processes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torchmetrics.utilities.data import dim_zero_sum

from lit_sparse.metrics import IGNORE_INDEX, RecallAccuracy, TokenNLL, labelled_counts


def test_token_nll_metric_is_token_weighted():
    metric = TokenNLL()
    metric.update(torch.ones(1, 10))
    metric.update(torch.full((1, 30), 3.0))
    assert metric.compute().item() == pytest.approx((10 + 90) / 40)


def hand_batch():
    """Three examples: 3 of 4 asked positions right; 2 of 2 right; nothing asked."""
    labels = torch.full((3, 6), IGNORE_INDEX)
    labels[0, [1, 2, 3, 5]] = torch.tensor([4, 5, 6, 7])
    labels[1, [0, 4]] = torch.tensor([1, 2])
    preds = labels.clone()
    preds[0, 3] = 0  # one wrong
    preds[2] = 9
    return preds, labels


def test_accuracy_is_the_per_example_mean_averaged_over_examples():
    preds, labels = hand_batch()
    metric = RecallAccuracy()
    asked = labels != IGNORE_INDEX
    metric.update(preds == labels, asked)
    result = metric.compute()
    assert result["accuracy"].item() == pytest.approx((3 / 4 + 2 / 2) / 2)  # 0.875, not 5/6
    assert result["exact"].item() == pytest.approx(1 / 2)
    assert int(result["examples"]) == 2  # the example without a question is not counted
    metric.update(torch.zeros_like(asked), asked)  # the same examples, all wrong
    assert metric.compute()["accuracy"].item() == pytest.approx(0.875 / 2)


def test_labelled_counts_from_the_logits_of_the_asked_positions():
    preds, labels = hand_batch()
    mask = labels != IGNORE_INDEX
    logits = F.one_hot(preds[mask], 10).float()  # (N, V): the argmax is the prediction
    correct, asked = labelled_counts(logits, mask, labels[mask])
    assert torch.equal(asked, mask)
    assert torch.equal(correct, (preds == labels) & mask)


def test_the_states_are_sums_that_reduce_across_processes():
    for metric in (TokenNLL(), RecallAccuracy()):
        assert set(metric._reductions.values()) == {dim_zero_sum}
    empty = TokenNLL()
    empty.update(torch.zeros(1, 0))
    assert empty.compute().item() == 0.0  # no token: no division by zero
