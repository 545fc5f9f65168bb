"""AlphaTrajectory: scalars per layer read back from the event files, one run per training
run with its Custom Scalars chart (a run per layer when asked), the heatmap, static
schedules, checkpoint state and resume."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger

from lit_sparse.callbacks import AlphaTrajectory
from lit_sparse.callbacks.alpha import alpha_tag, layer_run
from tests.tiny_runs import (
    DENSE,
    LEARNED,
    custom_scalar_charts,
    read_events,
    scalars,
    tiny_datamodule,
    tiny_module,
    tiny_trainer,
)


def test_every_layer_is_logged_at_step_zero_and_every_n_steps(learned_run):
    logged = scalars(learned_run.log_dir)
    final = learned_run.module.model.alphas()
    for layer in range(2):
        by_step = logged[f"alpha/layer_{layer:02d}"]
        assert sorted(by_step) == [0, 2, 4, 6]
        assert by_step[0] == pytest.approx(float(learned_run.initial_alphas[layer]), abs=1e-7)
        assert by_step[6] == pytest.approx(float(final[layer]), abs=1e-7)
    # a learned run moves (a little): the logged curve is the module's, not a constant
    assert logged["alpha/layer_00"][6] != logged["alpha/layer_00"][0]


def test_logged_alphas_equal_the_recorded_trajectory(learned_run):
    callback = learned_run.callbacks["AlphaTrajectory"]
    logged = scalars(learned_run.log_dir)
    assert callback.steps == [0, 2, 4, 6]
    for step, alphas in zip(callback.steps, callback.alphas, strict=True):
        for layer, value in enumerate(alphas):
            assert logged[alpha_tag(layer)][step] == pytest.approx(value, abs=1e-7)


def test_one_run_per_training_run_and_one_chart_of_every_layer(learned_run):
    """Issue 57: the training run is one TensorBoard run (no run per layer in the runs
    panel); its Custom Scalars chart matches each layer's tag alpha/layer_XX, not the
    heatmap."""
    [pattern] = custom_scalar_charts(learned_run.log_dir)["alpha per layer"]
    logged = scalars(learned_run.log_dir)
    assert [t for t in logged if re.match(pattern, t)] == [alpha_tag(0), alpha_tag(1)]
    assert not re.match(pattern, "alpha/heatmap")
    runs = {p.parent for p in learned_run.log_dir.rglob("*/events.out.tfevents.*")}
    assert runs == {learned_run.log_dir / "evals" / "fit-step6"}, "only the evaluations apart"


def test_heatmap_image_at_each_validation(learned_run):
    events = read_events(learned_run.log_dir)
    images = events.Images("alpha/heatmap")
    assert [image.step for image in images] == [3, 6]
    assert all(image.width > 0 and image.height > 0 for image in images)


def test_static_schedule_logs_its_ramp(staggered_run):
    logged = scalars(staggered_run.log_dir)
    assert set(logged["alpha/layer_00"].values()) == {0.5}
    assert set(logged["alpha/layer_01"].values()) == {1.5}
    assert sorted(logged["alpha/layer_01"]) == [0, 2, 4, 6]


def test_trajectory_is_in_the_checkpoint_and_the_json(learned_run):
    checkpoint = torch.load(learned_run.log_dir / "checkpoints" / "last.ckpt", weights_only=True)
    state = checkpoint["callbacks"]["AlphaTrajectory"]
    callback = learned_run.callbacks["AlphaTrajectory"]
    assert state["steps"] == callback.steps
    np.testing.assert_allclose(state["alphas"], callback.alphas)
    written = json.loads((learned_run.log_dir / "alpha_trajectory.json").read_text())
    assert written["steps"] == [0, 2, 4, 6] and len(written["alphas"][0]) == 2


@pytest.mark.parametrize("pin_version", [True, False], ids=["same-folder", "new-folder"])
def test_a_resumed_run_continues_the_same_curves(tmp_path, pin_version):
    dm = tiny_datamodule()
    module = tiny_module(dm.vocab_size, LEARNED, max_steps=6)
    checkpoint = ModelCheckpoint(every_n_train_steps=3, save_last=True)
    first = AlphaTrajectory(every_n_steps=2, layer_runs=True)
    trainer = tiny_trainer(
        tmp_path, "resume", [first, checkpoint], max_steps=3, limit_val_batches=0
    )
    trainer.fit(module, datamodule=dm)
    first_dir = trainer.log_dir
    assert first.steps == [0, 2, 3]

    resumed = AlphaTrajectory(every_n_steps=2, layer_runs=True)
    logger = TensorBoardLogger(str(tmp_path), name="resume", version=0 if pin_version else None)
    trainer = tiny_trainer(
        tmp_path,
        "resume",
        [resumed, ModelCheckpoint(save_last=True)],
        max_steps=6,
        limit_val_batches=0,
        logger=logger,
    )
    module = tiny_module(dm.vocab_size, LEARNED, max_steps=6)
    trainer.fit(module, datamodule=dm, ckpt_path=f"{first_dir}/checkpoints/last.ckpt")
    assert (trainer.log_dir == first_dir) == pin_version
    # the state continued: the first run's points, then the new ones
    assert resumed.steps == [0, 2, 3, 4, 6]
    assert resumed.alphas[:3] == first.alphas
    np.testing.assert_allclose(resumed.alphas[-1], module.model.alphas().numpy(), atol=1e-7)
    # the folder TensorBoard reads for this run shows the whole curve from step 0
    logged = scalars(trainer.log_dir)["alpha/layer_01"]
    assert sorted(logged) == [0, 2, 3, 4, 6]
    # and so does the layer's own run (layer_runs), the line of the chart of every layer
    layer = scalars(Path(trainer.log_dir) / layer_run(1))["alpha"]
    assert sorted(layer) == [0, 2, 3, 4, 6] and layer == logged
    [pattern] = resumed.custom_scalar_charts(trainer, module)["alpha per layer"][1]
    assert re.match(pattern, "alpha") and not re.match(pattern, alpha_tag(1))
    for step, alphas in zip(resumed.steps, resumed.alphas, strict=True):
        assert logged[step] == pytest.approx(alphas[1], abs=1e-7)


def test_a_model_without_alpha_logs_nothing(tmp_path):
    dm = tiny_datamodule()
    module = tiny_module(dm.vocab_size, DENSE, max_steps=2)
    callback = AlphaTrajectory(every_n_steps=1)
    trainer = tiny_trainer(
        tmp_path, "dense", [callback], max_steps=2, val_check_interval=2, limit_val_batches=1
    )
    trainer.fit(module, datamodule=dm)
    assert callback.steps == []
    assert not [t for t in read_events(trainer.log_dir).Tags()["scalars"] if t.startswith("alpha")]
    assert not (tmp_path / "dense" / "version_0" / "alpha_trajectory.json").exists()


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_every_n_steps_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="every_n_steps"):
        AlphaTrajectory(every_n_steps=bad)


def test_a_hybrid_logs_only_the_layers_with_an_alpha(hybrid_run):
    """Layer 0 (learned alpha) has its line and its heatmap row; the dense layer 1
    has none, in the events, the trajectory file and ``load_run``'s history."""
    from lit_sparse import load_run

    logged = scalars(hybrid_run.log_dir)
    assert sorted(logged[alpha_tag(0)]) == [0, 2, 4, 6]
    assert alpha_tag(1) not in logged
    saved = json.loads((hybrid_run.log_dir / "alpha_trajectory.json").read_text())
    assert saved["layers"] == [0] and all(len(row) == 1 for row in saved["alphas"])
    final = hybrid_run.module.model.layer_alphas()
    assert list(final) == [0] and saved["alphas"][-1][0] == pytest.approx(float(final[0]))
    history = load_run(hybrid_run.log_dir, load_model=False).alpha_trajectory
    assert history.layers == (0,) and history.alphas.shape == (4, 1)
    assert "alpha/heatmap" in read_events(hybrid_run.log_dir).Tags()["images"]


