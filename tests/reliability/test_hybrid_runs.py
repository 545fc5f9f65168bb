"""A hybrid (configs/hybrid.yaml on the tiny model, a NoPE dense layer every 2nd) trains on two
CPU processes under DDP and under FSDP2 to the same losses, and an FSDP2 run resumes from its
sharded checkpoint to the end. Each fit is two processes forked from one that imported torch
and Lightning (``ForkServer``); about 60 worker-seconds, over CONTRIBUTING.md's 30: what the
test checks is what the two processes do together, for the one plugin that holds others."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.tiny_runs import scalars

from .cli_runs import OBSERVERS, ROOT, checkpoint_every, config_args, write_callbacks

pytestmark = pytest.mark.slow

STEPS = 4
HYBRID = ["--model.attention.init_args.every", "2", "--model.attention.init_args.global_rope",
          "false"]  # fmt: skip
STRATEGIES = {
    "ddp": ["--trainer.strategy", "ddp"],
    "fsdp2": ["--trainer.strategy", str(ROOT / "configs" / "strategy" / "fsdp2.yaml")],
}


def _fit(server, workdir: Path, strategy: str, max_steps: int, resume: bool = False):
    workdir.mkdir(exist_ok=True)
    extra = write_callbacks(
        workdir / "callbacks.yaml", checkpoint_every(2), *OBSERVERS, max_steps=max_steps
    )
    args = ["fit", *config_args("hybrid.yaml", extra), *HYBRID, "--trainer.devices", "2"]
    # a longer max_steps than the run's: its folder, named (``last`` needs the same config)
    resuming = ["--ckpt_path", "runs/hybrid/version_0"] if resume else []
    return server.run(workdir, *args, *STRATEGIES[strategy], *resuming, timeout=300)


def test_a_hybrid_trains_under_ddp_and_fsdp2_alike_and_resumes(tmp_path, fork_server):
    losses = {}
    for strategy in STRATEGIES:
        done = _fit(fork_server, tmp_path / strategy, strategy, STEPS)
        assert done.returncode == 0, done.stderr[-3000:]
        run = tmp_path / strategy / "runs" / "hybrid" / "version_0"
        losses[strategy] = scalars(run)["train/loss"]
        # the local layer 0 has an alpha line, the dense layer 1 none
        assert "alpha/layer_00" in scalars(run) and "alpha/layer_01" not in scalars(run)
    assert sorted(losses["ddp"]) == list(range(STEPS))
    for step, loss in losses["ddp"].items():
        assert losses["fsdp2"][step] == pytest.approx(loss, rel=1e-4), step

    # FSDP2 from its sharded checkpoint at step 4 to step 6
    resumed = _fit(fork_server, tmp_path / "fsdp2", "fsdp2", STEPS + 2, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    run = tmp_path / "fsdp2" / "runs" / "hybrid" / "version_0"
    assert max(scalars(run)["train/loss"]) == STEPS + 1
    assert all(torch.isfinite(torch.tensor(list(scalars(run)["train/loss"].values()))))
