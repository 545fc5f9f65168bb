"""A full disk, a read-only run folder or cache folder: one line naming the path, the
previous file intact, and the run resumes once space is freed."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lit_sparse.__main__ import main as lit_main
from lit_sparse.runs.checkpoint_files import read_checkpoint

from .cli_runs import (
    OBSERVERS,
    checkpoint_every,
    config_args,
    errors,
    fault,
    run_cli,
    tracebacks,
    write_callbacks,
)

pytestmark = pytest.mark.slow  # trains, starts processes or benches


@pytest.fixture(autouse=True)
def disk_restored(monkeypatch):
    """Whatever a fault does to os.fsync / os.mkdir / os.open, the test gets them back."""
    for name in ("fsync", "mkdir", "open"):
        monkeypatch.setattr(os, name, getattr(os, name))


def one_line(err: list[str]) -> str:
    assert len(errors(err)) == 1 and err[-1].startswith("error: "), err
    assert not tracebacks("\n".join(err))
    return err[-1]


def test_a_full_disk_at_a_checkpoint_keeps_the_last_one_and_the_run_resumes(in_workdir, capsys):
    full = write_callbacks(in_workdir / "full.yaml", checkpoint_every(2), fault("FullDisk", step=3))
    code, err = run_cli(["fit", *config_args("fixed.yaml", full)], capsys)
    run = in_workdir / "runs/fixed/version_0"
    line = one_line(err)
    assert code == 2 and "the disk is full" in line and "runs/fixed/version_0/checkpoints/" in line
    assert read_checkpoint(run / "checkpoints/last.ckpt")["global_step"] == 2, "kept whole"
    assert not [p for p in (run / "checkpoints").iterdir() if ".tmp-" in p.name]

    freed = write_callbacks(in_workdir / "freed.yaml", checkpoint_every(2))
    code, err = run_cli(["fit", *config_args("fixed.yaml", freed), "--ckpt_path", "last"], capsys)
    assert code == 0, err
    assert read_checkpoint(run / "checkpoints/last.ckpt")["global_step"] == 4


def test_a_full_disk_at_the_result_tables_is_completed_after_space_is_freed(in_workdir, capsys):
    full = write_callbacks(
        in_workdir / "full.yaml", checkpoint_every(2), fault("FullDisk"), *OBSERVERS
    )
    code, err = run_cli(["fit", *config_args("fixed.yaml", full)], capsys)
    run = in_workdir / "runs/fixed/version_0"
    line = one_line(err)
    assert code == 2 and "the disk is full" in line and ".json" in line, line
    assert not (run / "extrapolation.json").exists()
    assert read_checkpoint(run / "checkpoints/last.ckpt")["global_step"] == 4

    freed = write_callbacks(in_workdir / "freed.yaml", checkpoint_every(2), *OBSERVERS)
    code, err = run_cli(["fit", *config_args("fixed.yaml", freed), "--ckpt_path", "last"], capsys)
    assert code == 0, err
    assert (run / "extrapolation.json").is_file() and (run / "alpha_trajectory.json").is_file()


def test_a_full_disk_while_building_the_token_cache(in_workdir, capsys, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    cache = in_workdir / "cache"
    code, err = run_cli(["fit", *config_args(), "--data.cache_dir", str(cache)], capsys)
    line = one_line(err)
    assert code == 2 and "the disk is full" in line and str(cache / "tokens") in line
    assert not [p for p in cache.rglob("*") if p.is_file()], "no partial token file is left"


def test_lightnings_own_writes_on_a_full_disk_are_one_line(in_workdir, capsys, monkeypatch):
    from lightning.pytorch.loggers import tensorboard

    def full(path, hparams, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(tensorboard, "save_hparams_to_yaml", full)
    code, err = run_cli(["fit", *config_args()], capsys)
    line = one_line(err)
    assert code == 2 and "hparams.yaml" in line and "the disk is full" in line


def _refuse_under(folder: Path, call: str, error: int) -> None:
    real = getattr(os, call)

    def refused(path, *args, **kwargs):
        if str(Path(path).resolve()).startswith(str(folder.resolve())):
            raise OSError(error, os.strerror(error), str(path))
        return real(path, *args, **kwargs)

    setattr(os, call, refused)


def test_a_read_only_runs_folder(in_workdir, capsys):
    (in_workdir / "runs").mkdir()
    _refuse_under(in_workdir / "runs", "mkdir", errno.EROFS)
    code, err = run_cli(["fit", *config_args()], capsys)
    line = one_line(err)
    assert code == 2 and "read-only" in line and str(Path("runs") / "fixed") in line


def test_a_read_only_run_folder_on_resume(finished_run, in_workdir, capsys):
    from .cli_runs import copy_run

    run = copy_run(finished_run, in_workdir)
    (run / ".lock").unlink(missing_ok=True)
    _refuse_under(run, "open", errno.EACCES)
    code, err = run_cli(["fit", *config_args(), "--ckpt_path", str(run)], capsys)
    line = one_line(err)
    assert code == 2 and "permission denied" in line and str(run) in line


def test_a_read_only_cache_folder_with_missing_entries(in_workdir, capsys):
    cache = in_workdir / "cache"
    cache.mkdir()
    _refuse_under(cache, "mkdir", errno.EROFS)
    code, err = run_cli(["fit", *config_args(), "--data.cache_dir", str(cache)], capsys)
    line = one_line(err)
    assert code == 2 and "read-only" in line and str(cache) in line
    assert not list(in_workdir.glob("runs/*/*/checkpoints/*.ckpt"))


# ------------------------------------------------------------ a real small file system
@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (tests run as root in CI; skipped where
    mounting is not allowed), unmounted at the end."""
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()[:200]}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def every_checkpoint_is_whole(folder: Path) -> list[int]:
    steps = [read_checkpoint(p)["global_step"] for p in sorted(folder.rglob("*.ckpt"))]
    assert not [p for p in folder.rglob("*") if ".tmp-" in p.name], "no temporary file left"
    return steps


