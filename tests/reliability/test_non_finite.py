"""A NaN loss stops training at once, naming the step and the last good checkpoint."""

import re
import sys
from pathlib import Path

import pytest
import torch
import yaml

from lit_sparse.cli import main

pytestmark = pytest.mark.slow  # trains, starts processes or benches

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"
checkpoint_every_two = {
    "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
    "init_args": {"every_n_train_steps": 2, "save_last": True},
}


def test_non_finite_loss_stops_naming_step_and_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    faults = tmp_path / "faults.yaml"
    faults.write_text(
        yaml.safe_dump(
            {
                "trainer": {
                    "max_steps": 6,
                    "callbacks": [
                        checkpoint_every_two,
                        {
                            "class_path": "tests.reliability.faults.PoisonWeightsAtStep",
                            "init_args": {"step": 3},
                        },
                    ],
                }
            }
        )
    )
    monkeypatch.syspath_prepend(str(ROOT))
    code = main(
        [
            "fit",
            "--config",
            str(ROOT / "configs" / "fixed.yaml"),
            "--config",
            str(TINY),
            "--config",
            str(faults),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("error: training stopped: the loss is nan at optimizer step 3")
    (last,) = tmp_path.glob("runs/fixed/version_0/checkpoints/last.ckpt")
    assert f"the last good checkpoint is {last.relative_to(tmp_path)}" in err[-1]
    saved = torch.load(last, weights_only=True)
    assert saved["global_step"] == 2, "no checkpoint is written after the failure"
    assert all(torch.isfinite(t).all() for t in saved["state_dict"].values())

    # the advice works: resume from the named run with a lower learning rate (the poison gone)
    advised = re.search(
        r"resume from it with --ckpt_path (\S+), e\.g\. with a lower --model\.lr", err[-1]
    )
    assert advised, err[-1]
    checkpoints = tmp_path / "checkpoints.yaml"
    checkpoints.write_text(
        yaml.safe_dump({"trainer": {"max_steps": 6, "callbacks": [checkpoint_every_two]}})
    )
    code = main(
        [
            "fit",
            "--config",
            str(ROOT / "configs" / "fixed.yaml"),
            "--config",
            str(TINY),
            "--config",
            str(checkpoints),
            "--ckpt_path",
            advised.group(1),
            "--model.lr",
            "1e-5",
        ]
    )
    assert code == 0
    resumed = torch.load(last, weights_only=True)
    assert resumed["global_step"] == 6 and resumed["lr_schedulers"][0]["base_lrs"] == [1e-5] * 2


def test_nan_before_any_checkpoint_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    monkeypatch.syspath_prepend(str(ROOT))
    faults = tmp_path / "faults.yaml"
    faults.write_text(
        yaml.safe_dump(
            {
                "trainer": {
                    "callbacks": [
                        {
                            "class_path": "tests.reliability.faults.PoisonWeightsAtStep",
                            "init_args": {"step": 0},
                        },
                    ]
                }
            }
        )
    )
    code = main(
        [
            "fit",
            "--config",
            str(ROOT / "configs" / "dense.yaml"),
            "--config",
            str(TINY),
            "--config",
            str(faults),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "at optimizer step 0 (micro-batch 0); no checkpoint was saved yet: start the run " in err
    assert "--ckpt_path" not in err, "there is nothing to resume"


def test_an_absurd_learning_rate_gets_advice_that_works(tmp_path, monkeypatch, capsys):
    """lr 1e30: the loss overflows before any checkpoint; the message must not say resume."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    args = ["--config", str(ROOT / "configs" / "dense.yaml"), "--config", str(TINY)]
    code = main(["fit", *args, "--model.lr", "1e30", "--trainer.max_steps", "3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: training stopped: the loss is")
    assert "no checkpoint was saved yet: start the run again" in err[-1]
    assert "resume" not in err[-1]
