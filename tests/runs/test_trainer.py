"""The Trainer (lit_sparse.runs.trainer): a fit that ends before its first validation says so
as it starts (issue 57: ``--trainer.max_steps 20`` on the quickstart, validating every 100,
gave no val/ metric and no held-out table without a word); its TensorBoard run has no
Lightning ``epoch`` chart (issue 57: a flat line on a stream of one epoch); ``python -m
lit_sparse extrapolate --config <run config> --ckpt_path <ckpt>`` (``extrapolate``) gives the
end-of-fit callback's evaluation on any checkpoint, with lengths and new_offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lit_sparse
from lit_sparse.__main__ import main as lit_main
from lit_sparse.evaluation import evaluate_lengths
from lit_sparse.runs.trainer import LitSparseTrainer, unvalidated_note

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"


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


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> Path:
    """A staggered run through the CLI (training length 48, 4 steps)."""
    folder = tmp_path_factory.mktemp("cli")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert (
            lit_main(
                ["fit", "--config", str(ROOT / "configs" / "staggered.yaml"), "--config", str(TINY)]
            )
            == 0
        )
    return folder / "runs" / "staggered" / "version_0"


def extrapolate(run: Path, *args: str) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(run.parent.parent.parent)
        assert (
            lit_main(
                [
                    "extrapolate",
                    "--config",
                    str(run / "config.yaml"),
                    "--ckpt_path",
                    str(run / "checkpoints" / "last.ckpt"),
                    *args,
                ]
            )
            == 0
        )
    # the evaluation writes under the run (evals/), never a version_N of its own
    assert [p.name for p in run.parent.glob("version_*")] == [run.name]
    newest = max((run / "evals").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    assert newest.name.startswith("extrapolate-step4")
    return json.loads((newest / "extrapolation.json").read_text())


@pytest.mark.slow
def test_a_checkpoint_gives_the_end_of_fit_table(cli_run, capsys):
    table = extrapolate(cli_run)
    printed = capsys.readouterr().out
    at_fit = json.loads((cli_run / "extrapolation.json").read_text())
    assert table["lengths"] == at_fit["lengths"] == [48, 96, 192]
    assert table["step"] == at_fit["step"] == 4
    assert table["checkpoint"].endswith("last.ckpt")
    for name, per_length in at_fit["sets"].items():
        for length, values in per_length.items():
            assert table["sets"][name][length]["ppl"] == pytest.approx(values["ppl"], rel=1e-6)
            assert table["sets"][name][length]["windows"] == values["windows"]
    assert table["unseen_distances"] == at_fit["unseen_distances"]
    assert "| set | 48 (1x) | 96 (2x) | 192 (4x) | 96 vs 48 | 192 vs 48 |" in printed


@pytest.mark.slow
def test_lengths_and_new_offsets_options(cli_run, capsys):
    table = extrapolate(cli_run, "--lengths", "[48, 96]", "--new_offsets", "drop")
    assert table["lengths"] == [48, 96] and table["new_offsets"] == "drop"
    assert table["unseen_distances"] == {"96": {"0": [], "1": []}}
    run = lit_sparse.load_run(cli_run / "checkpoints" / "last.ckpt")
    from lit_sparse.data import TextDataModule

    data = run.config["data"]["init_args"]
    dm = TextDataModule(**{k: v for k, v in data.items() if k != "sources"})
    dm.setup("validate")
    expected = evaluate_lengths(run.module, dm, [48, 96], new_offsets="drop")
    for name in dm.val_set_names:
        for length in (48, 96):
            assert table["sets"][name][str(length)]["ppl"] == pytest.approx(
                expected.ppl(name, length), rel=1e-6
            )
    printed = capsys.readouterr().out
    assert "new_offsets: drop" in printed  # the option's own value, as it is given


@pytest.mark.slow
def test_the_training_length_is_always_the_baseline(cli_run, capsys):
    """--lengths without the training length: it is evaluated too, so every change is
    against it, as the table says; the output names the files it wrote."""
    table = extrapolate(cli_run, "--lengths", "96", "192")
    assert table["lengths"] == [48, 96, 192] and table["reference_length"] == 48
    assert table["new_offsets"] == "use"  # the model's own value, named
    printed = capsys.readouterr().out
    assert "changes against the training length 48" in printed
    assert "| set | 48 (1x) | 96 (2x) | 192 (4x) | 96 vs 48 | 192 vs 48 |" in printed
    newest = max((cli_run / "evals").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    stem = newest / "extrapolation"
    assert f"written to {stem}.json and {stem}.md" in printed
