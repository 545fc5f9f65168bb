"""Kill a run with SIGKILL inside a gradient accumulation, resume it, get the same weights."""

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"
STEPS, ACCUMULATE = 6, 2

pytestmark = pytest.mark.slow


def run_config(tmp_path: Path, kill_at: int | None) -> Path:
    callbacks = [
        {
            "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
            "init_args": {"every_n_train_steps": 2, "save_last": True, "save_top_k": 1},
        },
        {"class_path": "lit_sparse.callbacks.AlphaTrajectory", "init_args": {"every_n_steps": 1}},
        {"class_path": "lit_sparse.callbacks.PositionLoss"},
    ]
    if kill_at is not None:
        callbacks.append(
            {
                "class_path": "tests.reliability.faults.KillBeforeBatch",
                "init_args": {"batch": kill_at},
            }
        )
    values = {
        "trainer": {
            "max_steps": STEPS,
            "accumulate_grad_batches": ACCUMULATE,
            "val_check_interval": 4,
            "callbacks": callbacks,
        },
    }
    path = tmp_path / f"run-{kill_at}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def fit(workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "lit_sparse",
        "fit",
        "--config",
        str(ROOT / "configs" / "learned.yaml"),
        "--config",
        str(TINY),
        *extra,
    ]
    return subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600
    )


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


def test_killed_run_resumes_to_bit_identical_weights(tmp_path):
    seed = int.from_bytes(os.urandom(2), "little")
    # a micro-batch in the second half of an accumulation, after the first checkpoint
    kill_at = random.Random(seed).choice(range(2 * ACCUMULATE + 1, STEPS * ACCUMULATE, 2))
    note = f"(kill before micro-batch {kill_at}, seed {seed})"

    straight = tmp_path / "straight"
    straight.mkdir()
    done = fit(straight, "--config", str(run_config(tmp_path, None)))
    assert done.returncode == 0, done.stderr[-3000:]

    broken = tmp_path / "broken"
    broken.mkdir()
    killed = fit(broken, "--config", str(run_config(tmp_path, kill_at)))
    assert killed.returncode == -9, f"{note} {killed.stderr[-3000:]}"
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
    # and so does the layer's own run (the line of the Custom Scalars chart of every layer)
    layer = EventAccumulator(str(runs[0] / "alpha" / "layer_00"), size_guidance={"scalars": 0})
    layer.Reload()
    assert [e.step for e in layer.Scalars("alpha")] == list(range(STEPS + 1)), note


def test_resume_without_a_checkpoint_starts_fresh(tmp_path):
    done = fit(tmp_path, "--ckpt_path", "last", "--trainer.max_steps", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no last.ckpt under runs/learned: starting a new run" in done.stderr
