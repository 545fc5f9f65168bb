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


@pytest.mark.parametrize("check", TASK_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", TASKS.builtin_names())
def test_every_built_in_task_passes_the_kit(name, check):
    task = get_task(name)
    check(task(**task.kit_options()))


NEW_TASK = """
from lit_sparse.tasks import RecallDataModule, register_task
from lit_sparse.tasks.synthetic import IGNORE_INDEX, seeded_rng
import torch


@register_task("first_token_demo")
class FirstTokenDataModule(RecallDataModule):
    summary = "repeat the first token at the end"

    def __init__(self, seq_len: int = 32, vocab_size: int = 16, batch_size: int = 4,
                 val_examples: int = 8, seed: int = 0, val_seed: int = 1):
        super().__init__(seq_len, batch_size, batch_size, seed, val_seed)
        self.vocab_size, self.val_examples = vocab_size, val_examples

    @classmethod
    def kit_options(cls):
        return {"seq_len": 16, "val_examples": 6}

    @classmethod
    def impossible_settings(cls):
        return [{"seq_len": 0}]

    def train_batch(self, n, seed):
        return self.make_set(self.seq_len, "all", seed, n)

    def set_names_at(self, length):
        return ["all"]

    def make_set(self, length, name, seed, n=None):
        rng = seeded_rng(seed)
        n = self.examples_at(length) if n is None else n
        x = torch.from_numpy(rng.integers(0, self.vocab_size, (n, length)))
        y = torch.full_like(x, IGNORE_INDEX)
        y[:, -1] = x[:, 0]
        return x, y
"""


def test_a_new_task_is_one_file_and_the_kit_checks_it(tmp_path, monkeypatch):
    """A task written as docs/tasks.md says, in a package of its own: importing its one file
    registers it (listed, found by name), and the kit passes it from its kit_options."""
    package = tmp_path / "demo_tasks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "first_token.py").write_text(NEW_TASK)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(TASKS, "classes", dict(TASKS.classes))  # the registry as it was, after
    import importlib

    importlib.import_module("demo_tasks.first_token")
    assert "first_token_demo" in list_tasks("synthetic")
    task = get_task("first_token_demo")
    for check in TASK_CHECKS:
        check(task(**task.kit_options()))


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
        check(broken(**MQARDataModule.kit_options()))


def test_impossible_settings_are_refused_before_any_work():
    with pytest.raises(ConfigError, match="gap=100"):
        MQARDataModule(gap=100)
