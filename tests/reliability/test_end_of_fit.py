"""Kills at the resume's own start-up and inside the end-of-fit evaluation, with a stale
temporary checkpoint between them: every crash stays resumable, the final step is saved
although max_steps is not a multiple of the checkpoint interval, the evaluation a kill
interrupted is completed, and no TensorBoard event of the final step is purged. (The killed
fits are forks of one process that imported torch and Lightning:
:class:`~tests.reliability.cli_runs.ForkServer`.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

from .cli_runs import (
    OBSERVERS,
    checkpoint_every,
    config_args,
    fault,
    run_cli,
    write_callbacks,
)

pytestmark = pytest.mark.slow
STEPS = 5  # checkpoints every 2 steps: the final step is not a multiple


def scalar_steps(run) -> dict[str, list[int]]:
    events = EventAccumulator(str(run), size_guidance={SCALARS: 0})
    events.Reload()
    return {tag: [e.step for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_every_crash_stays_resumable_and_end_of_fit_work_is_completed(
    in_workdir, capsys, fork_server
):
    def config(name: str, *faults: dict):
        path = write_callbacks(
            in_workdir / f"{name}.yaml", checkpoint_every(2), *OBSERVERS, *faults, max_steps=STEPS
        )
        return ["fit", *config_args("fixed.yaml", path)]

    run = in_workdir / "runs/fixed/version_0"
    last = run / "checkpoints/last.ckpt"

    first = fork_server.run(in_workdir, *config("first", fault("KillBeforeBatch", batch=6)))
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    assert torch.load(last, weights_only=True)["global_step"] == 2

    # the resume dies in its own start-up (config saved, purge marker written)
    again = fork_server.run(
        in_workdir, *config("start", fault("KillAtTrainStart")), "--ckpt_path", "last"
    )
    assert again.returncode == -signal.SIGKILL, again.stderr[-2000:]
    assert (run / "config.resume-2.yaml").is_file()

    # a killed save's temporary file (the paper's is ~730 MB) from a process that is gone
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = run / "checkpoints" / f".last.ckpt.tmp-{dead.stdout.strip()}-0123abcd"
    stale.write_bytes(b"partial")

    # a second crash before the next checkpoint: inside the end-of-fit extrapolation
    third = fork_server.run(
        in_workdir, *config("eval", fault("KillInExtrapolation")), "--ckpt_path", "last"
    )
    assert third.returncode == -signal.SIGKILL, third.stderr[-2000:]
    assert not stale.exists(), "stale temporaries are removed when a fit starts"
    assert (run / "config.resume-2-2.yaml").is_file(), "a second resume from step 2 is kept"
    assert torch.load(last, weights_only=True)["global_step"] == STEPS, "the final step is saved"
    assert not (run / "extrapolation.json").exists()

    # resuming the finished run completes the evaluation, without training (and with the
    # progress bar users have on, which never started a training bar to close)
    code, err = run_cli(
        [*config("done"), "--ckpt_path", "last", "--trainer.enable_progress_bar", "true"], capsys
    )
    assert code == 0, err
    table = json.loads((run / "extrapolation.json").read_text())
    assert table["step"] == STEPS and (run / "extrapolation.md").is_file()
    assert torch.load(last, weights_only=True)["global_step"] == STEPS
    written = (run / "extrapolation.json").stat().st_mtime_ns

    # once more: nothing is missing, so nothing is redone, and nothing is purged
    code, err = run_cli([*config("done"), "--ckpt_path", "last"], capsys)
    assert code == 0, err
    assert (run / "extrapolation.json").stat().st_mtime_ns == written

    steps = scalar_steps(run)
    assert steps["train/loss"] == list(range(STEPS))
    assert steps["alpha/layer_00"] == list(range(STEPS + 1)), "the final step's alpha is kept"
    assert not [tag for tag in steps if tag.startswith("extrap/")], "evaluations apart"
    evaluated = scalar_steps(run / "evals" / f"fit-step{STEPS}")
    extrap = [tag for tag in evaluated if tag.startswith("extrap/ppl/")]
    assert extrap and all(evaluated[tag] == [STEPS] for tag in extrap)
    # the validation after the step-2 checkpoint is not run again, but none of it is lost
    validations = {tag: s for tag, s in steps.items() if tag.startswith("val/")}
    # every tag of a validation on the step of the weights it scores (Lightning's val/* too)
    odd = {tag: s for tag, s in validations.items() if s != [2, 4]}
    assert not odd, odd
    assert "val/pos_nll/math/b0" in validations and "val/ppl" in validations
    history = json.loads((run / "position_loss.json").read_text())["history"]
    assert [entry["step"] for entry in history] == [2, 4]
    assert sorted(p.name for p in run.glob("config*.yaml")) == [
        "config.resume-2-2.yaml",
        "config.resume-2.yaml",
        "config.resume-5-2.yaml",
        "config.resume-5.yaml",
        "config.yaml",
    ]
