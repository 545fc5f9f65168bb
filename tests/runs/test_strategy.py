"""FSDP2's strategy options and the resume check (lit_sparse/runs/strategy.py), in one
process: a sharded checkpoint resumes only under FSDP2, and each bad option is one line.
FSDP2 runs saving, resuming and refusing: tests/reliability/test_fsdp2_runs.py."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from lightning.pytorch.strategies import SingleDeviceStrategy

from lit_sparse.errors import CheckpointError, ConfigError
from lit_sparse.runs.strategy import FSDP2Strategy, check_resume_strategy

FSDP2 = {"class_path": "lit_sparse.runs.strategy.FSDP2Strategy", "init_args": {}}


@pytest.fixture
def sharded(tmp_path):
    path = tmp_path / "last.ckpt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is disabled": one process
        dcp.save({"state_dict": {"w": torch.ones(2)}}, checkpoint_id=str(path), no_dist=True)
    return path


def test_a_sharded_checkpoint_resumes_under_fsdp2_only(sharded):
    check_resume_strategy(sharded, FSDP2)
    check_resume_strategy(sharded, FSDP2Strategy())
    for strategy, shown in (("ddp", "ddp"), (SingleDeviceStrategy("cpu"), "SingleDeviceStrategy")):
        with pytest.raises(CheckpointError) as caught:
            check_resume_strategy(sharded, strategy)
        message = str(caught.value)
        assert message.startswith(f"ckpt_path={str(sharded)!r} was saved by FSDP2 (a folder")
        assert f"trainer.strategy={shown!r}: only FSDP2 resumes" in message


def test_a_checkpoint_file_resumes_under_any_strategy(tmp_path):
    torch.save({"global_step": 1}, tmp_path / "last.ckpt")
    check_resume_strategy(tmp_path / "last.ckpt", "ddp")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"tensor_parallel_size": 2},
            r"^trainer.strategy.init_args.tensor_parallel_size=2: must be 1",
        ),
        (
            {"data_parallel_size": 0},
            r"^trainer.strategy.init_args.data_parallel_size=0: must be 'auto'",
        ),
        (
            {"data_parallel_size": True},
            r"data_parallel_size=True: must be 'auto' \(every process\)",
        ),
    ],
)
def test_a_bad_option_is_one_line(options, message):
    with pytest.raises(ConfigError, match=message):
        FSDP2Strategy(**options)
