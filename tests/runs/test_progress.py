"""The progress bar (issue 47): Lightning's read "Epoch 0/-2" and "v_num: 0.000" on a
stream with one epoch, and drew a sanity-check bar per held-out set; the Trainer's default
bar is told in optimizer steps, without v_num, one bar over every set. Where the output is
no terminal, progress comes as whole lines (issue 57: a quickstart under ``make``, its output
captured, showed nothing for 15 minutes)."""

from __future__ import annotations

import io
import re

import pytest
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from lightning.pytorch.trainer.connectors import callback_connector

from lit_sparse.runs import progress
from lit_sparse.runs.progress import StepLinesProgressBar, StepRichProgressBar, StepTQDMProgressBar
from lit_sparse.runs.trainer import LitSparseTrainer


@pytest.mark.parametrize("rich", [True, False])
def test_the_default_bar_counts_steps_and_a_given_bar_is_kept(monkeypatch, rich):
    monkeypatch.setattr(callback_connector, "_RICH_AVAILABLE", rich)
    monkeypatch.setattr(progress, "output_is_live", lambda: True)  # a terminal
    trainer = LitSparseTrainer(logger=False, enable_checkpointing=False, max_steps=7)
    bar = trainer.progress_bar_callback
    assert type(bar) is (StepRichProgressBar if rich else StepTQDMProgressBar)
    assert sum(cb is bar for cb in trainer.callbacks) == 1
    given = RichProgressBar() if rich else TQDMProgressBar()
    kept = LitSparseTrainer(logger=False, enable_checkpointing=False, callbacks=[given])
    assert kept.progress_bar_callback is given


@pytest.mark.slow
def test_a_fit_shows_steps_one_sanity_bar_and_no_version(tmp_path, monkeypatch, capsys):
    """tqdm's bar (the one a lean install without rich gets), on a fit of two held-out sets."""
    from lightning.pytorch.loggers import TensorBoardLogger

    from tests.tiny_runs import STAGGERED, tiny_datamodule, tiny_module

    monkeypatch.setattr(callback_connector, "_RICH_AVAILABLE", False)
    monkeypatch.setattr(progress, "output_is_live", lambda: True)  # a terminal
    dm = tiny_datamodule()
    trainer = LitSparseTrainer(
        accelerator="cpu",
        devices=1,
        max_steps=2,
        val_check_interval=2,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=1,
        limit_val_batches=1,
        enable_model_summary=False,
        enable_checkpointing=False,
        logger=TensorBoardLogger(str(tmp_path), name="bar"),
    )
    trainer.fit(tiny_module(dm.vocab_size, STAGGERED, max_steps=2), datamodule=dm)
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert "Step 2/2" in printed and "Epoch" not in printed
    assert "v_num" not in printed
    assert "DataLoader" not in printed
    # one sanity bar over both sets' batches (1 each): "1/2" then "2/2", not two of "1/1"
    sanity = re.findall(r"Sanity Checking[^\r\n]*?(\d+)/(\d+)", printed)
    assert sanity and {total for _, total in sanity} == {"2"}, sanity


@pytest.mark.parametrize("rich", [True, False])
def test_output_that_is_no_terminal_gets_lines(monkeypatch, rich):
    """A pipe or a file (as under ``make``, or captured), whether or not rich is installed."""
    monkeypatch.setattr(callback_connector, "_RICH_AVAILABLE", rich)
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert not progress.output_is_live()
    trainer = LitSparseTrainer(logger=False, enable_checkpointing=False, max_steps=7)
    assert type(trainer.progress_bar_callback) is StepLinesProgressBar


@pytest.mark.slow
def test_a_fit_into_a_pipe_prints_whole_lines_of_steps(tmp_path, monkeypatch, capsys):
    from tests.tiny_runs import STAGGERED, tiny_datamodule, tiny_module

    monkeypatch.setattr(progress, "output_is_live", lambda: False)
    dm = tiny_datamodule()
    trainer = LitSparseTrainer(
        accelerator="cpu",
        devices=1,
        max_steps=3,
        val_check_interval=3,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=1,
        limit_val_batches=1,
        enable_model_summary=False,
        enable_checkpointing=False,
        logger=False,
    )
    bar = trainer.progress_bar_callback
    assert type(bar) is StepLinesProgressBar
    bar.every = 0  # a line at every step (10 s apart in use)
    trainer.fit(tiny_module(dm.vocab_size, STAGGERED, max_steps=3), datamodule=dm)
    out = capsys.readouterr().out
    assert "\r" not in out
    lines = out.splitlines()
    for step in (1, 2, 3):
        assert any(re.match(rf"Step {step}/3 \(\d+%\): [\d.e-]+ s/step", ln) for ln in lines), out
    assert any(re.match(r"Step 2/3 .*about \S+ s left; train/loss \d", ln) for ln in lines), out
    assert "Sanity Checking: 1/2 batches" in lines, out
    assert "Validation: 2/2 batches" in lines, out
    assert "v_num" not in out and "Epoch" not in out
