"""Kill a run with SIGKILL inside a gradient accumulation or a checkpoint save, resume it, get
the same weights."""

import contextlib
import io
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from lit_sparse.cli import main

from .cli_runs import _HANDOFF, ForkServer

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"
STEPS, ACCUMULATE = 6, 2

pytestmark = pytest.mark.slow


def run_config(tmp_path: Path, kill_at: int | None, fault: dict | None = None) -> Path:
    callbacks = [
        {
            "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
            "init_args": {"every_n_train_steps": 2, "save_last": True, "save_top_k": 1},
        },
        {
            "class_path": "lit_sparse.callbacks.AlphaTrajectory",
            "init_args": {"every_n_steps": 1, "layer_runs": True},
        },
        {"class_path": "lit_sparse.callbacks.PositionLoss"},
    ]
    if kill_at is not None:
        callbacks.append(
            {
                "class_path": "tests.reliability.faults.KillBeforeBatch",
                "init_args": {"batch": kill_at},
            }
        )
    if fault is not None:
        callbacks.append(fault)
    values = {
        "trainer": {
            "max_steps": STEPS,
            "accumulate_grad_batches": ACCUMULATE,
            "val_check_interval": 4,
            "callbacks": callbacks,
        },
    }
    path = tmp_path / f"run-{kill_at}{'-fault' if fault else ''}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def fit(
    workdir: Path, *extra: str, server: ForkServer | None = None
) -> subprocess.CompletedProcess:
    """learned.yaml + tiny.yaml + ``extra`` in ``workdir``: in this process, or as a process
    of its own (forked by ``server``) when it is to be killed."""
    args = ["fit", "--config", str(ROOT / "configs" / "learned.yaml"), "--config", str(TINY)]
    if server is not None:
        return server.run(workdir, *args, *extra)
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(err):
        patch.chdir(workdir)
        patch.setattr(sys, "argv", ["lit_sparse"])
        patch.syspath_prepend(str(ROOT))
        patch.delenv(_HANDOFF, raising=False)
        code = main([*args, *extra])
    return subprocess.CompletedProcess(args, code, "", err.getvalue())


