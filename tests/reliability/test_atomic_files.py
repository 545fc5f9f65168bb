"""The one atomic writer: whole files or none, the user's umask, one line on a full disk, and
no temporary file outliving its writer."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from lit_sparse import atomic_files
from lit_sparse.errors import StorageError
from lit_sparse.io.atomic import AtomicFile, remove_stale_temporaries, write_json, write_text


def test_files_are_created_with_the_users_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        path = write_json(tmp_path / "result.json", {"a": 1})
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_full_disk_keeps_the_previous_file_and_says_so_in_one_line(tmp_path, monkeypatch):
    path = write_text(tmp_path / "table.md", "old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "fsync", full)
    with pytest.raises(StorageError) as caught:
        write_text(path, "new\n")
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "the disk is full" in message
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.md"], "no temporary file is left"


def test_an_exception_inside_the_block_leaves_the_target_untouched(tmp_path):
    path = write_text(tmp_path / "a.json", "{}\n")
    with pytest.raises(KeyError), AtomicFile(path, text=True) as handle:
        handle.write("partial")
        raise KeyError("boom")
    assert path.read_text() == "{}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_only_temporaries_of_dead_idle_writers_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".last.ckpt.tmp-{dead.pid}-abcd1234"
    ours = tmp_path / f".last.ckpt.tmp-{os.getpid()}-abcd1234"
    fresh = tmp_path / f".other.ckpt.tmp-{dead.pid}-beef0001"
    unrelated = tmp_path / "last.ckpt"
    for path in (stale, ours, fresh, unrelated):
        path.write_bytes(b"x")
    os.utime(stale, (1_000_000_000, 1_000_000_000))
    assert remove_stale_temporaries(tmp_path) == [stale]
    assert {p.name for p in tmp_path.iterdir()} == {ours.name, fresh.name, unrelated.name}
