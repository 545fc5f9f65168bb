"""Two CPU processes (plain DDP, gloo): the processes the first one launches run the command
again, and must take its run folder, checkpoint and config name instead of choosing their
own; the final step is saved and a finished run's missing evaluation is completed. Each
fit is a fork of one process that imported torch and Lightning, its second rank too
(``ForkServer``)."""

from __future__ import annotations

import json

import pytest
import torch

from .cli_runs import checkpoint_every, config_args, write_callbacks

pytestmark = pytest.mark.slow


def test_a_ddp_run_and_its_resume_use_one_run_folder(tmp_path, fork_server):
    extrapolation = {"class_path": "lit_sparse.callbacks.LengthExtrapolation"}
    callbacks = write_callbacks(
        tmp_path / "cb.yaml", checkpoint_every(2), extrapolation, max_steps=3
    )
    ddp = ["--trainer.devices", "2", "--trainer.strategy", "ddp"]
    first = fork_server.run(tmp_path, "fit", *config_args("fixed.yaml", callbacks), *ddp)
    assert first.returncode == 0, first.stderr[-3000:]
    run = tmp_path / "runs/fixed/version_0"
    assert [p.name for p in run.parent.iterdir()] == ["version_0"]
    assert torch.load(run / "checkpoints/last.ckpt", weights_only=True)["global_step"] == 3

    (run / "extrapolation.json").unlink()  # as if a kill had stopped the evaluation
    again = fork_server.run(
        tmp_path, "fit", *config_args("fixed.yaml", callbacks), *ddp, "--ckpt_path", "last"
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert [p.name for p in run.parent.iterdir()] == ["version_0"]
    assert sorted(p.name for p in run.glob("config*.yaml")) == [
        "config.resume-3.yaml",
        "config.yaml",
    ]
    assert json.loads((run / "extrapolation.json").read_text())["step"] == 3
