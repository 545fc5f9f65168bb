"""The atomic writer's pieces (lit_sparse/io/atomic.py): a storage error as one line per
errno, a write that stopped short recognised as a full disk, the error behind a library's
wrapping, JSON without NaN, and a temporary name beside the target. Whole files and folders
under failures: tests/reliability/test_atomic_files.py (docs/reliability.md cites it)."""

from __future__ import annotations

import errno
import json
import math
import os

import pytest

from lit_sparse.errors import StorageError
from lit_sparse.io.atomic import (
    AtomicFile,
    stopped_short,
    storage_error,
    storage_failure,
    temporary_name,
    write_bytes,
    write_json,
)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EDQUOT, "the disk quota is exceeded"),
        (errno.EROFS, "the file system is read-only"),
        (errno.EACCES, "permission denied"),
        (errno.EIO, "Input/output error"),  # any other errno: its own words
    ],
)
def test_a_storage_error_is_one_line_naming_the_path_and_the_reason(code, reason):
    message = str(storage_error("out/a.json", OSError(code, os.strerror(code)), "replace"))
    assert message == (
        f"cannot replace 'out/a.json': {reason} (the previous file, if any, is unchanged; "
        "free space or fix the permissions and run the command again)"
    )


def test_a_write_that_stopped_short_is_a_lost_full_disk():
    assert stopped_short(OSError("100 requested and 12 written"))  # numpy's tofile
    assert stopped_short(
        RuntimeError("[enforce fail at inline_container.cc:778] . unexpected pos 64 vs 0")
    )
    assert not stopped_short(OSError(errno.EIO, "100 requested and 12 written"))
    assert not stopped_short(RuntimeError("unexpected pos"))


def wrapped(cause: BaseException) -> RuntimeError:
    try:
        raise cause
    except BaseException as err:
        try:
            raise RuntimeError("the checkpoint callback failed") from err
        except RuntimeError as outer:
            return outer


def test_the_storage_failure_behind_a_librarys_error_names_the_file():
    full = OSError(errno.ENOSPC, "No space left on device", "run/last.ckpt")
    assert "cannot write 'run/last.ckpt': the disk is full" in str(storage_failure(wrapped(full)))
    named = storage_failure(wrapped(full), path="run")
    assert str(named).startswith("cannot write 'run': the disk is full")
    short = storage_failure(wrapped(OSError("8 requested and 0 written")), path="x.bin")
    assert str(short).startswith("cannot write 'x.bin': the disk is full")
    ours = StorageError("cannot write 'a': permission denied")
    assert storage_failure(wrapped(ours)) is ours
    assert storage_failure(wrapped(FileNotFoundError(errno.ENOENT, "no"))) is None
    assert storage_failure(None) is None


def test_json_is_indented_and_refuses_nan(tmp_path):
    path = write_json(tmp_path / "r.json", {"loss": 1.5, "steps": [1, 2]})
    assert path.read_text() == json.dumps({"loss": 1.5, "steps": [1, 2]}, indent=2) + "\n"
    with pytest.raises(ValueError, match="Out of range float values"):
        write_json(path, {"loss": math.nan})
    assert json.loads(path.read_text())["loss"] == 1.5  # the previous file is kept
    assert write_bytes(tmp_path / "sub" / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"


def test_a_temporary_is_hidden_beside_its_target_and_removed_on_abort(tmp_path):
    name = temporary_name(tmp_path / "last.ckpt")
    assert name.parent == tmp_path and name.name.startswith(f".last.ckpt.tmp-{os.getpid()}-")
    assert temporary_name(tmp_path / "last.ckpt") != name
    handle = AtomicFile(tmp_path / "a.txt", text=True)
    handle.write("partial")
    handle.abort()
    assert list(tmp_path.iterdir()) == []
