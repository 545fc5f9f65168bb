"""A resume in place logs the checkpoint step's ``val/*`` scalars again
(lit_sparse/runs/resumed_validation.py): TensorBoard hides a purged step's earlier values, so
the resumed file repeats them, except tags another callback rewrites at that step. The kill
and resume itself: tests/reliability/test_resume.py."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import TensorBoardLogger
from torch.utils.tensorboard import SummaryWriter

from lit_sparse.runs.events import read_scalars, writer_file
from lit_sparse.runs.resumed_validation import ResumedValidation, logged_scalars


def killed_run(folder) -> None:
    """The killed run's event file: val scalars at steps 0, 4 and 6, a train scalar at 4."""
    with SummaryWriter(str(folder)) as writer:
        writer.add_scalar("val/loss", 3.0, 0)
        writer.add_scalar("val/loss", 2.0, 4)
        writer.add_scalar("val/loss", 1.5, 4)  # the last value of a tag wins
        writer.add_scalar("val/pos_nll/b0", 2.5, 4)
        writer.add_scalar("train/loss", 2.25, 4)
        writer.add_scalar("val/acc", 0.25, 4, new_style=True)  # a tensor summary
        writer.add_scalar("val/loss", 1.0, 6)
    # TensorBoard reads a folder's files in name order: time, host, pid, then a counter of the
    # process's writers. A killed run's file is an earlier process's; written in this one, the
    # same second, its counter (9) could sort after the resumed writer's (10). Dated a minute back.
    for path in Path(folder).glob("events.out.tfevents.*"):
        stamp = path.name.split(".")[3]
        path.rename(path.with_name(path.name.replace(f".{stamp}.", f".{int(stamp) - 60:010d}.", 1)))


def test_the_scalars_of_one_step_last_value_winning(tmp_path):
    killed_run(tmp_path)
    files = sorted(tmp_path.glob("events.*"))
    assert logged_scalars(files, 4) == {
        "val/loss": 1.5,
        "val/pos_nll/b0": 2.5,
        "train/loss": 2.25,
        "val/acc": 0.25,
    }
    assert logged_scalars(files, 0) == {"val/loss": 3.0}
    assert logged_scalars(files, 9) == {}


class PositionBins(Callback):
    prefix = "val/pos_nll"  # rewrites its tags itself at the resumed step


def resumed_trainer(folder, purge_step: int | None) -> tuple[pl.Trainer, TensorBoardLogger]:
    killed_run(folder / "v")
    logger = TensorBoardLogger(str(folder), name="", version="v", purge_step=purge_step)
    trainer = pl.Trainer(
        logger=logger, callbacks=[PositionBins()], enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    return trainer, logger


def test_a_resume_at_the_purged_step_logs_its_val_scalars_again(tmp_path, monkeypatch):
    trainer, logger = resumed_trainer(tmp_path, purge_step=4)
    monkeypatch.setattr(type(trainer), "global_step", property(lambda self: 4))  # resumed at 4
    ResumedValidation().on_train_start(trainer, torch.nn.Linear(1, 1))
    logger.experiment.flush()
    ours = writer_file(logger)
    assert logged_scalars([ours], 4) == {"val/loss": 1.5, "val/acc": 0.25}
    logger.finalize("success")
    # the purge hides the killed run's steps from 4 on; step 4's values are back
    assert read_scalars(tmp_path / "v")["val/loss"] == {0: 3.0, 4: 1.5}


@pytest.mark.parametrize(
    ("purge_step", "step"), [(None, 4), (4, 6)], ids=["not resumed", "resumed at its end"]
)
def test_otherwise_nothing_is_logged_again(tmp_path, monkeypatch, purge_step, step):
    """A finished run resumed to finish its end-of-fit work trains no step: nothing is hidden."""
    trainer, logger = resumed_trainer(tmp_path, purge_step)
    monkeypatch.setattr(type(trainer), "global_step", property(lambda self: step))
    ResumedValidation().on_train_start(trainer, torch.nn.Linear(1, 1))
    logger.experiment.flush()
    assert logged_scalars([writer_file(logger)], step) == {}
    logger.finalize("success")