def test_a_hybrid_resumes_with_its_pattern_and_its_trajectory(hybrid_run, tmp_path):
    """Two more steps from the shared hybrid run's last checkpoint: the module is rebuilt as
    the hybrid (the NoPE dense layer included) and the alpha curve goes on in layer 0 only."""
    import shutil

    from lit_sparse.attention.dense import DensePattern

    run = Path(shutil.copytree(hybrid_run.log_dir, tmp_path / "run"))
    callback = AlphaTrajectory(every_n_steps=2)
    logger = TensorBoardLogger(str(tmp_path), name="resumed")
    trainer = tiny_trainer(
        tmp_path, "resumed", [callback], max_steps=8, limit_val_batches=0, logger=logger
    )
    module = tiny_module(hybrid_run.datamodule.vocab_size, hybrid_run.module.hparams.attention, 8)
    trainer.fit(module, datamodule=tiny_datamodule(), ckpt_path=run / "checkpoints" / "last.ckpt")
    patterns = module.model.patterns
    assert isinstance(patterns[1], DensePattern) and not patterns[1].rotary and patterns[0].rotary
    assert callback.steps == [0, 2, 4, 6, 8] and callback.layers == [0]
    before = hybrid_run.module.model.layer_alphas()[0]
    assert callback.alphas[3] == [pytest.approx(float(before), abs=1e-7)]
