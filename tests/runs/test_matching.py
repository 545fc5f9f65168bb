"""A checkpoint checked against the command that would use it (lit_sparse/runs/matching.py),
before anything is built: another shape, attention or optimizer is one line naming each
field, and a fit's changed schedule values are announced. Through the CLI:
tests/reliability/test_bad_input.py and test_resume_values.py."""

from __future__ import annotations

import pytest
import torch
from jsonargparse import Namespace

from lit_sparse.errors import CheckpointError
from lit_sparse.runs.matching import check_checkpoint

ARCH = {"vocab_size": 64, "context_length": 32, "n_layers": 2, "d_model": 32, "n_heads": 2,
        "n_kv_heads": 1, "head_dim": 16}  # fmt: skip
FIB = {"class_path": "lit_sparse.FibonacciAttention", "init_args": {"window": 4}}


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "last.ckpt"
    hparams = {"arch": ARCH, "attention": FIB, "optimizer": "adamw", "lr": 3e-4}
    torch.save({"global_step": 7, "hyper_parameters": hparams}, path)
    return str(path)


def command(ckpt_path: str, arch=None, attention=None, **model) -> Namespace:
    """A parsed command's config: the checkpoint's model unless told otherwise."""
    attention = attention or FIB
    values = {"arch": Namespace(**(arch or ARCH)), "optimizer": "adamw", "lr": 3e-4, **model}
    values["attention"] = Namespace(
        class_path=attention["class_path"], init_args=Namespace(**attention["init_args"])
    )
    return Namespace(
        ckpt_path=ckpt_path, model=Namespace(**values), trainer=Namespace(strategy="auto")
    )


def test_the_same_model_passes_silently(checkpoint, capsys):
    for subcommand in ("fit", "validate"):
        check_checkpoint(command(checkpoint), subcommand, "config.yaml")
    check_checkpoint(command(checkpoint, arch={**ARCH, "ffn_hidden": 86}), "validate", None)
    assert capsys.readouterr().err == ""  # 86: the default width, written out


def test_another_model_is_one_line_naming_each_field(checkpoint):
    dense = {"class_path": "lit_sparse.DenseAttention", "init_args": {}}
    wider = command(checkpoint, arch={**ARCH, "d_model": 64, "head_dim": 32}, attention=dense)
    with pytest.raises(CheckpointError) as caught:
        check_checkpoint(wider, "validate", None)
    assert str(caught.value) == (
        f"ckpt_path={checkpoint!r} holds a different model than the config: "
        "model.arch.d_model: config 64, checkpoint 32; model.arch.ffn_hidden: config 170, "
        "checkpoint 86; model.arch.head_dim: config 32, checkpoint 16; "
        "model.arch.init_std: config 0.125, checkpoint 0.1767766952966369; "
        "model.attention: config 'dense', checkpoint 'fibonacci' (use the run's own config.yaml)"
    )
    window = {**FIB, "init_args": {"window": 8}}
    with pytest.raises(CheckpointError, match="model.attention.window: config 8, checkpoint 4"):
        check_checkpoint(command(checkpoint, attention=window), "validate", None)


def test_a_fit_may_not_change_the_optimizer_but_may_change_the_schedule(checkpoint, capsys):
    with pytest.raises(CheckpointError, match="model.optimizer: config 'adamw8bit', checkpoint"):
        check_checkpoint(command(checkpoint, optimizer="adamw8bit"), "fit", None)
    check_checkpoint(command(checkpoint, optimizer="adamw8bit"), "validate", None)
    check_checkpoint(command(checkpoint, lr=1e-5), "fit", "config.resume-7.yaml")
    assert capsys.readouterr().err == (
        "resuming from step 7 with model.lr=1e-05 (was 0.0003); they apply from this step and "
        "the config of the resumed part records them (config.resume-7.yaml)\n"
    )
