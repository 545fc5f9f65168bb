"""SparseThroughputMonitor: Lightning's ThroughputMonitor fed with the model's own FLOPs."""

from __future__ import annotations

import pytest
import torch

from lit_sparse.callbacks import SparseThroughputMonitor
from lit_sparse.callbacks.throughput import tag_name
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
    """Named by what they hold (issue 57: Lightning's ``train/lengths`` is a token count)."""
    logged = scalars(learned_run.log_dir)
    for key in ("train/device/tokens_per_sec", "train/device/flops_per_sec", "train/total/tokens"):
        assert key in logged, key
    assert max(logged["train/total/tokens"].values()) == 6 * 4 * 32  # 6 batches of 4 x 32
    assert all(v > 0 for v in logged["train/device/flops_per_sec"].values())
    assert not {"train/lengths", "train/samples", "train/device/items_per_sec"} & set(logged)


def test_lightnings_throughput_keys_are_named_by_what_they_hold():
    assert tag_name("lengths") == "total/tokens"
    assert tag_name("samples") == "total/windows"
    assert tag_name("time") == "total/seconds"
    assert tag_name("device/items_per_sec") == "device/tokens_per_sec"
    assert tag_name("samples_per_sec") == "windows_per_sec"
    assert tag_name("device/mfu") == "device/mfu"


def test_average_over_is_lightnings_window_and_the_earlier_name_still_reads():
    """Issue 45: ``window_size`` beside the attention's ``window`` in one YAML read as one
    option; it is ``average_over`` now, and a config that says ``window_size`` still works."""
    assert SparseThroughputMonitor(average_over=7).kwargs["window_size"] == 7
    assert SparseThroughputMonitor(window_size=5).kwargs["window_size"] == 5  # an older config
    assert SparseThroughputMonitor(average_over=5, window_size=5).kwargs["window_size"] == 5
    with pytest.raises(ConfigError, match=r"window_size=5 and average_over=7: window_size is"):
        SparseThroughputMonitor(average_over=7, window_size=5)
