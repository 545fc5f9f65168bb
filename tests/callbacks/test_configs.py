"""Every paper config turns the observers on: the three callbacks, LearningRateMonitor,
ModelCheckpoint (last.ckpt every N steps) and the sparse-aware ThroughputMonitor."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint, ThroughputMonitor

import lit_sparse.callbacks

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if p.name != "quickstart.yaml")
EXPECTED = {
    "lightning.pytorch.callbacks.LearningRateMonitor",
    "lightning.pytorch.callbacks.ModelCheckpoint",
    "lit_sparse.callbacks.AlphaTrajectory",
    "lit_sparse.callbacks.PositionLoss",
    "lit_sparse.callbacks.LengthExtrapolation",
    "lit_sparse.callbacks.SparseThroughputMonitor",
}


def _instantiate(entry: dict):
    module, _, name = entry["class_path"].rpartition(".")
    return getattr(importlib.import_module(module), name)(**(entry.get("init_args") or {}))


@pytest.mark.parametrize("config", VARIANTS, ids=lambda p: p.stem)
def test_every_variant_turns_the_observers_on(config):
    entries = yaml.safe_load(config.read_text())["trainer"]["callbacks"]
    assert {entry["class_path"] for entry in entries} == EXPECTED
    built = [_instantiate(entry) for entry in entries]
    [checkpoint] = [cb for cb in built if isinstance(cb, ModelCheckpoint)]
    assert checkpoint.save_last and checkpoint._every_n_train_steps > 0
    assert any(isinstance(cb, LearningRateMonitor) for cb in built)
    [throughput] = [cb for cb in built if isinstance(cb, ThroughputMonitor)]
    assert isinstance(throughput, lit_sparse.callbacks.SparseThroughputMonitor)
    [extrapolation] = [
        cb for cb in built if isinstance(cb, lit_sparse.callbacks.LengthExtrapolation)
    ]
    assert extrapolation.multiples == [1, 2, 4]


def test_the_cli_builds_them(tmp_path, monkeypatch):
    from lit_sparse.cli import LitSparseCLI

    monkeypatch.chdir(tmp_path)
    cli = LitSparseCLI(
        [
            "--config",
            str(ROOT / "configs" / "learned.yaml"),
            "--config",
            str(ROOT / "tests" / "configs" / "tiny.yaml"),
        ],
        run=False,
    )
    names = {type(cb).__name__ for cb in cli.trainer.callbacks}
    assert {
        "AlphaTrajectory",
        "PositionLoss",
        "LengthExtrapolation",
        "SparseThroughputMonitor",
        "LearningRateMonitor",
        "ModelCheckpoint",
    } <= names
