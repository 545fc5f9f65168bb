"""A hybrid (configs/hybrid.yaml on the tiny model, a NoPE dense layer every 2nd) trains on two
CPU processes under DDP and under FSDP2 to the same losses. Each fit is two processes forked
from one that imported torch and Lightning (``ForkServer``); about 40 worker-seconds, over
CONTRIBUTING.md's 30: what the test checks is what the two processes do together, for the one
plugin that holds others. (A hybrid's resume: tests/callbacks/test_alpha.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

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


def _fit(server, workdir: Path, strategy: str):
    workdir.mkdir(exist_ok=True)
    extra = write_callbacks(
        workdir / "callbacks.yaml", checkpoint_every(2), *OBSERVERS, max_steps=STEPS
    )
    args = ["fit", *config_args("hybrid.yaml", extra), *HYBRID, "--trainer.devices", "2"]
    return server.run(workdir, *args, *STRATEGIES[strategy], timeout=300)


def test_a_hybrid_trains_under_ddp_and_fsdp2_alike(tmp_path, fork_server):
    losses = {}
    for strategy in STRATEGIES:
        done = _fit(fork_server, tmp_path / strategy, strategy)
        assert done.returncode == 0, done.stderr[-3000:]
        run = tmp_path / strategy / "runs" / "hybrid" / "version_0"
        losses[strategy] = scalars(run)["train/loss"]
        # the local layer 0 has an alpha line, the dense layer 1 none
        assert "alpha/layer_00" in scalars(run) and "alpha/layer_01" not in scalars(run)
    assert sorted(losses["ddp"]) == list(range(STEPS))
    for step, loss in losses["ddp"].items():
        assert losses["fsdp2"][step] == pytest.approx(loss, rel=1e-4), step
