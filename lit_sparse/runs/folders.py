"""Run folders <save_dir>/<name>/version_N: made atomically, read back, failed starts cleared."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
from pathlib import Path
from typing import Any

from lit_sparse.errors import ConfigError
from lit_sparse.io.atomic import storage_error
from lit_sparse.io.yaml_files import load_yaml
from lit_sparse.legacy import translate
from lit_sparse.runs.checkpoint_folders import is_checkpoint
from lit_sparse.runs.locks import RunLock

VERSION = re.compile(r"^version_(\d+)$")
RESUME_CONFIG = re.compile(r"^config\.resume-(\d+)(?:-(\d+))?\.yaml$")
_STARTED_FILES = re.compile(
    r"^(config(\.resume-\d+(-\d+)?)?\.yaml|hparams\.yaml|events\.out\.tfevents\..+|\.lock"
    r"|\..+\.tmp-\d+-[0-9a-f]+|\..+\.(build|old)-\d+-[0-9a-f]+)$"
)
"""What a fit writes in its run folder before its first checkpoint (a killed save's too)."""


def allocate_folder(parent: Path, names) -> Path:
    """Create the first of ``names`` that does not exist under ``parent`` (``mkdir`` is atomic)."""
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
    """A run's ``checkpoints/last.ckpt``, else its newest checkpoint, else None."""
    folder = Path(run_dir) / "checkpoints"
    if is_checkpoint(folder / "last.ckpt"):
        return folder / "last.ckpt"
    found = sorted(
        (p for p in folder.glob("*.ckpt") if is_checkpoint(p)), key=lambda p: p.stat().st_mtime
    )
    return found[-1] if found else None


def _resume_key(path: Path) -> tuple[int, int]:
    match = RESUME_CONFIG.match(path.name)
    return (int(match.group(1)), int(match.group(2) or 1)) if match else (-1, 0)


def run_config(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """A run's newest ``config.resume-<step>.yaml``, else ``config.yaml`` (None: unreadable)."""
    run_dir = Path(run_dir)
    resumes = sorted(
        (p for p in run_dir.glob("config.resume-*.yaml") if RESUME_CONFIG.match(p.name)),
        key=_resume_key,
    )
    for path in [*reversed(resumes), run_dir / "config.yaml"]:
        if path.is_file():
            with contextlib.suppress(ConfigError):
                return translate(load_yaml(path, "run config"), None)  # compared: no note
    return None


def resume_config_name(run_dir: str | os.PathLike, step: int) -> str:
    """A free name for a resume's config: ``config.resume-<step>.yaml``, else with ``-<n>``."""
    run_dir = Path(run_dir)
    name, n = f"config.resume-{step}.yaml", 2
    while (run_dir / name).exists():
        name, n = f"config.resume-{step}-{n}.yaml", n + 1
    return name


def has_checkpoint(run_dir: str | os.PathLike) -> bool:
    """Whether a run folder holds a checkpoint (something to resume from)."""
    return run_checkpoint(run_dir) is not None


def remove_failed_start(run_dir: str | os.PathLike) -> bool:
    """Remove a run folder left by a start that died before its first checkpoint (True), unless it
    holds anything else (False); RunInUseError when another process holds its lock."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir() or has_checkpoint(run_dir):
        return False
    lock = RunLock.acquire(run_dir, "remove a failed start")
    try:
        checkpoints = run_dir / "checkpoints"
        entries = [p for p in run_dir.iterdir() if p != checkpoints]
        stray = [p for p in entries if not (p.is_file() and _STARTED_FILES.match(p.name))]
        if checkpoints.is_dir():
            stray += [p for p in checkpoints.iterdir() if not _STARTED_FILES.match(p.name)]
        if stray:
            return False
        for path in entries:
            if path.name != ".lock":
                path.unlink()
        shutil.rmtree(checkpoints, ignore_errors=True)
    finally:
        lock.release()
    with contextlib.suppress(OSError):
        (run_dir / ".lock").unlink()
        run_dir.rmdir()
    return not run_dir.exists()
