"""A run's TensorBoard scalars read back, the event file a logger writes, and the wait that
makes a resume's event file sort after the last one (lit_sparse/runs/events.py)."""

from __future__ import annotations

import time

from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.loggers.logger import DummyLogger
from torch.utils.tensorboard import SummaryWriter

from lit_sparse.runs.events import read_scalars, wait_for_a_later_event_file, writer_file


def test_scalars_under_a_prefix_by_step_the_last_value_at_a_step_winning(tmp_path):
    with SummaryWriter(str(tmp_path)) as writer:
        for step, value in ((0, 4.0), (1, 3.0), (1, 2.5), (2, 2.0)):
            writer.add_scalar("train/loss", value, step)
        writer.add_scalar("val/loss", 5.0, 2)
    assert read_scalars(tmp_path, prefix="train/") == {"train/loss": {0: 4.0, 1: 2.5, 2: 2.0}}
    assert set(read_scalars(tmp_path)) == {"train/loss", "val/loss"}


def test_a_folder_without_event_files_has_no_scalars(tmp_path):
    assert read_scalars(tmp_path) == {}
    assert read_scalars(tmp_path / "missing") == {}


def test_the_writer_file_is_the_event_file_the_logger_appends_to(tmp_path):
    logger = TensorBoardLogger(str(tmp_path), name="", version="v")
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.experiment.flush()
    (made,) = (tmp_path / "v").glob("events.out.tfevents.*")
    assert writer_file(logger) == str(made)
    logger.finalize("success")
    assert writer_file(DummyLogger()) == ""  # a logger without an event file


def test_the_wait_ends_past_the_newest_files_second(tmp_path):
    assert wait_for_a_later_event_file(tmp_path) == 0.0  # no event file: no wait
    now = int(time.time())
    (tmp_path / "layer_00").mkdir()
    (tmp_path / "layer_00" / f"events.out.tfevents.{now}.host.7.0").touch()  # in a subfolder
    slept = wait_for_a_later_event_file(tmp_path)
    assert 0 < slept <= 1 and int(time.time()) > now
    assert wait_for_a_later_event_file(tmp_path) == 0.0
