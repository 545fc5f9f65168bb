"""Run folders: allocated atomically, locked while a process writes them, and read back.

A run is ``<save_dir>/<name>/version_N`` (the TensorBoard logger's folder). Two processes
must never write one run: a fit holds an exclusive lock on the run's ``.lock`` file for as
long as it lives (``flock``: the kernel drops it when the process ends, SIGKILL included, so a
lock never outlives its holder), and the file names the holder for the one-line refusal the
second process gets. A new run's ``version_N`` is created with ``mkdir``, which fails if
another process created it first, so two runs started together never share a number.
Evaluations of a run write under ``<run>/evals/`` (never a ``version_N`` of their own).
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import re
import socket
from pathlib import Path
from typing import Any

from lit_sparse.atomic_files import storage_error
from lit_sparse.config_files import load_yaml
from lit_sparse.errors import ConfigError, RunInUseError

try:
    import fcntl
except ImportError:  # not POSIX: runs are not locked
    fcntl = None

__all__ = [
    "LOCK_NAME",
    "RunLock",
    "allocate_folder",
    "experiment_runs",
    "is_global_rank_zero",
    "lock_holder",
    "new_eval_folder",
    "new_version",
    "release_all",
    "resume_config_name",
    "run_checkpoint",
    "run_config",
]

LOCK_NAME = ".lock"
VERSION = re.compile(r"^version_(\d+)$")
RESUME_CONFIG = re.compile(r"^config\.resume-(\d+)(?:-(\d+))?\.yaml$")

_HELD: dict[str, RunLock] = {}
"""Locks this process holds, by resolved folder."""


def is_global_rank_zero() -> bool:
    """Whether this process is the first of its job (also before any process group exists):
    no launcher or scheduler has given it another rank."""
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):
        if os.environ.get(key) is not None:
            if int(os.environ[key]) != 0:
                return False
            break
    return all(os.environ.get(key, "0") == "0" for key in ("NODE_RANK", "GROUP_RANK"))


def _holder_text(info: dict[str, Any]) -> str:
    if not info:
        return "another process"
    started = info.get("started", "?")
    return (
        f"process {info.get('pid', '?')} on {info.get('host', '?')} "
        f"({info.get('command', '?')}, started {started})"
    )


class RunLock:
    """An exclusive lock on a run folder, held until :meth:`release` or the process ends."""

    def __init__(self, folder: Path, fd: int):
        self.folder, self._fd = folder, fd

    @classmethod
    def acquire(cls, folder: str | os.PathLike, command: str = "fit") -> RunLock:
        """Lock ``folder`` (created if missing), or raise RunInUseError naming the holder."""
        folder = Path(folder)
        key = str(folder.resolve())
        if key in _HELD:
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
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started": datetime.datetime.now().isoformat(timespec="seconds"),
        }
        with contextlib.suppress(OSError):  # the lock holds even if its note cannot be written
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        lock = cls(folder, fd)
        _HELD[key] = lock
        return lock

    def release(self) -> None:
        _HELD.pop(str(self.folder.resolve()), None)
        with contextlib.suppress(OSError):
            os.close(self._fd)


def release_all() -> None:
    """Release every run lock this process holds (a command's end, when the process goes
    on: a notebook, a test)."""
    for lock in list(_HELD.values()):
        lock.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        return json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        return {}


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


def allocate_folder(parent: Path, names) -> Path:
    """Create the first folder of ``names`` (an iterable of names) that does not exist yet
    under ``parent``; ``mkdir`` is atomic, so two processes never get the same one."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise storage_error(parent, err, "create the folder") from None
    for name in names:
        path = parent / name
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as err:
            raise storage_error(path, err, "create the folder") from None
        return path
    raise ConfigError(f"{parent}: no free folder name")  # an endless iterable never ends here


def _version_number(path: Path) -> int:
    match = VERSION.match(path.name)
    return int(match.group(1)) if match else -1


def experiment_runs(experiment: str | os.PathLike) -> list[Path]:
    """The ``version_N`` folders of an experiment, in order of N."""
    experiment = Path(experiment)
    if not experiment.is_dir():
        return []
    found = [p for p in experiment.iterdir() if p.is_dir() and VERSION.match(p.name)]
    return sorted(found, key=_version_number)


def new_version(experiment: str | os.PathLike) -> tuple[int, Path]:
    """Create the experiment's next ``version_N`` (one more than the largest there)."""
    experiment = Path(experiment)
    runs = experiment_runs(experiment)
    start = _version_number(runs[-1]) + 1 if runs else 0
    path = allocate_folder(experiment, (f"version_{n}" for n in itertools.count(start)))
    return _version_number(path), path


def new_eval_folder(parent: str | os.PathLike, command: str, step: int | None) -> Path:
    """``<parent>/evals/<command>-step<k>`` (``-2``, ``-3``... when run again)."""
    stem = command if step is None else f"{command}-step{step}"
    names = itertools.chain([stem], (f"{stem}-{n}" for n in itertools.count(2)))
    return allocate_folder(Path(parent) / "evals", names)


def run_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """``checkpoints/last.ckpt`` of a run, else its newest checkpoint, else None."""
    folder = Path(run_dir) / "checkpoints"
    if (folder / "last.ckpt").is_file():
        return folder / "last.ckpt"
    found = sorted(folder.glob("*.ckpt"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _resume_key(path: Path) -> tuple[int, int]:
    match = RESUME_CONFIG.match(path.name)
    return (int(match.group(1)), int(match.group(2) or 1)) if match else (-1, 0)


def run_config(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The config a run was last started with: its newest ``config.resume-<step>.yaml``,
    else ``config.yaml`` (None: neither is readable)."""
    run_dir = Path(run_dir)
    resumes = sorted(
        (p for p in run_dir.glob("config.resume-*.yaml") if RESUME_CONFIG.match(p.name)),
        key=_resume_key,
    )
    for path in [*reversed(resumes), run_dir / "config.yaml"]:
        if path.is_file():
            with contextlib.suppress(ConfigError):
                return load_yaml(path, "run config")
    return None


def resume_config_name(run_dir: str | os.PathLike, step: int) -> str:
    """A free name for the config of a resume at ``step``: ``config.resume-<step>.yaml``, or
    ``config.resume-<step>-<n>.yaml`` when the run was resumed from that step before (a
    second crash before the next checkpoint)."""
    run_dir = Path(run_dir)
    name, n = f"config.resume-{step}.yaml", 2
    while (run_dir / name).exists():
        name, n = f"config.resume-{step}-{n}.yaml", n + 1
    return name
