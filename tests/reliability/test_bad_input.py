"""Bad input: one line naming the field, the value and what is allowed, before any work.

The cases here are the README's table of bad inputs (README.md, "Guarantees").
"""

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

import lit_sparse
from lit_sparse import list_attention
from lit_sparse.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"
FIXED = ["--config", str(ROOT / "configs" / "fixed.yaml"), "--config", str(TINY)]

BAD_INPUTS = [
    (
        ["--model.attention", "fibonaci"],
        f"model.attention='fibonaci': unknown attention; registered: {', '.join(list_attention())}"
        " (or a class path)",
    ),
    (["--model.attention.window", "-1"], "window must be >= 0, got -1"),
    (
        ["--model.attention.schedule", "Linear", "--model.attention.schedule.alpha_min", "1.5"]
        + ["--model.attention.schedule.alpha_max", "0.5"],
        "0 < alpha_min < alpha_max < inf, got alpha_min=1.5, alpha_max=0.5",
    ),
    (
        ["--model.attention.schedule", "Learned", "--model.attention.schedule.alpha_min", "0"],
        "got alpha_min=0.0",
    ),
    (
        ["--model.attention.schedule", "Custom", "--model.attention.schedule.alphas", "[1.0]"],
        "alphas: needs one alpha per layer (2), got 1",
    ),
    (
        ["--model.attention.schedule", "Linear", "--model.attention.schedule.init", "[1.0]"],
        "Linear: Option 'init' is not accepted",
    ),
    (
        ["--model.attention.init_args.alpha_min", "0.3"],
        "Option 'alpha_min' is not accepted (alpha_min is an option of the schedule now",
    ),
    (["--model.arch.n_kv_heads", "3"], "n_heads (2) must be divisible by n_kv_heads (3)"),
    (["--model.arch.d_model", "48"], "d_model (48) must equal n_heads x head_dim (2 x 16 = 32)"),
    (["--data.seq_len", "0"], "data.seq_len=0: must be a positive integer"),
    (["--data.vocab_size", "100"], "vocab_size=100 is smaller than the tokenizer's size 8192"),
    (["--model.lr", "-1"], "model.lr=-1.0: must be > 0"),
    (["--data.tokenizer", "missing/tokenizer.json"], "tokenizer='missing/tokenizer.json': file"),
    (
        ["--trainer.accumulate_grad_batches", "0"],
        "trainer.accumulate_grad_batches=0: must be an integer >= 1",
    ),
    (["--trainer.val_check_interval", "0.5"], "trainer.val_check_interval=0.5: must be an integer"),
    (["--trainer.max_steps", "0"], "trainer.max_steps=0: must be an integer >= 1"),
    (
        ["--model.attention.n_random", "3"],
        "model.attention: lit_sparse.FibonacciAttention: Option 'n_random' is not accepted",
    ),
    (
        ["--data.seq_len", "4"],
        "PositionLoss(n_bins=8) needs at least 8 positions per window, but data.seq_len=4",
    ),
    (["--model.lr", "1e39"], "model.lr=1e+39: must be at most 3.4e+38"),
    # issue 47: each of these trained, or made the run folder, before it failed
    (
        ["--model.attention.schedule", "Linear", "--model.attention.schedule.alpha_max", "1e300"],
        "alpha_max=1e+300: must be at most 9.126e+12 (alpha x the largest rung, 987",
    ),
    (["--model.attention.n_rungs", "100000"], "n_rungs=100000: must be at most 77"),
    (["--model.betas", "[1.5, 0.9]"], "model.betas=[1.5, 0.9]: must be two numbers in [0, 1)"),
    (["--data.seq_len", "100000000"], "data.seq_len=100000000: "),
    (["--trainer.gradient_clip_val", "-1"], "trainer.gradient_clip_val=-1: must be >= 0"),
    (["--trainer.devices", "100000"], "trainer.devices=100000: more processes than the"),
]


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    monkeypatch.chdir(tmp_path)


def run_cli(args: list[str], capsys) -> tuple[int, list[str]]:
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("Seed")]
    return code, err


@pytest.mark.parametrize(("extra", "message"), BAD_INPUTS, ids=[" ".join(c[0]) for c in BAD_INPUTS])
def test_bad_input_gets_one_clear_line_before_any_work(extra, message, capsys, tmp_path):
    code, err = run_cli(["fit", *FIXED, *extra], capsys)
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert message in err[0]
    assert not (tmp_path / "runs").exists(), "nothing may run before the input is checked"


def test_cpu_devices_past_the_usable_cores_are_refused_unless_forced(monkeypatch):
    """Issue 47: ``--trainer.devices 64`` on a 2-core CPU started 64 training processes.
    Checked on the parsed options (no process is started either way)."""
    from lit_sparse.errors import ConfigError
    from lit_sparse.runs import trainer

    monkeypatch.setattr(trainer, "usable_cores", lambda: 2)
    monkeypatch.delenv(trainer.FORCE_DEVICES, raising=False)
    for accelerator in ("cpu", *(() if torch.cuda.is_available() else ("auto",))):
        with pytest.raises(ConfigError) as err:
            trainer.check_trainer_options({"devices": 64, "accelerator": accelerator}, "validate")
        assert str(err.value) == (
            "trainer.devices=64: more processes than the 2 CPU cores this process may use (each "
            "device is a training process with its own model and data); use at most 2, or set "
            "LIT_SPARSE_FORCE_DEVICES=1 to start them anyway"
        )
    trainer.check_trainer_options({"devices": "2", "accelerator": "cpu"}, "validate")
    trainer.check_trainer_options({"devices": 64, "accelerator": "gpu"}, "validate")
    monkeypatch.setenv(trainer.FORCE_DEVICES, "1")
    trainer.check_trainer_options({"devices": 64, "accelerator": "cpu"}, "validate")


