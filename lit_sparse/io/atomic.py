"""Atomic file writes: written beside the target as ``.<name>.tmp-<pid>-<random>``, fsynced and
renamed over it, so a reader sees the old file or the new one; on an error the old file is kept
and a storage error is one :class:`~lit_sparse.errors.StorageError` line naming the path."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import IO, Any

from lit_sparse.errors import StorageError, error_chain

_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]+$")

_STORAGE_ERRNOS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def storage_error(path: str | os.PathLike, err: OSError, what: str = "write") -> StorageError:
    """One line for a failed write: the path, the reason and that nothing old was lost."""
    reason = _STORAGE_ERRNOS.get(err.errno) or err.strerror or str(err)
    return StorageError(
        f"cannot {what} {str(path)!r}: {reason} (the previous file, if any, is unchanged; "
        "free space or fix the permissions and run the command again)"
    )


_ZIP_WRITER_STOPPED = re.compile(r"inline_container\.cc.*unexpected pos")


def stopped_short(err: BaseException) -> bool:
    """A write that stopped short with no errno (numpy, torch's zip writer): a lost ENOSPC."""
    text = str(err)
    if isinstance(err, OSError):
        return err.errno is None and " requested and " in text and text.endswith("written")
    return isinstance(err, RuntimeError) and _ZIP_WRITER_STOPPED.search(text) is not None


def storage_failure(
    err: BaseException | None, path: str | os.PathLike | None = None
) -> StorageError | None:
    """The full disk, read-only file system or missing permission behind ``err`` as one
    StorageError line naming ``path`` (default: the failed file); None if none."""
    for cause in error_chain(err):
        if isinstance(cause, StorageError):
            return cause
        if stopped_short(cause):
            return storage_error(path or "a file", OSError(errno.ENOSPC, "No space left"))
        if isinstance(cause, OSError) and cause.errno in _STORAGE_ERRNOS:
            return storage_error(path or cause.filename or "a file", cause)
    return None


def _fsync(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Make renames in folder ``path`` durable (a no-op where folders cannot be fsynced)."""
    with contextlib.suppress(OSError):
        _fsync(path)


def temporary_name(path: Path, kind: str = "tmp") -> Path:
    """A new name beside ``path`` for this process's temporary file (``kind`` "tmp") or folder."""
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")


class AtomicFile:
    """A file that appears at ``path`` whole on :meth:`commit`, or not at all; a context manager
    (commit on success, abort on an exception), or call :meth:`commit` / :meth:`abort`."""

    def __init__(self, path: str | os.PathLike, text: bool = False):
        self.path = Path(path)
        self.temporary = temporary_name(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as err:
            raise storage_error(self.path, err) from None
        self.file: IO = os.fdopen(fd, "w", encoding="utf-8") if text else os.fdopen(fd, "wb")

    def write(self, data) -> None:
        try:
            self.file.write(data)
        except OSError as err:
            self.abort()
            raise storage_error(self.path, err) from None

    def commit(self) -> Path:
        """Flush, fsync, rename over the target and fsync the folder."""
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.temporary, self.path)
        except OSError as err:
            self.abort()
            raise storage_error(self.path, err) from None
        fsync_dir(self.path.parent)
        return self.path

    def abort(self) -> None:
        """Close and remove the temporary file; the target is untouched."""
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(OSError):
            os.unlink(self.temporary)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """``data`` to ``path``, atomically."""
    with AtomicFile(path) as handle:
        handle.write(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """``text`` (UTF-8) to ``path``, atomically."""
    with AtomicFile(path, text=True) as handle:
        handle.write(text)
    return Path(path)


def write_json(path: str | os.PathLike, data: Any) -> Path:
    """``data`` as indented JSON, atomically (non-finite floats must already be None)."""
    return write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale_temporaries(folder: str | os.PathLike, idle_s: float = 60.0) -> list[Path]:
    """Delete (and return) the temporaries in ``folder`` a killed writer left, idle ``idle_s``."""
    removed: list[Path] = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    now = time.time()
    for candidate in folder.iterdir():
        match = _TEMPORARY.match(candidate.name)
        if not match or int(match["pid"]) == os.getpid() or _alive(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):
            if now - candidate.stat().st_mtime >= idle_s:
                candidate.unlink()
                removed.append(candidate)
    return removed


# ------------------------------------------------------------------------------- folders
_FOLDER_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<kind>build|old)-(?P<pid>\d+)-[0-9a-f]+$")
_RENAME_EXCHANGE = 2  # linux/fs.h: swap two paths in one step
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` atomically (Linux ``renameat2``); False where that is not possible."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder``, then every folder, deepest first."""
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            _fsync(os.path.join(root, name))
        fsync_dir(root)


class AtomicFolder:
    """A folder that replaces ``path`` whole on :meth:`commit` (files go into :attr:`temporary`),
    or not at all; a context manager. The swap is an atomic exchange on Linux, else two renames;
    a killed writer's leftovers are cleared (or put back) when the next starts."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._clear_leftovers()
        self.temporary = temporary_name(self.path, "build")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.temporary.mkdir()
        except OSError as err:
            target = self.path if self.path.parent.is_dir() else self.path.parent
            raise storage_error(target, err, "create the folder") from None

    def _clear_leftovers(self) -> None:
        parent = self.path.parent
        if not parent.is_dir():
            return
        for candidate in sorted(parent.iterdir()):
            match = _FOLDER_TEMPORARY.match(candidate.name)
            if not match or match["name"] != self.path.name or _alive(int(match["pid"])):
                continue
            with contextlib.suppress(OSError):
                if match["kind"] == "old" and not self.path.exists():
                    os.rename(candidate, self.path)  # a swap cut between its two renames
                else:
                    shutil.rmtree(candidate)

    def commit(self) -> Path:
        """fsync the temporary folder's files, swap it in for ``path``, remove the old one."""
        try:
            _fsync_tree(self.temporary)
            old = None
            if not self.path.exists():
                os.rename(self.temporary, self.path)
            elif _exchange(self.temporary, self.path):
                old = self.temporary  # now holds the previous folder
            else:
                old = temporary_name(self.path, "old")
                os.rename(self.path, old)
                try:
                    os.rename(self.temporary, self.path)
                except OSError:
                    os.rename(old, self.path)
                    raise
        except OSError as err:
            self.abort()
            raise storage_error(self.path, err) from None
        fsync_dir(self.path.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.path

    def abort(self) -> None:
        """Remove the temporary folder; ``path`` is untouched."""
        shutil.rmtree(self.temporary, ignore_errors=True)

    def __enter__(self) -> AtomicFolder:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.commit()
            return
        self.abort()
        failure = storage_failure(value) if isinstance(value, OSError) else None
        if failure is None:
            return
        if not isinstance(value, StorageError) and not value.filename:  # a write of a library's
            failure = storage_error(self.path, value)
        # named by the folder the user asked for, not the temporary one
        raise StorageError(str(failure).replace(str(self.temporary), str(self.path))) from None