def last_checkpoint(workdir: Path) -> dict:
    (path,) = workdir.glob("runs/learned/version_*/checkpoints/last.ckpt")
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_tensors(a, b, where=""):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_tensors(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_tensors(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """The uninterrupted run (a real process): the weights every resumed run must end with."""
    workdir = tmp_path_factory.mktemp("straight")
    done = fit(workdir, "--config", str(run_config(workdir, None)))
    assert done.returncode == 0, done.stderr[-3000:]
    return workdir


def test_killed_run_resumes_to_bit_identical_weights(tmp_path, straight, fork_server):
    """Killed in the middle of a gradient accumulation, then killed again at the same
    micro-batch of its resume (the first resumed micro-batch is at a step the checkpoint
    interval divides: a resume that saved there lost its gradient), then resumed."""
    seed = int.from_bytes(os.urandom(2), "little")
    # the second micro-batch of the step after a checkpoint (step 2 or 4)
    kill_at = random.Random(seed).choice([2 * ACCUMULATE + 1, 4 * ACCUMULATE + 1])
    note = f"(kill before micro-batch {kill_at} twice, seed {seed})"

    broken = tmp_path / "broken"
    broken.mkdir()
    killed = fit(broken, "--config", str(run_config(tmp_path, kill_at)), server=fork_server)
    assert killed.returncode == -9, f"{note} {killed.stderr[-3000:]}"
    again = fit(broken, "--config", str(run_config(tmp_path, kill_at)), "--ckpt_path", "last",
                server=fork_server)  # fmt: skip
    assert again.returncode == -9, f"{note} {again.stderr[-3000:]}"
    resumed = fit(broken, "--config", str(run_config(tmp_path, None)), "--ckpt_path", "last")
    assert resumed.returncode == 0, f"{note} {resumed.stderr[-3000:]}"

    expected, found = last_checkpoint(straight), last_checkpoint(broken)
    assert found["global_step"] == expected["global_step"] == STEPS
    assert_same_tensors(expected["state_dict"], found["state_dict"], f"weights {note}")
    assert_same_tensors(expected["optimizer_states"], found["optimizer_states"], "optimizer")
    assert_same_tensors(expected["lr_schedulers"], found["lr_schedulers"], "schedule")

    # logging continued in the same TensorBoard run, without a gap or a duplicate
    runs = sorted((broken / "runs" / "learned").iterdir())
    assert [r.name for r in runs] == ["version_0"], note
    assert (runs[0] / "config.yaml").is_file()
    assert list(runs[0].glob("config.resume-*.yaml"))
    events = EventAccumulator(str(runs[0]), size_guidance={"scalars": 0})
    events.Reload()
    for tag in ("train/loss", "alpha/layer_00"):
        steps = [event.step for event in events.Scalars(tag)]
        assert steps == sorted(set(steps)), f"{tag}: {steps} {note}"
    assert [e.step for e in events.Scalars("alpha/layer_00")] == list(range(STEPS + 1))
    assert [e.step for e in events.Scalars("train/loss")] == list(range(STEPS))
    # and so does the layer's own run (layer_runs: the line of the Custom Scalars chart)
    layer = EventAccumulator(str(runs[0] / "alpha" / "layer_00"), size_guidance={"scalars": 0})
    layer.Reload()
    assert [e.step for e in layer.Scalars("alpha")] == list(range(STEPS + 1)), note


@pytest.mark.parametrize("name", ["last.ckpt", None], ids=["in-last", "in-top-k"])
def test_a_kill_in_a_checkpoint_save_leaves_the_previous_one_and_last_resumes_from_it(
    tmp_path, straight, fork_server, name
):
    """SIGKILL half way through writing a checkpoint of step 4 (last.ckpt, or the top-k
    file written before it): last.ckpt is still step 2's, whole; `fit --ckpt_path last`
    resumes from it (its config named after step 2) and ends with the uninterrupted weights."""
    from lit_sparse.runs.checkpoint_files import read_checkpoint

    fault = {
        "class_path": "tests.reliability.faults.KillInCheckpointSaveAtStep",
        "init_args": {"step": 4, "name": name},
    }
    killed = fit(tmp_path, "--config", str(run_config(tmp_path, None, fault)), server=fork_server)
    assert killed.returncode == -9, killed.stderr[-3000:]
    (folder,) = tmp_path.glob("runs/learned/version_*/checkpoints")
    assert read_checkpoint(folder / "last.ckpt", weights=False)["global_step"] == 2
    (left,) = folder.glob(".*.tmp-*")  # the cut write, never renamed over a checkpoint
    assert left.name.startswith(f".{name or 'epoch='}")
    resumed = fit(tmp_path, "--config", str(run_config(tmp_path, None)), "--ckpt_path", "last")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [p.name for p in folder.parent.glob("config.resume-*.yaml")] == ["config.resume-2.yaml"]
    assert not list(folder.glob(".*.tmp-*"))  # the resume removed the cut write
    expected, found = last_checkpoint(straight), last_checkpoint(tmp_path)
    assert found["global_step"] == expected["global_step"] == STEPS
    assert_same_tensors(expected["state_dict"], found["state_dict"], "weights")
    assert_same_tensors(expected["optimizer_states"], found["optimizer_states"], "optimizer")


def test_resume_without_a_checkpoint_starts_fresh(tmp_path):
    done = fit(tmp_path, "--ckpt_path", "last", "--trainer.max_steps", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no last.ckpt under runs/learned: starting a new run" in done.stderr


def _started(experiment: Path) -> int:
    """How many times a fit of the experiment got as far as saving its config (a new run's
    config.yaml, a resume's config.resume-<step>.yaml): just before it trains."""
    return len(list(experiment.glob("version_*/config*.yaml")))


def test_five_kills_at_random_moments_then_last_gives_the_uninterrupted_weights(
    tmp_path, straight, fork_server
):
    """Item 13 of issue 24: SIGKILL the same ``fit --ckpt_path last`` five times at random
    moments once it is about to train (during its steps, a checkpoint save, the validation
    or its end-of-fit work), then let it finish: the weights, optimizer and schedule equal
    the uninterrupted run's, bit for bit. (Each fit is a fork of one process that imported
    torch and Lightning: :class:`~tests.reliability.cli_runs.ForkServer`.)"""
    seed = int.from_bytes(os.urandom(2), "little")
    rng = random.Random(seed)
    config = run_config(tmp_path, None)
    args = ["fit", "--config", str(ROOT / "configs" / "learned.yaml"), "--config", str(TINY),
            "--config", str(config), "--ckpt_path", "last"]  # fmt: skip
    experiment = tmp_path / "runs" / "learned"
    kills, moments = 0, []
    for _attempt in range(15):
        if kills == 5:
            break
        before = _started(experiment)
        _, stderr = fork_server.start(tmp_path, *args)
        deadline = time.monotonic() + 600
        while _started(experiment) == before and fork_server.poll() is None:
            assert time.monotonic() < deadline, "the fit never got to training"
            time.sleep(0.02)
        delay = rng.uniform(0.0, 2.0)
        code = fork_server.kill_after(delay)
        if code == -9:
            kills += 1
            moments.append(round(delay, 2))
        else:
            assert code == 0, f"seed {seed}: {stderr.read_text()[-3000:]}"
    note = f"(seed {seed}, killed {moments} s after the fit was about to train)"
    assert kills == 5, note
    final = fit(tmp_path, "--config", str(config), "--ckpt_path", "last")
    assert final.returncode == 0, f"{note} {final.stderr[-3000:]}"

    expected = last_checkpoint(straight)
    (path,) = [p for p in experiment.glob("version_*/checkpoints/last.ckpt")]
    found = torch.load(path, map_location="cpu", weights_only=True)
    assert found["global_step"] == expected["global_step"] == STEPS, note
    assert_same_tensors(expected["state_dict"], found["state_dict"], f"weights {note}")
    assert_same_tensors(expected["optimizer_states"], found["optimizer_states"], "optimizer")
    assert_same_tensors(expected["lr_schedulers"], found["lr_schedulers"], "schedule")
    assert not list(experiment.rglob("*.tmp-*")), "no temporary file outlived a resume"
