"""Run folders (lit_sparse/runs/folders.py): versions and evaluation folders allocated in
order, a run's checkpoint and newest config found, and a failed start's folder removed only
when it holds nothing else. Versions allocated by concurrent processes:
tests/reliability/test_runs.py."""

from __future__ import annotations

import os

from lit_sparse.runs.folders import (
    experiment_runs,
    has_checkpoint,
    new_eval_folder,
    new_version,
    remove_failed_start,
    resume_config_name,
    run_checkpoint,
    run_config,
)


def test_versions_follow_the_largest_one_in_numeric_order(tmp_path):
    for name in ("version_2", "version_10", "version_x", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "version_11").write_text("a file, not a run")
    assert [p.name for p in experiment_runs(tmp_path)] == ["version_2", "version_10"]
    assert new_version(tmp_path) == (12, tmp_path / "version_12")  # past the file's name
    assert new_version(tmp_path / "new") == (0, tmp_path / "new" / "version_0")
    assert experiment_runs(tmp_path / "missing") == []


def test_an_evaluation_folder_per_command_and_step_numbered_when_run_again(tmp_path):
    assert new_eval_folder(tmp_path, "validate", 300) == tmp_path / "evals" / "validate-step300"
    assert new_eval_folder(tmp_path, "validate", 300).name == "validate-step300-2"
    assert new_eval_folder(tmp_path, "validate", 300).name == "validate-step300-3"
    assert new_eval_folder(tmp_path, "test", None).name == "test"


def test_last_ckpt_else_the_newest_checkpoint(tmp_path):
    folder = tmp_path / "checkpoints"
    assert run_checkpoint(tmp_path) is None and not has_checkpoint(tmp_path)
    folder.mkdir()
    for name, mtime in (("step=4.ckpt", 2_000_000_000), ("step=6.ckpt", 1_000_000_000)):
        (folder / name).write_bytes(b"x")
        os.utime(folder / name, (mtime, mtime))
    assert run_checkpoint(tmp_path) == folder / "step=4.ckpt"  # the newest written
    (folder / "last.ckpt").write_bytes(b"x")
    assert run_checkpoint(tmp_path) == folder / "last.ckpt" and has_checkpoint(tmp_path)


def test_the_newest_resume_config_else_config_yaml(tmp_path):
    assert run_config(tmp_path) is None
    (tmp_path / "config.yaml").write_text("seed_everything: 1\n")
    assert run_config(tmp_path) == {"seed_everything": 1}
    for name, seed in (("config.resume-9.yaml", 9), ("config.resume-10.yaml", 10)):
        (tmp_path / name).write_text(f"seed_everything: {seed}\n")
    (tmp_path / "config.resume-10-2.yaml").write_text("seed_everything: 102\n")
    (tmp_path / "config.resume-11.yaml").write_text("{unreadable\n")  # skipped
    assert run_config(tmp_path) == {"seed_everything": 102}
    assert resume_config_name(tmp_path, 10) == "config.resume-10-3.yaml"
    assert resume_config_name(tmp_path, 12) == "config.resume-12.yaml"


def test_a_failed_start_is_removed_unless_it_holds_anything_else(tmp_path):
    started = tmp_path / "version_0"
    (started / "checkpoints").mkdir(parents=True)
    for name in ("config.yaml", "hparams.yaml", "events.out.tfevents.1.host.7.0"):
        (started / name).write_text("x")
    (started / "checkpoints" / ".last.ckpt.tmp-7-abcd1234").write_bytes(b"x")  # a killed save
    kept = tmp_path / "version_1"
    kept.mkdir()
    (kept / "config.yaml").write_text("x")
    (kept / "notes.txt").write_text("the user's")
    assert remove_failed_start(started) and not started.exists()
    assert not remove_failed_start(kept) and (kept / "notes.txt").exists()
    assert not remove_failed_start(tmp_path / "missing")
