"""SparseThroughputMonitor: Lightning's ThroughputMonitor fed with the model's own FLOPs."""

from __future__ import annotations

import pytest
import torch

from lit_sparse.callbacks import SparseThroughputMonitor
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation import flops_per_batch
from tests.tiny_runs import scalars


def test_flops_per_batch_follow_the_batch_shape_and_stage(learned_run):
    module = learned_run.module
    monitor = SparseThroughputMonitor()
    batch = (torch.zeros(3, 32, dtype=torch.long), torch.zeros(3, 32, dtype=torch.long))
    monitor.on_train_batch_start(None, module, batch, 0)
    assert module.flops_per_batch == flops_per_batch(module, 3, 32, training=True)
    monitor.on_validation_batch_start(None, module, batch, 0)
    assert module.flops_per_batch == flops_per_batch(module, 3, 32, training=False)
    assert 3 * module.flops_per_batch == flops_per_batch(module, 3, 32, training=True)


def test_tokens_and_flops_per_second_are_logged(learned_run):
    logged = scalars(learned_run.log_dir)
    for key in ("train/device/items_per_sec", "train/device/flops_per_sec", "train/lengths"):
        assert key in logged, key
    assert max(logged["train/lengths"].values()) == 6 * 4 * 32  # tokens: 6 batches of 4 x 32
    assert all(v > 0 for v in logged["train/device/flops_per_sec"].values())


def test_average_over_is_lightnings_window_and_the_earlier_name_still_reads():
    """Issue 45: ``window_size`` beside the attention's ``window`` in one YAML read as one
    option; it is ``average_over`` now, and a config that says ``window_size`` still works."""
    assert SparseThroughputMonitor(average_over=7).kwargs["window_size"] == 7
    assert SparseThroughputMonitor(window_size=5).kwargs["window_size"] == 5  # an older config
    assert SparseThroughputMonitor(average_over=5, window_size=5).kwargs["window_size"] == 5
    with pytest.raises(ConfigError, match=r"window_size=5 and average_over=7: window_size is"):
        SparseThroughputMonitor(average_over=7, window_size=5)
