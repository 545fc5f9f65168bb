"""What every synthetic task shares (lit_sparse.tasks.synthetic): a generator's bad output
(issue 57, TB3-TB6 and a task that labels nothing) is one line naming the task and
``train_batch``, checked on the stream's first batch, and by ``fit`` before its run folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from lit_sparse_copy import SegmentCopyDataModule

from lit_sparse.errors import ConfigError
from lit_sparse.tasks import IGNORE_INDEX

ROOT = Path(__file__).resolve().parents[2]


class FaultyCopy(SegmentCopyDataModule):
    """Segment copy whose training batches break in one way (``fault``)."""

    def __init__(self, fault: str = "none", **kwargs) -> None:
        super().__init__(**kwargs)
        self.fault = fault

    def train_batch(self, n: int, seed: tuple[int, ...]):
        x, y = super().train_batch(n, seed)
        if self.fault == "shapes":
            return x, y[:, 1:]
        if self.fault == "ids":
            x[0, 3] = self.vocab_size + 5
        elif self.fault == "labels":
            y[0, -2] = self.vocab_size
        elif self.fault == "float":
            x = x.float()
        elif self.fault == "unlabelled":
            y = torch.full_like(y, IGNORE_INDEX)
        return x, y


FAULTS = {
    "shapes": "inputs of shape (4, 32) and labels of shape (4, 31); expected both "
    "(data.batch_size, data.seq_len) = (4, 32)",
    "ids": "an input id of 69; expected ids in [0, 64)",
    "labels": "a label of 64; expected labels in [0, 64) or -100",
    "float": "inputs of torch.float32 and labels of torch.int64",
    "unlabelled": "labels all -100",
}


def faulty(fault: str) -> FaultyCopy:
    return FaultyCopy(fault, seq_len=32, segment=4, vocab_size=64, batch_size=4)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_bad_training_batch_is_one_line_naming_the_task_and_train_batch(fault):
    task = faulty(fault)
    for check in (task.check_train_batch, lambda: next(iter(task.train_dataloader()))):
        with pytest.raises(ConfigError) as info:
            check()
        line = str(info.value)
        assert "\n" not in line and FAULTS[fault] in line
        assert line.startswith("task 'FaultyCopy': train_batch(4, (0, 0, 0)) gave ")


def test_a_good_task_passes_the_check_and_its_stream_is_unchanged():
    task = faulty("none")
    task.check_train_batch()
    x, y = next(iter(task.train_dataloader()))
    assert torch.equal(x, task.train_batch(4, (0, 0, 0))[0])


@pytest.mark.slow  # starts fit (refused before training)
@pytest.mark.parametrize("fault", ["shapes", "float"])
def test_fit_refuses_a_bad_generator_in_one_line_before_its_run_folder(
    fault, tmp_path, monkeypatch, capsys
):
    from lit_sparse.cli import main

    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    monkeypatch.chdir(tmp_path)
    code = main([
        "fit", "--config", str(ROOT / "configs" / "sliding_window.yaml"),
        "--data.class_path", f"{__name__}.FaultyCopy", "--data.init_args.fault", fault,
        "--config", str(ROOT / "tests" / "configs" / "tiny_recall.yaml"),
        "--data.init_args.seq_len", "32", "--data.init_args.segment", "4",
        "--data.init_args.vocab_size", "64", "--trainer.accelerator", "cpu",
        "--trainer.logger.init_args.save_dir", str(tmp_path / "runs"),
    ])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: task 'FaultyCopy': train_batch(4, (42, 0, 0))")
    assert FAULTS[fault] in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # no run folder left behind
