"""The one atomic writer: whole files or none, the user's umask, one line on a full disk, and
no temporary file outliving its writer."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from lit_sparse.errors import StorageError
from lit_sparse.io import atomic as atomic_files
from lit_sparse.io.atomic import (
    AtomicFile,
    AtomicFolder,
    remove_stale_temporaries,
    write_json,
    write_text,
)


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


# ------------------------------------------------------------------------- AtomicFolder
def tree(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-renames"])
def test_a_folder_is_replaced_as_a_whole(tmp_path, monkeypatch, exchange):
    from lit_sparse.io import atomic

    if not exchange:
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    target = tmp_path / "export"
    with AtomicFolder(target) as folder:
        write_text(folder.temporary / "a.txt", "old a\n")
        write_text(folder.temporary / "b.txt", "old b\n")
    assert tree(target) == {"a.txt": b"old a\n", "b.txt": b"old b\n"}
    with AtomicFolder(target) as folder:
        assert not (folder.temporary / "a.txt").exists()  # built apart from the old folder
        write_text(folder.temporary / "a.txt", "new a\n")
    assert tree(target) == {"a.txt": b"new a\n"}, "the old folder's files all went at once"
    assert [p.name for p in tmp_path.iterdir()] == ["export"], "no temporary folder is left"


@pytest.mark.parametrize("step", ["write", "fsync", "swap", "second rename"])
def test_a_failure_at_any_step_leaves_the_old_folder_and_no_partial_one(
    tmp_path, monkeypatch, step
):
    from lit_sparse.io import atomic

    target = tmp_path / "export"
    with AtomicFolder(target) as folder:
        write_text(folder.temporary / "a.txt", "old\n")
    full = OSError(errno.ENOSPC, "No space left on device")

    def fail(*args, **kwargs):
        raise full

    if step == "fsync":
        monkeypatch.setattr(atomic, "_fsync_tree", fail)
    elif step == "swap":
        monkeypatch.setattr(atomic, "_exchange", fail)
    elif step == "second rename":
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
        real = os.rename
        monkeypatch.setattr(
            atomic.os, "rename", lambda a, b: fail() if ".build-" in str(a) else real(a, b)
        )
    with pytest.raises(StorageError) as caught, AtomicFolder(target) as folder:
        if step == "write":
            monkeypatch.setattr(atomic.os, "fsync", fail)
        write_text(folder.temporary / "a.txt", "new\n")
    message = str(caught.value)
    assert "\n" not in message and "the disk is full" in message and str(target) in message
    assert ".build-" not in message, "named by the target, not the temporary folder"
    monkeypatch.undo()
    assert tree(target) == {"a.txt": b"old\n"}
    assert [p.name for p in tmp_path.iterdir()] == ["export"]


def test_a_first_folder_on_a_full_disk_leaves_nothing(tmp_path, monkeypatch):
    from lit_sparse.io import atomic

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(StorageError), AtomicFolder(tmp_path / "export") as folder:
        write_text(folder.temporary / "a.txt", "x\n")
    assert list(tmp_path.iterdir()) == []


def test_a_killed_writers_leftovers_are_cleared_and_a_cut_swap_is_undone(tmp_path):
    """A writer killed between the two renames of a swap left the old folder aside and no
    target: the next writer puts it back before it starts; a killed build is removed."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old = tmp_path / f".export.old-{dead.pid}-abcd1234"
    build = tmp_path / f".export.build-{dead.pid}-abcd1235"
    other = tmp_path / f".other.build-{dead.pid}-abcd1236"
    for folder in (old, build, other):
        folder.mkdir()
        (folder / "a.txt").write_text(folder.name)
    with AtomicFolder(tmp_path / "export") as folder:
        assert tree(tmp_path / "export") == {"a.txt": old.name.encode()}, "put back first"
        write_text(folder.temporary / "a.txt", "new\n")
    assert tree(tmp_path / "export") == {"a.txt": b"new\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["export", other.name])


def test_a_read_only_parent_is_one_line(tmp_path, monkeypatch):
    from lit_sparse.io import atomic

    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(atomic.Path, "mkdir", read_only)
    with pytest.raises(StorageError) as caught:
        AtomicFolder(tmp_path / "ro" / "new_sub")
    message = str(caught.value)
    assert "\n" not in message and "read-only" in message and "cannot create the folder" in message
