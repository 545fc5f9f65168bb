"""The task conformance kit: every registered task passes it, and each check fails on a task
broken in the way it guards against."""

from __future__ import annotations

import re

import pytest
import torch

from lit_sparse.errors import ConfigError
from lit_sparse.tasks import TASKS, MQARDataModule, get_task, list_tasks
from lit_sparse.testing.tasks import (
    TASK_CHECKS,
    check_task_labels,
    check_task_lengths,
    check_task_refuses_impossible_settings,
    check_task_seeded,
    check_task_shares,
)

SMALL = {
    "mqar": {"seq_len": 64, "val_examples": 12},
    "distance": {"seq_len": 32, "vocab_size": 64, "val_examples": 8, "min_examples": 4},
    "passkey": {"seq_len": 64, "val_examples": 4, "min_examples": 2, "depths": [0.0, 1.0]},
    "probe": {"seq_len": 64, "distances": [20, 30], "payload": 16, "val_sequences": 6},
    "lego": {"per_group": 4},
    "ruler_vt": {"per_group": 3},
}


def test_every_built_in_task_is_listed_here():
    assert set(SMALL) == set(TASKS.builtin_names()) and set(SMALL) <= set(list_tasks())


@pytest.mark.parametrize("check", TASK_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_built_in_task_passes_the_kit(name, check):
    check(get_task(name)(**SMALL[name]))


class UnseededMQAR(MQARDataModule):
    """Draws from torch's global generator: not a function of its seed."""

    def train_batch(self, n, seed):
        x, y = super().train_batch(n, seed)
        return torch.randint_like(x, self.vocab_size), y


class DenseLabels(MQARDataModule):
    """Labels every position."""

    def train_batch(self, n, seed):
        x, _ = super().train_batch(n, seed)
        return x, x.clone()


class FixedLength(MQARDataModule):
    """Ignores the length it is asked for."""

    def make_set(self, length, name, seed):
        return super().make_set(self.seq_len, name, seed)

    def set_names_at(self, length):
        return ["L64_kv4"]


class SameShareEverywhere(MQARDataModule):
    """Every rank scores the whole set: DDP would count each example twice."""

    def loaders_at(self, length, batch_size=None):
        saved, self.trainer = self.trainer, None
        try:
            return super().loaders_at(length, batch_size)
        finally:
            self.trainer = saved


class AcceptsAnything(MQARDataModule):
    """Checks nothing before work."""

    @classmethod
    def impossible_settings(cls):
        return [{"batch_size": 0}, {"power_a": 0.5}]


@pytest.mark.parametrize(
    ("broken", "check", "says"),
    [
        (UnseededMQAR, check_task_seeded, "not a function of its seed"),
        (DenseLabels, check_task_labels, "sparse labels expected"),
        (FixedLength, check_task_lengths, "expected (N, 32)"),
        (SameShareEverywhere, check_task_shares, "each once"),
        (AcceptsAnything, check_task_refuses_impossible_settings, "was accepted"),
    ],
)
def test_each_check_fails_on_the_task_it_guards_against(broken, check, says):
    with pytest.raises(AssertionError, match=re.escape(says)):
        check(broken(**SMALL["mqar"]))


def test_impossible_settings_are_refused_before_any_work():
    with pytest.raises(ConfigError, match="gap=100"):
        MQARDataModule(gap=100)
