"""Values given on resume: optimizer and schedule values apply from the resume step and
are recorded in config.resume-<step>.yaml; a different model is refused; ``last`` never
guesses that a run with other values is meant."""

from __future__ import annotations

import sys

import pytest
import torch
import yaml

from lit_sparse.cli import main
from lit_sparse.schedule import warmup_cosine

from .cli_runs import (
    ROOT,
    checkpoint_every,
    config_args,
    copy_run,
    errors,
    fault,
    run_cli,
    write_callbacks,
)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """fixed.yaml + tiny.yaml (4 steps, lr 3e-4, warmup 2), crashed before step 3 with a
    checkpoint at step 2: its experiment folder (tests copy it)."""
    workdir = tmp_path_factory.mktemp("crashed")
    crash = write_callbacks(
        workdir / "crash.yaml", checkpoint_every(2), fault("RaiseAtStep", step=3)
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workdir)
        patch.setattr(sys, "argv", ["lit_sparse"])
        patch.syspath_prepend(str(ROOT))
        with pytest.raises(Exception, match="crash before step 3"):
            main(["fit", *config_args("fixed.yaml", crash)])
    return workdir / "runs/fixed/version_0"


@pytest.fixture
def crashed_run(crashed, in_workdir):
    return copy_run(crashed, in_workdir)


def test_a_lower_lr_on_resume_applies_from_the_resume_step(crashed_run, in_workdir, capsys):
    plain = write_callbacks(in_workdir / "plain.yaml", checkpoint_every(2))
    args = [*config_args("fixed.yaml", plain), "--ckpt_path", str(crashed_run)]
    code, err = run_cli(["fit", *args, "--model.lr", "1e-4"], capsys)
    assert code == 0, err
    assert any("model.lr=0.0001 (was 0.0003)" in line for line in err), err
    saved = torch.load(crashed_run / "checkpoints/last.ckpt", weights_only=True)
    assert saved["global_step"] == 4
    assert saved["lr_schedulers"][0]["base_lrs"] == [1e-4, 1e-4]
    expected = 1e-4 * warmup_cosine(4, 2, 4, 0.1)  # the lr after step 3 (the schedule's step 4)
    for group in saved["optimizer_states"][0]["param_groups"]:
        assert group["lr"] == pytest.approx(expected, rel=1e-12)
    recorded = yaml.safe_load((crashed_run / "config.resume-2.yaml").read_text())
    assert recorded["model"]["lr"] == 1e-4
    assert yaml.safe_load((crashed_run / "config.yaml").read_text())["model"]["lr"] == 3e-4


def test_last_with_another_lr_names_the_run_instead_of_guessing(crashed_run, capsys):
    code, err = run_cli(
        ["fit", *config_args(), "--ckpt_path", "last", "--model.lr", "1e-4"], capsys
    )
    assert code == 2 and len(errors(err)) == 1, err
    assert "model.lr (run 0.0003, here 0.0001)" in err[-1]
    assert f"--ckpt_path {crashed_run.relative_to(crashed_run.parents[2])}" in err[-1]
    assert not list(crashed_run.glob("config.resume-*"))


def test_last_with_another_model_is_refused_by_the_same_rule(crashed_run, capsys):
    """``--model.arch.d_model`` changed: refused like ``--model.lr`` (it used to start a
    new run), naming the field; nothing is written."""
    args = ["fit", *config_args(), "--ckpt_path", "last"]
    code, err = run_cli(
        [*args, "--model.arch.d_model", "64", "--model.arch.head_dim", "32"], capsys
    )
    assert code == 2 and len(errors(err)) == 1, err
    assert "model.arch.d_model (run 32, here 64)" in err[-1] and "leave out --ckpt_path" in err[-1]
    assert [p.name for p in crashed_run.parent.iterdir()] == [crashed_run.name]


def test_a_different_model_on_resume_is_refused(crashed_run, capsys):
    args = ["fit", *config_args(), "--ckpt_path", str(crashed_run), "--model.arch.n_layers", "3"]
    code, err = run_cli(args, capsys)
    assert code == 2 and len(errors(err)) == 1, err
    assert "model.arch.n_layers: config 3, checkpoint 2" in err[-1]
