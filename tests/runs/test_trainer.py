"""The Trainer (lit_sparse.runs.trainer): a fit that ends before its first validation says so
as it starts (issue 57: ``--trainer.max_steps 20`` on the quickstart, validating every 100,
gave no val/ metric and no held-out table without a word); its TensorBoard run has no
Lightning ``epoch`` chart (issue 57: a flat line on a stream of one epoch)."""

from __future__ import annotations

import pytest

from lit_sparse.runs.trainer import LitSparseTrainer, unvalidated_note


def test_the_note_names_the_steps_the_interval_and_the_fix():
    note = unvalidated_note(20, 1, 100, validates=True)
    assert note.startswith("note: this fit is never validated: it ends at max_steps 20")
    assert "first validation at batch 100" in note
    assert "--trainer.val_check_interval 20 validates" in note
    accumulated = unvalidated_note(20, 4, 2000, validates=True)
    assert "(80 batches (4 per optimizer step))" in accumulated
    assert "--trainer.val_check_interval 80" in accumulated


@pytest.mark.parametrize(
    "max_steps, accumulate, val_check_batch, validates",
    [
        (100, 1, 100, True),  # validates at its last step
        (30, 4, 100, True),  # 120 batches: at batch 100
        (20, 1, 100, False),  # no held-out set
        (-1, 1, 100, True),  # no step limit
        (20, 1, None, True),  # a time-based interval
        (20, 1, float("inf"), True),  # at each epoch's end
    ],
)
def test_no_note_for_a_fit_that_validates_or_has_nothing_to(
    max_steps, accumulate, val_check_batch, validates
):
    assert unvalidated_note(max_steps, accumulate, val_check_batch, validates) is None


@pytest.mark.slow
@pytest.mark.parametrize("interval, noted", [(5, True), (2, False)])
def test_a_fit_says_it_is_never_validated_as_it_starts(capsys, interval, noted):
    from tests.tiny_runs import STAGGERED, tiny_datamodule, tiny_module

    dm = tiny_datamodule()
    trainer = LitSparseTrainer(
        accelerator="cpu",
        devices=1,
        max_steps=2,
        val_check_interval=interval,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        limit_val_batches=1,
        enable_model_summary=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        logger=False,
    )
    trainer.fit(tiny_module(dm.vocab_size, STAGGERED, max_steps=2), datamodule=dm)
    lines = capsys.readouterr().out.splitlines()
    notes = [line for line in lines if line.startswith("note: this fit is never validated")]
    assert len(notes) == noted, lines
    if noted:
        assert "max_steps 2 (2 batches), before the first validation at batch 5" in notes[0]


@pytest.mark.slow
def test_a_fit_logs_no_epoch_chart(tmp_path):
    from lightning.pytorch.loggers import TensorBoardLogger

    from tests.tiny_runs import STAGGERED, scalars, tiny_datamodule, tiny_module

    dm = tiny_datamodule()
    logger = TensorBoardLogger(str(tmp_path), name="run", default_hp_metric=False)
    trainer = LitSparseTrainer(
        accelerator="cpu",
        devices=1,
        max_steps=2,
        val_check_interval=2,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        limit_val_batches=1,
        log_every_n_steps=1,
        enable_model_summary=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        logger=logger,
    )
    trainer.fit(tiny_module(dm.vocab_size, STAGGERED, max_steps=2), datamodule=dm)
    logged = scalars(logger.log_dir)
    assert sorted(logged["train/loss"]) == [0, 1] and "val/loss" in logged
    assert "epoch" not in logged, sorted(logged)
