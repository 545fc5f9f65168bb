"""Every resume continues the right run, and two processes never write one run folder.

``--ckpt_path last`` means the run this command started (the same model, data, seed and
steps); a sweep's other runs, a run another process is writing and ambiguous cases are
never taken silently. Run folders are locked (the second process gets one line naming the
holder) and new versions are allocated atomically (real concurrent processes).
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from lit_sparse.errors import ConfigError, RunInUseError
from lit_sparse.runs import RunLock, lock_holder, new_version
from lit_sparse.runs.resume import choose_run

from .cli_runs import (
    checkpoint_every,
    config_args,
    copy_run,
    errors,
    fault,
    run_cli,
    tracebacks,
    write_callbacks,
)

BASE = {
    "seed_everything": 42,
    "trainer": {"max_steps": 6},
    "model": {"arch": {"n_layers": 2, "d_model": 32}, "lr": 3e-4, "warmup_steps": 2},
    "data": {"class_path": "lit_sparse.data.TextDataModule", "init_args": {"seq_len": 48}},
}


def config(**model) -> dict:
    return {**BASE, "model": {**BASE["model"], **model}}


def make_run(experiment: Path, version: int, values: dict, step: int) -> Path:
    """A run folder as a fit leaves it: config.yaml and checkpoints/last.ckpt at ``step``."""
    run = experiment / f"version_{version}"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(values))
    hparams = {"max_steps": values["trainer"]["max_steps"]}
    torch.save({"global_step": step, "hyper_parameters": hparams}, run / "checkpoints/last.ckpt")
    return run


def test_last_is_the_run_of_this_config_not_the_newest(tmp_path):
    a = make_run(tmp_path, 0, config(lr=1e-3), step=2)
    b = make_run(tmp_path, 1, config(lr=2e-3), step=4)  # newer, another sweep member
    assert choose_run(tmp_path, config(lr=1e-3)) == a / "checkpoints/last.ckpt"
    assert choose_run(tmp_path, config(lr=2e-3)) == b / "checkpoints/last.ckpt"


def test_the_same_config_twice_prefers_the_unfinished_run(tmp_path):
    make_run(tmp_path, 0, config(), step=6)  # finished
    unfinished = make_run(tmp_path, 1, config(), step=2)
    make_run(tmp_path, 2, config(lr=1.0), step=2)  # another config
    assert choose_run(tmp_path, config()) == unfinished / "checkpoints/last.ckpt"


def test_an_ambiguous_choice_is_refused_listing_the_candidates(tmp_path):
    first = make_run(tmp_path, 0, config(), step=2)
    second = make_run(tmp_path, 1, config(), step=4)
    with pytest.raises(ConfigError) as caught:
        choose_run(tmp_path, config())
    message = str(caught.value)
    assert "\n" not in message and "ambiguous" in message
    assert f"{first} (step 2)" in message and f"{second} (step 4)" in message


def test_a_run_that_differs_only_in_resumable_values_is_named_not_taken(tmp_path):
    run = make_run(tmp_path, 0, config(), step=2)
    with pytest.raises(ConfigError) as caught:
        choose_run(tmp_path, config(lr=1e-5))
    message = str(caught.value)
    assert "\n" not in message
    assert "model.lr (run 0.0003, here 1e-05)" in message and f"--ckpt_path {run}" in message


def test_another_model_is_refused_like_another_lr_naming_the_field(tmp_path):
    """One rule for every field (issue 24): runs exist but none of this exact config, so
    ``last`` is refused naming the nearest run and what differs; a model change cannot be
    resumed, so the advice is only to start a new run."""
    make_run(tmp_path, 0, config(lr=1.0), step=2)  # differs in more
    run = make_run(tmp_path, 1, config(), step=2)
    other = config()
    other["model"]["arch"] = {"n_layers": 3, "d_model": 32}
    with pytest.raises(ConfigError) as caught:
        choose_run(tmp_path, other)
    message = str(caught.value)
    assert "\n" not in message and f"the nearest, {run}, differs in" in message
    assert "model.arch.n_layers (run 2, here 3)" in message and "1 other run" in message
    assert "leave out --ckpt_path" in message and "give its folder" not in message


def test_an_experiment_without_a_checkpoint_starts_a_new_run(tmp_path, capsys):
    (tmp_path / "version_0").mkdir()  # a start that died before its first checkpoint
    assert choose_run(tmp_path, config()) is None
    assert "starting a new run" in capsys.readouterr().err


def _hold(folder: str) -> subprocess.Popen:
    """A real process that locks ``folder`` and keeps it until killed."""
    code = (
        "import sys, time; from lit_sparse.runs import RunLock; "
        f"RunLock.acquire({folder!r}, 'fit'); print('locked', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


@pytest.mark.slow
def test_a_run_another_process_writes_is_left_out_and_its_lock_names_it(tmp_path):
    taken = make_run(tmp_path, 0, config(), step=2)
    free = make_run(tmp_path, 1, config(), step=2)
    holder = _hold(str(taken))
    try:
        assert f"process {holder.pid}" in lock_holder(taken)
        assert choose_run(tmp_path, config()) == free / "checkpoints/last.ckpt"
        with pytest.raises(RunInUseError) as caught:
            RunLock.acquire(taken)
        assert f"in use by process {holder.pid}" in str(caught.value)
        assert "\n" not in str(caught.value)
    finally:
        holder.kill()
        holder.wait()
    # a killed holder's lock is gone with it (no stale lock to clean up)
    assert lock_holder(taken) is None
    RunLock.acquire(taken).release()


def _allocate(experiment: str, barrier, results) -> None:
    barrier.wait()
    results.put(new_version(experiment)[0])


def test_new_versions_are_allocated_atomically_by_concurrent_processes(tmp_path):
    context = multiprocessing.get_context("fork")
    count = 8
    barrier, results = context.Barrier(count), context.Queue()
    workers = [
        context.Process(target=_allocate, args=(str(tmp_path), barrier, results))
        for _ in range(count)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    versions = sorted(results.get(timeout=10) for _ in range(count))
    assert versions == list(range(count))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"version_{n}" for n in versions)


@pytest.mark.slow
def test_resuming_a_sweep_member_continues_it_not_the_newest_run(in_workdir, capsys):
    """The issue's case: two runs of one config with different --model.lr; run A crashed,
    run B is newer. ``--ckpt_path last`` with A's values continues A; B is untouched."""
    crash = write_callbacks(
        in_workdir / "crash.yaml", checkpoint_every(2), fault("RaiseAtStep", step=3)
    )
    plain = write_callbacks(in_workdir / "plain.yaml", checkpoint_every(2))
    a_args = [*config_args("fixed.yaml"), "--model.lr", "1e-3"]
    b_args = [*config_args("fixed.yaml"), "--model.lr", "2e-3"]
    with pytest.raises(Exception, match="crash before step 3"):
        run_cli(["fit", *a_args, "--config", str(crash)], capsys)
    assert run_cli(["fit", *b_args, "--config", str(plain)], capsys)[0] == 0
    a, b = in_workdir / "runs/fixed/version_0", in_workdir / "runs/fixed/version_1"
    b_files = {p: p.stat().st_mtime_ns for p in b.rglob("*")}

    code, err = run_cli(["fit", *a_args, "--config", str(plain), "--ckpt_path", "last"], capsys)
    assert code == 0, err
    assert torch.load(a / "checkpoints/last.ckpt", weights_only=True)["global_step"] == 4
    assert (a / "config.resume-2.yaml").is_file()
    assert {p: p.stat().st_mtime_ns for p in b.rglob("*")} == b_files, "B was not touched"


