"""Run locks (lit_sparse/runs/locks.py): one exclusive lock per run folder, the refusal naming
its holder, a lock taken twice by one process held until both release, and which process is
its job's first. Locks held by real concurrent processes: tests/reliability/test_runs.py."""

from __future__ import annotations

import fcntl
import json
import os
import threading

import pytest

from lit_sparse.errors import RunInUseError
from lit_sparse.runs import RunLock, holds_lock, lock_holder
from lit_sparse.runs.locks import LOCK_NAME, is_global_rank_zero, release_all


def held_elsewhere(folder, note: dict | None) -> int:
    """The folder's lock taken through another open file (to flock, another holder)."""
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if note is not None:
        os.pwrite(fd, json.dumps(note).encode(), 0)
    return fd


def test_a_held_folder_is_refused_in_one_line_naming_the_holder(tmp_path):
    note = {"pid": 4242, "host": "elsewhere", "command": "fit", "started": "2026-01-02T03:04:05"}
    fd = held_elsewhere(tmp_path, note)
    try:
        holder = "process 4242 on elsewhere (fit, started 2026-01-02T03:04:05)"
        assert lock_holder(tmp_path) == holder
        with pytest.raises(RunInUseError) as caught:
            RunLock.acquire(tmp_path)
        assert str(caught.value) == (
            f"{tmp_path} is in use by {holder}: two processes must not write one run; wait for "
            "it to end or stop it, then run the command again"
        )
    finally:
        os.close(fd)
    assert lock_holder(tmp_path) is None  # released with its file


def test_the_lock_notes_this_process_and_is_no_other_holder(tmp_path):
    folder = tmp_path / "new" / "run"
    RunLock.acquire(folder, "validate")
    try:
        note = json.loads((folder / LOCK_NAME).read_text())
        assert (note["pid"], note["command"]) == (os.getpid(), "validate")
        assert holds_lock(folder) and lock_holder(folder) is None
    finally:
        release_all()
    assert not holds_lock(folder)
    assert lock_holder(tmp_path) is None  # no lock file at all


def test_a_holder_whose_note_is_not_written_yet_is_still_named(tmp_path):
    """A holder writes its note just after taking the lock; a second process that tries the
    lock in between read an empty note and said "another process" (seen once in
    test_two_resumes_started_at_once_one_runs_the_other_gets_one_line). It reads again."""
    fd = os.open(tmp_path / ".lock", os.O_RDWR | os.O_CREAT, 0o666)  # a holder, note unwritten
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    note = {"pid": 4242, "host": "elsewhere", "command": "fit", "started": "now"}
    late = threading.Timer(0.1, os.pwrite, (fd, json.dumps(note).encode(), 0))
    late.start()
    try:
        with pytest.raises(RunInUseError, match="in use by process 4242 on elsewhere"):
            RunLock.acquire(tmp_path)
    finally:
        late.join()
        os.close(fd)


def test_a_lock_taken_twice_holds_until_both_release_and_closes_its_file_once(tmp_path):
    """A run folder locked again by the process that holds it (a cleanup inside a fit) is the
    same lock: the inner release leaves it held. Released, its descriptor is closed once:
    releasing again must not close a file opened since under the same number (the test
    suite's fork server lost its pipe that way)."""
    outer = RunLock.acquire(tmp_path, "fit")
    inner = RunLock.acquire(tmp_path, "remove a failed start")
    assert inner is outer
    inner.release()
    assert holds_lock(tmp_path)
    outer.release()
    assert not holds_lock(tmp_path)
    read, write = os.pipe()  # the lowest free number: most likely the lock's
    try:
        outer.release()
        os.write(write, b"still open")
        assert os.read(read, 10) == b"still open"
    finally:
        os.close(read)
        os.close(write)


RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK", "NODE_RANK")
RANK_VARIABLES += ("GROUP_RANK",)


@pytest.mark.parametrize(
    ("env", "first"),
    [
        ({}, True),
        ({"RANK": "1"}, False),
        ({"RANK": "0", "LOCAL_RANK": "1"}, True),  # the first variable set decides
        ({"SLURM_PROCID": "3"}, False),
        ({"LOCAL_RANK": "0", "NODE_RANK": "1"}, False),
        ({"GROUP_RANK": "2"}, False),
    ],
)
def test_the_first_process_of_a_job(monkeypatch, env, first):
    for key in (
        "RANK",
        "LOCAL_RANK",
        "SLURM_PROCID",
        "JSM_NAMESPACE_RANK",
        "NODE_RANK",
        "GROUP_RANK",
    ):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert is_global_rank_zero() is first
