"""The CLI's trainer writes checkpoints atomically (a crash mid-write leaves the previous file
whole: tests/runs/test_checkpoints.py)."""

import sys
from pathlib import Path

from lit_sparse.cli import LitSparseCLI
from lit_sparse.runs.checkpoints import AtomicCheckpointIO

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_trainer_saves_atomically(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    args = [
        "--config",
        str(ROOT / "configs" / "fixed.yaml"),
        "--config",
        str(ROOT / "tests" / "configs" / "tiny.yaml"),
    ]
    cli = LitSparseCLI(args, run=False)
    assert isinstance(cli.trainer.strategy.checkpoint_io, AtomicCheckpointIO)