@pytest.mark.slow
def test_two_resumes_started_at_once_one_runs_the_other_gets_one_line(
    in_workdir, capsys, fork_server
):
    """Real concurrent processes on one run folder: the loser writes nothing (no config, no
    purge marker hiding the winner's scalars) and says who holds the run."""
    tmp_path = in_workdir
    crash = write_callbacks(
        tmp_path / "crash.yaml", checkpoint_every(2), fault("RaiseAtStep", step=3)
    )
    with pytest.raises(Exception, match="crash before step 3"):
        run_cli(["fit", *config_args("fixed.yaml", crash)], capsys)
    run = tmp_path / "runs/fixed/version_0"
    events_before = set(run.glob("events.out.tfevents.*"))

    release = tmp_path / "release"  # the winner waits at train start until the loser is out
    slow = write_callbacks(
        tmp_path / "slow.yaml",
        checkpoint_every(2),
        fault("WaitAtTrainStart", release=str(release)),
    )
    args = ["fit", *config_args("fixed.yaml", slow), "--ckpt_path", "last"]
    both = {}  # the file of its stderr -> pid
    for name in ("first", "second"):
        _, stderr = fork_server.start(tmp_path, *args, name=name)
        both[stderr] = fork_server.pid
    while all(fork_server.poll(pid) is None for pid in both.values()):  # one of them waits
        time.sleep(0.05)
    release.touch()
    codes = {pid: fork_server.kill_after(600, pid) for pid in both.values()}
    errs = {pid: stderr.read_text() for stderr, pid in both.items()}
    assert sorted(codes.values()) == [0, 2], [e[-2000:] for e in errs.values()]
    loser = next(errs[pid] for pid, code in codes.items() if code == 2)
    winner = next(pid for pid, code in codes.items() if code == 0)
    lines = errors(loser.splitlines())
    assert len(lines) == 1 and f"in use by process {winner}" in lines[0]
    assert not tracebacks(loser)
    assert sorted(p.name for p in run.glob("config.resume-*.yaml")) == ["config.resume-2.yaml"]
    assert len(set(run.glob("events.out.tfevents.*")) - events_before) == 1, "one purge marker"
    assert torch.load(run / "checkpoints/last.ckpt", weights_only=True)["global_step"] == 4


