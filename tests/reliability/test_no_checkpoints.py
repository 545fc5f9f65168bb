"""``fit --trainer.enable_checkpointing false`` with a shipped config (they all list a
ModelCheckpoint, which Lightning refuses with it): the run trains, says it saves no
checkpoint, and saves none; its end-of-fit evaluation still runs."""

from __future__ import annotations

import pytest

from .cli_runs import config_args, run_cli, tracebacks

pytestmark = pytest.mark.slow  # trains


def test_checkpointing_off_trains_without_the_configs_checkpoints(in_workdir, capsys):
    args = ["fit", *config_args("fixed.yaml"), "--trainer.enable_checkpointing", "false"]
    code, err = run_cli(args, capsys)
    assert code == 0 and not tracebacks("\n".join(err)), err
    notes = [line for line in err if line.startswith("note: trainer.enable_checkpointing")]
    assert len(notes) == 1 and "cannot be resumed" in notes[0], err
    run = in_workdir / "runs/fixed/version_0"
    assert not list(run.rglob("*.ckpt")), "no checkpoint saved"
    assert (run / "extrapolation.json").is_file() and (run / "config.yaml").is_file()
    assert "ModelCheckpoint" not in (run / "config.yaml").read_text()
