"""Checkpoint writes are atomic: a crash mid-write leaves the previous file whole."""

import sys
from pathlib import Path

import pytest
import torch

from lit_sparse.cli import LitSparseCLI
from lit_sparse.errors import CheckpointError
from lit_sparse.runs.checkpoint_files import read_checkpoint
from lit_sparse.runs.checkpoints import AtomicCheckpointIO, atomic_torch_save

ROOT = Path(__file__).resolve().parents[2]


def test_a_crash_while_writing_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    atomic_torch_save({"step": 1, "w": torch.ones(1000)}, path)
    real_save = torch.save

    def crash_half_way(obj, handle):
        real_save(obj, handle)
        handle.truncate(handle.tell() // 2)
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash_half_way)
    with pytest.raises(OSError, match="disk full"):
        atomic_torch_save({"step": 2, "w": torch.zeros(1000)}, path)
    monkeypatch.undo()
    assert read_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"], "no temporary file is left"


def test_a_truncated_file_is_refused_not_loaded(tmp_path):
    path = tmp_path / "epoch.ckpt"
    atomic_torch_save({"w": torch.ones(1000)}, path)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match="cannot be read as a checkpoint"):
        read_checkpoint(path)


def test_the_cli_trainer_saves_atomically(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    args = [
        "--config",
        str(ROOT / "configs" / "fixed.yaml"),
        "--config",
        str(ROOT / "tests" / "configs" / "tiny.yaml"),
    ]
    cli = LitSparseCLI(args, run=False)
    assert isinstance(cli.trainer.strategy.checkpoint_io, AtomicCheckpointIO)
