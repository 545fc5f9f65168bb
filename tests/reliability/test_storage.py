"""A full disk, a read-only run folder or cache folder: one line naming the path, the
previous file intact, and the run resumes once space is freed."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from lit_sparse.runs.checkpoints import read_checkpoint

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
