"""Checkpoint files: atomic writes, readable-or-refused loads, finding a run's last one, and
what a run's checkpoints hold beyond Lightning's (the generators' states, the final step).

Lightning moves a checkpoint in from the system temp folder (a copy, not atomic, across file
systems) and never fsyncs; ``AtomicCheckpointIO`` writes beside the target, fsyncs and renames.
``torch.load`` does not check the zip records' CRC-32, so every read first verifies each record
(:func:`verify_checkpoint`, cached per inode, size and mtime) and refuses a damaged file in one
line naming the file and record. An FSDP2 run's checkpoint is a folder of shards
(:mod:`lit_sparse.runs.checkpoint_folders`), verified file by file and read whole on one process.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from lit_sparse.errors import CheckpointError, find_error
from lit_sparse.io.atomic import AtomicFile, storage_error
from lit_sparse.runs.checkpoint_folders import (
    METADATA,
    folder_problem,
    is_checkpoint,
    is_sharded_checkpoint,
    read_folder,
)
from lit_sparse.runs.locks import is_global_rank_zero


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save to a temporary file beside ``path``, fsync, then rename over it."""
    with AtomicFile(path) as handle:
        try:
            torch.save(obj, handle.file)
        except Exception as err:  # a full disk part-way through: torch wraps the OSError
            failure = find_error(err, OSError)  # in a RuntimeError of its zip writer
            if failure is None:
                raise
            raise storage_error(path, failure) from None


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoint IO whose saves are atomic on local file systems and whose loads
    refuse a damaged file (:func:`verify_checkpoint`); a sharded checkpoint's folder loads
    as its whole weights (``validate``, ``test``, ``extrapolate`` of an FSDP2 run)."""

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if storage_options is not None or "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        atomic_torch_save(checkpoint, path)

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict[str, Any]:
        if "://" not in str(path):
            verify_checkpoint(path)
            if is_sharded_checkpoint(path):  # the whole weights, read in this process
                return read_folder(path)
        return super().load_checkpoint(path, map_location=map_location, weights_only=weights_only)


_VERIFIED: dict[tuple, None] = {}
"""Checkpoints already verified, by (path, device, inode, size, mtime; a folder: each of its
files' name, inode, size and mtime): an atomic rewrite is a new inode, so a changed file is
verified again."""


def _others(path: Path) -> str:
    others = sorted(p.name for p in path.parent.glob("*.ckpt") if p != path)
    return f"; other checkpoints there: {', '.join(others)}" if others else ""


def _unreadable(path: Path, reason: str) -> CheckpointError:
    return CheckpointError(
        f"ckpt_path={str(path)!r} cannot be read as a checkpoint, so it is not used "
        f"({reason}){_others(path)}"
    )


def _version_key(path: Path, stat: os.stat_result) -> tuple:
    """One version of a checkpoint, as :data:`_VERIFIED` remembers it."""
    return (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _verify_folder(path: Path) -> Path:
    """A sharded checkpoint's folder: its ``meta.pt`` a whole zip, every shard whole. The
    first process of a job reads every shard; the others check their sizes (the whole
    checkpoint is read once, and the strategy's load acts on process 0's verdict)."""
    files = sorted((p.name, p.stat()) for p in path.iterdir() if p.is_file())
    key = (str(path.resolve()), *((n, s.st_ino, s.st_size, s.st_mtime_ns) for n, s in files))
    if key in _VERIFIED:  # every file as it was (a shard rewritten since: verified again)
        return path
    if (path / METADATA).is_file():
        verify_checkpoint(path / METADATA)
    problem = folder_problem(path, read_files=is_global_rank_zero())
    if problem is not None:
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is damaged or incomplete, so it is not used: {problem}"
            f"{_others(path)}"
        )
    _VERIFIED[key] = None
    return path


def verify_checkpoint(path: str | os.PathLike) -> Path:
    """Check that ``path`` is a whole checkpoint: a readable zip whose every record matches
    its CRC-32 (a sharded checkpoint's folder: every file its size and CRC-32). Raises
    :class:`CheckpointError` naming the file and the damaged record."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as err:
        raise CheckpointError(
            f"ckpt_path={str(path)!r}: {err.strerror or 'cannot be read'}"
        ) from None
    if is_sharded_checkpoint(path):
        return _verify_folder(path)
    if not path.is_file():
        raise CheckpointError(f"ckpt_path={str(path)!r}: not a file")
    key = _version_key(path, stat)
    if key in _VERIFIED:
        return path
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as err:
        raise _unreadable(path, f"truncated or corrupt: {err}") from None
    except OSError as err:
        raise CheckpointError(
            f"ckpt_path={str(path)!r}: {err.strerror or 'cannot be read'}"
        ) from None
    if damaged is not None:
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is damaged, so it is not used: record {damaged!r} "
            f"fails its CRC-32 check (a changed bit or a partial copy){_others(path)}"
        )
    _VERIFIED[key] = None
    return path


def _load_failure(err: Exception) -> str:
    """Why torch.load refused a file, in one line and without its weights_only=False advice
    (a checkpoint of ours never needs it: it holds plain values only)."""
    text = str(err)
    unsupported = re.search(r"Unsupported (?:global|operand)\S*(?: GLOBAL)? \S+", text)
    if isinstance(err, pickle.UnpicklingError) or unsupported:
        what = unsupported.group(0) if unsupported else text.splitlines()[0]
        return (
            "it holds objects a safe load refuses, so it was not written by lit_sparse or "
            f"has been altered: {what}"
        )
    return f"truncated or corrupt: {type(err).__name__}: {text.splitlines()[0] if text else ''}"


def read_checkpoint(path: str | os.PathLike, weights: bool = True) -> dict[str, Any]:
    """Load a checkpoint's dict on the CPU (memory-mapped) after verifying every record, or
    say clearly why not (one line naming the file). A sharded checkpoint's folder is read
    whole in this process, its weights (``state_dict``) only with ``weights`` (False: the
    step, hyperparameters and states, without reading the shards)."""
    path = Path(path)
    if not is_checkpoint(path):
        raise CheckpointError(f"ckpt_path={str(path)!r}: no such file")
    verify_checkpoint(path)
    try:
        if path.is_dir():
            return read_folder(path, weights=weights)
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # not a checkpoint, unpicklable content
        raise _unreadable(path, _load_failure(err)) from None


def differences(expected: Any, found: Any, prefix: str) -> list[str]:
    """'key: a != b' lines for nested dicts (``expected`` from the config)."""
    if isinstance(expected, dict) and isinstance(found, dict):
        lines = []
        for key in sorted(set(expected) | set(found)):
            lines += differences(expected.get(key), found.get(key), f"{prefix}.{key}")
        return lines
    return [] if expected == found else [f"{prefix}: config {expected!r}, checkpoint {found!r}"]


def checkpoint_tokenizer(checkpoint: dict[str, Any]) -> str | None:
    """The sha256 of the tokenizer a checkpoint was trained with (None: not recorded)."""
    for value in checkpoint.values():
        if isinstance(value, dict) and isinstance(value.get("tokenizer_sha256"), str):
            return value["tokenizer_sha256"]
    return None


def check_tokenizer(
    trained: str | None,
    sha256: str,
    spec: str,
    path: Any,
    hint: str = "use the run's own tokenizer",
) -> None:
    """CheckpointError unless the checkpoint at ``path``, trained with the tokenizer of digest
    ``trained`` (:func:`checkpoint_tokenizer`; None: not recorded, passes), matches the
    tokenizer of digest ``sha256`` (``spec`` names it in the message, ``hint`` says what
    to do)."""
    if trained is not None and trained != sha256:
        raise CheckpointError(
            f"ckpt_path={str(path)!r} was trained with another tokenizer than "
            f"data.tokenizer={spec!r} (sha256 {trained[:12]}... in the checkpoint, "
            f"{sha256[:12]}... here): token ids would mean other text; {hint}"
        )


class RandomStates(Callback):
    """Every checkpoint holds the Python, numpy and torch generators' states (``rng_states``,
    tensors and ints: weights_only-safe), and a resumed fit restores them: it draws what the
    uninterrupted run would have drawn."""

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        version, internal, gauss = random.getstate()
        name, keys, pos, has_gauss, cached = np.random.get_state()
        states = checkpoint["rng_states"] = {
            "python": [version, list(internal), gauss],
            "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
            "torch": torch.get_rng_state(),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            states["cuda"] = torch.cuda.get_rng_state_all()

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        if "rng_states" not in checkpoint:  # a checkpoint of another trainer
            return
        states = checkpoint["rng_states"]
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
        name, keys, pos, has_gauss, cached = states["numpy"]
        np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(states["torch"])
        if "cuda" in states and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(states["cuda"])


class FinalCheckpoint(Callback):
    """ModelCheckpoint's saves at a run's two edges: the step it resumes at and the step it ends.

    - A resumed run does not save its first step again. ModelCheckpoint does not restore the
      step it last saved, so after resuming at a step its interval divides, the end of the
      first micro-batch looked like a step to save: last.ckpt was rewritten in the middle of
      a gradient accumulation, and a second kill then resumed past that micro-batch without
      its gradient.
    - It saves ``last.ckpt`` at the step training ends when no save fell on it. ModelCheckpoint
      writes last.ckpt at the end only if it wrote none during the run, so with a checkpoint
      every 100 steps and ``max_steps`` 150 the last 50 steps were never saved. This runs first
      among ``on_train_end`` hooks (the CLI puts it first), so the final step is on disk before
      the end-of-fit evaluation starts. A run resumed at its final step (to finish its
      end-of-fit work) is not saved again.
    """

    def __init__(self) -> None:
        self._loaded_step: int | None = None

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        self._loaded_step = checkpoint.get("global_step")

    def on_train_start(self, trainer, pl_module) -> None:
        if self._loaded_step is None:
            return
        for callback in trainer.checkpoint_callbacks:
            if isinstance(callback, ModelCheckpoint):
                # the checkpoint it resumed from holds this step
                callback._last_global_step_saved = trainer.global_step

    def on_train_end(self, trainer, pl_module) -> None:
        step = trainer.global_step
        if step == 0 or trainer.fast_dev_run:
            return
        for callback in trainer.checkpoint_callbacks:
            if not isinstance(callback, ModelCheckpoint) or not callback.save_last:
                continue
            if step == self._loaded_step and _same_file(
                trainer.ckpt_path, callback.last_model_path
            ):
                # resumed at the end (to finish the end-of-fit work): last.ckpt is this step
                callback._last_checkpoint_saved = callback.last_model_path
            elif callback._last_global_step_saved != step:
                callback._save_last_checkpoint(trainer, callback._monitor_candidates(trainer))


def _same_file(a: Any, b: Any) -> bool:
    try:
        return bool(a) and bool(b) and os.path.samefile(a, b)
    except OSError:
        return False
