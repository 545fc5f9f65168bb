"""The run folder a fit writes (lit_sparse.runs.launch): a fit whose command line changes the
attention is named by the attention trained (issue 57: ``--model.attention geometric`` on
configs/sliding_window.yaml was saved under runs/sliding_window/)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from jsonargparse import Namespace

from lit_sparse.runs.launch import attention_run_name, name_run_by_attention

ROOT = Path(__file__).resolve().parents[2]
DENSE = "lit_sparse.attention.dense.DenseAttention"


def fit_config(class_path: str, name: str = "sliding_window") -> Namespace:
    logger = Namespace(
        class_path="lightning.pytorch.loggers.TensorBoardLogger",
        init_args=Namespace(save_dir="runs", name=name),
    )
    return Namespace(
        trainer=Namespace(logger=logger),
        model=Namespace(attention=Namespace(class_path=class_path, init_args=Namespace())),
    )


def test_a_registered_class_path_is_named_by_its_registry_name():
    assert attention_run_name(DENSE) == "dense"
    assert attention_run_name("my_pkg.dilated.DilatedAttention") == "DilatedAttention"


@pytest.mark.parametrize(
    "args, name",
    [
        (["--config", "sliding_window.yaml", "--model.attention", DENSE], "dense"),
        ([f"--model.attention={DENSE}"], "dense"),
        (["--model.attention.class_path", DENSE], "dense"),
        # the command line names the run: kept
        (["--model.attention", DENSE, "--trainer.logger.init_args.name", "mine"], "sliding_window"),
        # options of the config's own attention, or none: the config's name
        (["--model.attention.window", "16"], "sliding_window"),
        (["--config", "sliding_window.yaml"], "sliding_window"),
    ],
)
def test_the_run_is_named_by_an_attention_given_on_the_command_line(args, name):
    config = fit_config(DENSE)
    name_run_by_attention(config, args)
    assert config.trainer.logger.init_args.name == name


@pytest.mark.slow
def test_a_fit_with_another_attention_is_saved_under_its_name(tmp_path, monkeypatch):
    from lit_sparse.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    args = ["fit", "--config", str(ROOT / "configs" / "sliding_window.yaml")]
    args += ["--config", str(ROOT / "tests" / "configs" / "tiny.yaml")]
    args += ["--model.attention", "dense", "--trainer.max_steps", "1"]
    assert main(args) == 0
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("runs/*/version_*")] == [
        "runs/dense/version_0"
    ]