def test_missing_config_file(capsys):
    code, err = run_cli(["fit", "--config", "nope.yaml"], capsys)
    assert err == ["error: --config nope.yaml: cannot be read (No such file or directory)"]
    assert code == 2


def test_unreadable_config_file(capsys, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [unclosed\n")
    code, err = run_cli(["fit", "--config", str(broken)], capsys)
    assert code == 2 and len(err) == 1
    assert f"--config {broken}: not valid YAML at line 2, column 1" in err[0]


@pytest.fixture(scope="module")
def fixed_checkpoint(tmp_path_factory) -> Path:
    """A 2-step run of the fixed schedule; its last.ckpt."""
    workdir = tmp_path_factory.mktemp("fixed_run")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workdir)
        patch.setattr(sys, "argv", ["lit_sparse"])
        assert main(["fit", *FIXED, "--trainer.max_steps", "2"]) == 0
    (path,) = workdir.glob("runs/fixed/version_0/checkpoints/last.ckpt")
    return path


@pytest.mark.parametrize(
    ("config", "extra", "message"),
    [
        (
            "staggered.yaml",
            [],
            "model.attention.schedule: config Linear(alpha_min=0.5, alpha_max=1.5), "
            "checkpoint Fixed()",
        ),
        (
            "fixed.yaml",
            ["--model.arch.n_layers", "3"],
            "model.arch.n_layers: config 3, checkpoint 2",
        ),
        ("dense.yaml", [], "model.attention: config 'dense', checkpoint 'fibonacci'"),
    ],
)
def test_checkpoint_of_another_model_is_refused(config, extra, message, fixed_checkpoint, capsys):
    args = [
        "validate",
        "--config",
        str(ROOT / "configs" / config),
        "--config",
        str(TINY),
        *extra,
        "--ckpt_path",
        str(fixed_checkpoint),
    ]
    code, err = run_cli(args, capsys)
    assert code == 2 and err[-1].startswith("error: "), err
    assert "holds a different model than the config" in err[-1] and message in err[-1]


def test_truncated_checkpoint_is_refused(fixed_checkpoint, capsys, tmp_path):
    truncated = tmp_path / "checkpoints" / "last.ckpt"
    truncated.parent.mkdir()
    data = fixed_checkpoint.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    shutil.copy(fixed_checkpoint, truncated.parent / "step2.ckpt")
    for command in ("fit", "validate"):
        code, err = run_cli([command, *FIXED, "--ckpt_path", str(truncated)], capsys)
        assert code == 2, err
        assert "cannot be read as a checkpoint" in err[-1] and "step2.ckpt" in err[-1]


def test_matching_checkpoint_is_accepted(fixed_checkpoint, capsys):
    code, err = run_cli(["validate", *FIXED, "--ckpt_path", str(fixed_checkpoint)], capsys)
    assert code == 0, err
    assert torch.load(fixed_checkpoint, weights_only=True)["global_step"] == 2


# ----------------------------------------------------------------- damaged files, other commands
def test_a_truncated_or_invalid_result_file_is_named(finished_run, capsys, tmp_path):
    from tests.command_line import command

    tasks_main = command("tasks")
    from lit_sparse.errors import DamagedFileError
    from tests.command_line import command

    matrix_main = command("matrix")

    from .cli_runs import copy_run

    run = copy_run(finished_run, tmp_path)
    table = run / "extrapolation.json"
    table.write_text(table.read_text()[:50])
    with pytest.raises(DamagedFileError, match="extrapolation.json: not a readable result file"):
        lit_sparse.load_run(run)
    for run_command, args in ((matrix_main, ["--table", str(run)]), (tasks_main, [str(run)])):
        assert run_command(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {table}: not a readable result file")
    table.unlink()
    (run / "position_loss.json").write_text("[1, 2]\n")
    with pytest.raises(DamagedFileError, match="position_loss.json: expected a JSON object"):
        lit_sparse.load_run(run)


def test_token_cache_metadata_that_is_not_an_object_is_rebuilt():
    from lit_sparse.data import TextDataModule
    from lit_sparse.data.token_cache import check_part

    module = TextDataModule(seq_len=48)  # the suite's token cache
    module.prepare_data()
    plan = module._plans[-1]  # math: the smaller source to rebuild
    plan.meta_path("train").write_text("[]\n")
    assert (
        check_part(plan, "train", verify_checksum=False) == "metadata is not a JSON object (a list)"
    )
    module.prepare_data()  # rebuilt, not an AttributeError
    assert not isinstance(check_part(plan, "train", verify_checksum=True), str)


def test_bench_with_a_zero_length_is_one_line(capsys):
    from tests.command_line import command

    bench_main = command("bench")

    assert bench_main(["attention", "--lengths", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --lengths 0: must be an integer >= 1"


def test_result_files_get_the_users_umask(finished_run):
    umask = os.umask(0)
    os.umask(umask)
    for name in ("extrapolation.json", "extrapolation.md", "position_loss.json", "config.yaml"):
        assert (finished_run / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
