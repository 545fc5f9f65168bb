"""Run locks: an exclusive ``flock`` on ``<run>/.lock`` (the kernel drops it), naming the holder."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from lit_sparse.errors import RunInUseError
from lit_sparse.io.atomic import storage_error

try:
    import fcntl
except ImportError:  # not POSIX: runs are not locked
    fcntl = None

LOCK_NAME = ".lock"

_HELD: dict[str, RunLock] = {}
"""Locks this process holds, by resolved folder."""


def is_global_rank_zero() -> bool:
    """Whether this process is its job's first (no launcher or scheduler gave it another rank)."""
    ranks = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
    rank = next((os.environ[key] for key in ranks if key in os.environ), "0")  # the first set
    nodes = (os.environ.get(key, "0") for key in ("NODE_RANK", "GROUP_RANK"))
    return int(rank) == 0 and all(node == "0" for node in nodes)


def _holder_text(info: dict[str, Any]) -> str:
    if not info:
        return "another process"
    return (
        f"process {info.get('pid', '?')} on {info.get('host', '?')} "
        f"({info.get('command', '?')}, started {info.get('started', '?')})"
    )


class RunLock:
    """An exclusive lock on a run folder, held until :meth:`release` or the process ends."""

    def __init__(self, folder: Path, fd: int):
        self.folder, self._fd = folder, fd
        self._holders = 1

    @classmethod
    def acquire(cls, folder: str | os.PathLike, command: str = "fit") -> RunLock:
        """Lock ``folder`` (created if missing), or raise RunInUseError naming the holder."""
        folder = Path(folder)
        key = str(folder.resolve())
        if key in _HELD:  # held already by this process: one more holder of the same lock
            _HELD[key]._holders += 1
            return _HELD[key]
        path = folder / LOCK_NAME
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as err:
            raise storage_error(path, err, "lock") from None
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunInUseError(
                    f"{folder} is in use by {_holder_text(holder)}: two processes must not "
                    "write one run; wait for it to end or stop it, then run the command again"
                ) from None
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command}
        info["started"] = datetime.datetime.now().isoformat(timespec="seconds")
        with contextlib.suppress(OSError):  # the lock holds even if its note cannot be written
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        lock = cls(folder, fd)
        _HELD[key] = lock
        return lock

    def release(self, everyone: bool = False) -> None:
        """Drop this holder's claim (``everyone``: all); the last closes the descriptor, once."""
        self._holders = 0 if everyone else self._holders - 1
        if self._holders > 0 or self._fd is None:
            return
        key = str(self.folder.resolve())
        if _HELD.get(key) is self:
            del _HELD[key]
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.close(fd)


def release_all() -> None:
    """Release every run lock this process holds (when it goes on: a notebook, a test)."""
    for lock in list(_HELD.values()):
        lock.release(everyone=True)


def _read_holder(fd: int, wait_s: float = 0.5) -> dict[str, Any]:
    """The holder's note, re-read for up to ``wait_s`` seconds while empty or partial."""
    deadline = time.monotonic() + wait_s
    while True:
        with contextlib.suppress(OSError, ValueError):
            found = json.loads(os.pread(fd, 4096, 0).decode())
            if isinstance(found, dict):
                return found
        if time.monotonic() >= deadline:
            return {}
        time.sleep(0.01)


def lock_holder(folder: str | os.PathLike) -> str | None:
    """Who holds ``folder``'s lock (None: nobody, or this process)."""
    folder = Path(folder)
    if fcntl is None or str(folder.resolve()) in _HELD or not (folder / LOCK_NAME).is_file():
        return None
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder_text(_read_holder(fd))
    finally:
        os.close(fd)
    return None


def holds_lock(folder: str | os.PathLike) -> bool:
    """Whether this process holds ``folder``'s lock."""
    return str(Path(folder).resolve()) in _HELD