@pytest.mark.slow  # trains
def test_fit_on_a_really_full_disk_keeps_its_checkpoints_and_resumes(in_workdir, capsys):
    """An 8 MB tmpfs holds the run's first checkpoints (3.5 MB each), not the next."""
    with tmpfs(in_workdir / "small", "8m") as disk:
        callbacks = write_callbacks(in_workdir / "ckpt.yaml", checkpoint_every(2))
        args = ["fit", *config_args("fixed.yaml", callbacks)]
        args += ["--trainer.logger.init_args.save_dir", str(disk / "runs")]
        code, err = run_cli(args, capsys)
        line = one_line(err)
        assert code == 2 and "the disk is full" in line and str(disk) in line, line
        assert every_checkpoint_is_whole(disk) == [2, 2], "step 2's checkpoint and last.ckpt"

        remount(disk, "size=64m")  # space freed
        code, err = run_cli([*args, "--ckpt_path", "last"], capsys)
        assert code == 0, err
        assert (
            read_checkpoint(disk / "runs/fixed/version_0/checkpoints/last.ckpt")["global_step"] == 4
        )
        assert [p.name for p in (disk / "runs/fixed").iterdir()] == ["version_0"]


@pytest.mark.slow  # the finished run (trained)
def test_a_really_read_only_run_folder(finished_run, in_workdir, capsys):
    """The run on a file system mounted read-only: every command that would write it is
    one line; reading it (export elsewhere, load_run) works; nothing changes."""
    import lit_sparse

    with tmpfs(in_workdir / "ro", "64m") as disk:
        run = disk / "runs/fixed/version_0"
        shutil.copytree(finished_run, run)
        remount(disk, "ro")
        before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
        commands = {
            "fit": ["fit", *config_args(), "--ckpt_path", str(run), "--trainer.max_steps", "6",
                    "--trainer.logger.init_args.save_dir", str(disk / "runs")],
            "validate": ["validate", "--config", str(run / "config.yaml"),
                         "--ckpt_path", str(run / "checkpoints/last.ckpt")],
        }  # fmt: skip
        for name, args in commands.items():
            code, err = run_cli(args, capsys)
            line = one_line(err)
            assert code == 2 and "read-only" in line and str(run) in line, (name, line)
        assert lit_main(["export", str(run), "--out", str(in_workdir / "exported")]) == 0
        assert lit_sparse.load_run(run).step == 4
        assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
