"""lit_sparse.load_run (lit_sparse/runs/analysis.py): a run directory, an experiment folder or
a checkpoint gives the config, the model, the alpha trajectory, the position loss and the
extrapolation table."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import lit_sparse
from lit_sparse.errors import LitSparseError, RunNotFoundError
from lit_sparse.runs.analysis import find_checkpoint, run_name


def test_run_directory(learned_run):
    run = lit_sparse.load_run(learned_run.log_dir)
    assert run.path == learned_run.log_dir and run.step == 6
    assert run.checkpoint == learned_run.log_dir / "checkpoints" / "last.ckpt"
    assert run.name == "learned/version_0"
    trained = learned_run.module.state_dict()
    loaded = run.module.state_dict()
    assert trained.keys() == loaded.keys()
    assert all(torch.equal(trained[k], loaded[k]) for k in trained)
    assert not run.module.training
    callback = learned_run.callbacks["AlphaTrajectory"]
    assert run.alpha_trajectory.steps.tolist() == callback.steps
    np.testing.assert_allclose(run.alpha_trajectory.alphas, callback.alphas)
    assert run.position_loss["sets"].keys() == set(learned_run.datamodule.val_set_names)
    assert run.extrapolation == learned_run.callbacks["LengthExtrapolation"].result
    # a Trainer run has no CLI config.yaml: the checkpoint's hyperparameters stand in
    assert run.config["model"]["arch"]["n_layers"] == 2
    assert run.distances() == learned_run.module.model.distances()


def test_checkpoint_file_and_experiment_folder(staggered_run):
    checkpoint = staggered_run.log_dir / "checkpoints" / "last.ckpt"
    by_file = lit_sparse.load_run(checkpoint)
    by_folder = lit_sparse.load_run(staggered_run.log_dir.parent)  # newest version
    for run in (by_file, by_folder):
        assert run.path == staggered_run.log_dir and run.checkpoint == checkpoint
        np.testing.assert_allclose(run.alpha_trajectory.alphas[-1], [0.5, 1.5])
    assert find_checkpoint(staggered_run.log_dir) == checkpoint
    assert lit_sparse.load_run(checkpoint, load_model=False).module is None


def test_an_experiment_folder_says_which_version_it_loaded_and_takes_one(
    staggered_run, tmp_path, caplog
):
    """Issue 57: the notebook silently loaded the newest version, so one short test run hid
    the quickstart; the choice is one warning line, and ``version=`` picks another."""
    experiment = tmp_path / "staggered"
    shutil.copytree(staggered_run.log_dir, experiment / "version_0")
    shutil.copytree(staggered_run.log_dir, experiment / "version_1")
    (experiment / "version_2").mkdir()  # a run that left no checkpoint
    with caplog.at_level(logging.WARNING):
        newest = lit_sparse.load_run(experiment, load_model=False)
    assert newest.path == experiment / "version_1"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "lit_sparse.runs.analysis"]
    assert line == (
        f"load_run: {experiment} has 3 versions (version_0, version_1, version_2); loaded "
        "version_1, the newest with a checkpoint (load_run(path, version=N) or the version's "
        "folder loads another)"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        for version in (0, "version_0"):
            chosen = lit_sparse.load_run(experiment, load_model=False, version=version)
            assert chosen.path == experiment / "version_0" and chosen.checkpoint is not None
        alone = lit_sparse.load_run(experiment / "version_1", load_model=False)
    assert alone.path == experiment / "version_1" and not caplog.records  # no choice made
    with pytest.raises(RunNotFoundError, match="has no version_7 .*versions: version_0, "):
        lit_sparse.load_run(experiment, version=7)


def test_a_run_is_named_by_its_path_under_the_folder_of_runs(tmp_path, monkeypatch):
    """As TensorBoard names it (the notebook's titles, the model card): the experiment's
    prefix is kept."""
    monkeypatch.delenv("LIT_SPARSE_RUNS", raising=False)
    run = tmp_path / "runs" / "quickstart" / "coprime" / "version_0"
    assert run_name(run) == "quickstart/coprime/version_0"
    assert run_name(tmp_path / "elsewhere" / "coprime" / "version_2") == "coprime/version_2"
    monkeypatch.setenv("LIT_SPARSE_RUNS", str(tmp_path / "runs" / "quickstart"))
    assert run_name(run) == "coprime/version_0"


def test_a_missing_path_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither"):
        lit_sparse.load_run(tmp_path / "nowhere")


def test_a_missing_run_is_one_error_naming_the_runs_there(tmp_path):
    """The README's paper-scale path after the quickstart: one LitSparseError (the CLI and a
    notebook show its one line) naming the run the reader has."""
    have = tmp_path / "runs" / "quickstart" / "coprime" / "version_0"
    (have / "checkpoints").mkdir(parents=True)
    with pytest.raises(RunNotFoundError) as info:
        lit_sparse.load_run(tmp_path / "runs" / "coprime" / "version_0")
    assert isinstance(info.value, LitSparseError) and info.value.__cause__ is None
    message = str(info.value)
    assert "\n" not in message and message.endswith(f"runs there: {have}")


def test_loading_needs_no_cli_and_the_network_alone_no_lightning(learned_run):
    """``load_run``: no CLI, jsonargparse or TensorBoard; with ``load_model="network"`` (as
    generate and export load a run) not even Lightning or torchmetrics, and the same network,
    weights and outputs as the LightningModule's."""
    code = (
        "import sys, torch, lit_sparse\n"
        f"alone = lit_sparse.load_run({str(learned_run.log_dir)!r}, load_model='network')\n"
        "assert alone.module is None and not alone.model.training\n"
        "loaded = [m for m in ('lightning', 'torchmetrics') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        f"run = lit_sparse.load_run({str(learned_run.log_dir)!r})\n"
        "assert run.model is not None and run.alpha_trajectory is not None\n"
        "loaded = [m for m in ('lit_sparse.cli', 'jsonargparse', 'lightning.pytorch.cli',"
        " 'tensorboard') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "x = torch.arange(12).reshape(1, 12) % 50\n"
        "with torch.no_grad():\n"
        "    assert torch.equal(alone.model(x), run.model(x))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