@pytest.mark.slow
def test_two_plain_fits_into_one_save_dir_at_once_each_get_their_own_run(
    in_workdir, capsys, fork_server
):
    """Item 13 of issue 24: two ``fit`` of one config started together. Each takes its own
    ``version_N`` (atomically) and lock, and both finish whole; a later ``--ckpt_path last``
    is refused as ambiguous, naming both, instead of guessing."""
    plain = write_callbacks(in_workdir / "plain.yaml", checkpoint_every(2))
    args = ["fit", *config_args("fixed.yaml", plain)]
    both = {}  # the file of its stderr -> pid
    for name in ("first", "second"):
        _, stderr = fork_server.start(in_workdir, *args, name=name)
        both[stderr] = fork_server.pid
    codes = [fork_server.kill_after(600, pid) for pid in both.values()]
    assert codes == [0, 0], [stderr.read_text()[-2000:] for stderr in both]
    runs = sorted((in_workdir / "runs/fixed").iterdir())
    assert [r.name for r in runs] == ["version_0", "version_1"]
    for run in runs:
        assert torch.load(run / "checkpoints/last.ckpt", weights_only=True)["global_step"] == 4
        assert (run / "config.yaml").is_file() and len(list(run.glob("events.*"))) == 1
    code, err = run_cli([*args, "--ckpt_path", "last"], capsys)
    assert code == 2 and len(errors(err)) == 1 and "is ambiguous" in err[-1], err
    assert all(str(run.relative_to(in_workdir)) in err[-1] for run in runs), err[-1]


@pytest.mark.slow
def test_a_resume_that_fails_before_it_trains_leaves_the_run_as_it_was(
    finished_run, in_workdir, capsys
):
    """Issue 47: a resume that fails after its start-up (its config.resume-<step>.yaml and an
    event file written) but before it trained a step leaves no trace in the run: a failed
    resume is not a part of the run, and its event file's purge marker would hide the run's
    steps after the checkpoint."""
    run = copy_run(finished_run, in_workdir)
    before = sorted(p.name for p in run.iterdir())
    crash = write_callbacks(
        in_workdir / "crash.yaml", checkpoint_every(2), fault("RaiseAtStep", step=4), max_steps=6
    )
    args = ["fit", "--config", str(run / "config.yaml"), "--config", str(crash)]
    with pytest.raises(Exception, match="crash before step 4"):
        run_cli([*args, "--ckpt_path", str(run)], capsys)
    assert sorted(p.name for p in run.iterdir()) == before
    # a resume that trained a step keeps its config and events
    crash = write_callbacks(
        in_workdir / "crash.yaml", checkpoint_every(2), fault("RaiseAtStep", step=5), max_steps=6
    )
    with pytest.raises(Exception, match="crash before step 5"):
        run_cli([*args, "--ckpt_path", str(run)], capsys)
    added = sorted(set(p.name for p in run.iterdir()) - set(before))
    assert len(added) == 2 and added[0] == "config.resume-4.yaml", added
    assert added[1].startswith("events.out.tfevents.")
