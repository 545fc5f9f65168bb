"""Checkpoints on Lightning's side: atomic saves, the checkpoint IO that verifies what it loads
(:mod:`lit_sparse.runs.checkpoint_files` reads them), and the states a run's checkpoints add."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from lit_sparse.errors import find_error
from lit_sparse.io.atomic import AtomicFile, storage_error
from lit_sparse.runs.checkpoint_files import verify_checkpoint
from lit_sparse.runs.checkpoint_folders import is_sharded_checkpoint, read_folder


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
    """Checkpoint IO: atomic saves, verified loads, a sharded folder loaded as its whole weights."""

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


class RandomStates(Callback):
    """Saves the generators' states in every checkpoint and restores them on resume."""

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
    """ModelCheckpoint's saves at a run's edges: a resume does not save its first step again (a
    rewrite mid-accumulation would lose that micro-batch's gradient on a second kill); the final
    ``last.ckpt`` is saved first among ``on_train_end`` hooks, before the end-of-fit evaluation."""

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
