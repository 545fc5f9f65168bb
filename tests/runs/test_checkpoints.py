"""Checkpoints on Lightning's side (lit_sparse/runs/checkpoints.py): saves that leave the old
file whole on a crash, a full disk as one line, loads verified before they are read, and a
sharded folder loaded as its whole weights. The CLI's trainer saving this way:
tests/reliability/test_atomic.py."""

from __future__ import annotations

import errno
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp

from lit_sparse.errors import CheckpointError, StorageError
from lit_sparse.runs.checkpoint_files import read_checkpoint
from lit_sparse.runs.checkpoints import AtomicCheckpointIO, atomic_torch_save
from tests.reliability.cli_runs import flip_bit


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


def test_a_full_disk_inside_torchs_zip_writer_is_one_line(tmp_path, monkeypatch):
    """torch wraps the OSError of a failed write in a RuntimeError of its zip writer."""
    path = tmp_path / "last.ckpt"

    def full(obj, handle):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as err:
            raise RuntimeError("PytorchStreamWriter failed writing file data/0") from err

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(StorageError) as caught:
        atomic_torch_save({"w": torch.ones(3)}, path)
    assert str(caught.value).startswith(f"cannot write {str(path)!r}: the disk is full")
    assert list(tmp_path.iterdir()) == []


def test_the_checkpoint_io_verifies_what_it_loads(tmp_path):
    io = AtomicCheckpointIO()
    path = tmp_path / "last.ckpt"
    io.save_checkpoint({"global_step": 2, "w": torch.arange(64.0)}, path)
    assert io.load_checkpoint(path)["global_step"] == 2
    flip_bit(path)
    with pytest.raises(CheckpointError, match="fails its CRC-32 check"):
        io.load_checkpoint(path)


def test_a_sharded_folder_loads_as_its_whole_weights(tmp_path):
    path = tmp_path / "last.ckpt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is disabled": one process
        dcp.save({"state_dict": {"w": torch.arange(4.0)}}, checkpoint_id=str(path), no_dist=True)
    torch.save({"global_step": 4}, path / "meta.pt")
    loaded = AtomicCheckpointIO().load_checkpoint(path)
    assert loaded["global_step"] == 4 and torch.equal(loaded["state_dict"]["w"], torch.arange(4.0))
