"""Checkpoint files: atomic writes, readable-or-refused loads, finding a run's last one.

Lightning writes a checkpoint through a temporary file in the system temp folder and moves it
into place, which is a copy (not atomic) when the two are on different file systems, and
never fsyncs. ``AtomicCheckpointIO`` writes next to the target, fsyncs and renames, so a
crash leaves either the old file or the new one, never a truncated one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from .atomic_files import AtomicFile, storage_error
from .errors import CheckpointError


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save to a temporary file beside ``path``, fsync, then rename over it."""
    with AtomicFile(path) as handle:
        try:
            torch.save(obj, handle.file)
        except OSError as err:  # a full disk part-way through
            raise storage_error(path, err) from None


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoint IO whose saves are atomic on local file systems."""

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if storage_options is not None or "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        atomic_torch_save(checkpoint, path)


def read_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a checkpoint's dict on the CPU (memory-mapped), or say clearly why not."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"ckpt_path={str(path)!r}: no such file")
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # truncated zip, not a checkpoint, unpicklable content
        others = sorted(p.name for p in path.parent.glob("*.ckpt") if p != path)
        hint = f"; other checkpoints there: {', '.join(others)}" if others else ""
        raise CheckpointError(
            f"ckpt_path={str(path)!r} cannot be read as a checkpoint, so it is not used "
            f"(truncated or corrupt: {type(err).__name__}: {str(err).splitlines()[0]}){hint}"
        ) from None


def find_last_checkpoint(experiment_dir: str | os.PathLike) -> Path | None:
    """The newest ``version_*/checkpoints/last.ckpt`` under a logger's save_dir/name."""
    candidates = Path(experiment_dir).glob("*/checkpoints/last.ckpt")
    found = [p for p in candidates if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def differences(expected: Any, found: Any, prefix: str) -> list[str]:
    """'key: a != b' lines for nested dicts (``expected`` from the config)."""
    if isinstance(expected, dict) and isinstance(found, dict):
        lines = []
        for key in sorted(set(expected) | set(found)):
            lines += differences(expected.get(key), found.get(key), f"{prefix}.{key}")
        return lines
    return [] if expected == found else [f"{prefix}: config {expected!r}, checkpoint {found!r}"]
