"""The run directory (``trainer.log_dir``) and atomic writes into it, rank 0 only.

``trainer.log_dir`` broadcasts from rank 0, so every process would have to ask at the same
moment; the callbacks only write on rank 0, so :func:`run_dir` reads the same folder
without a collective.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

__all__ = ["run_dir", "write_json", "write_text"]


def run_dir(trainer: pl.Trainer) -> Path:
    """The folder ``trainer.log_dir`` names (the TensorBoard version folder), no broadcast."""
    if trainer.loggers:
        logger = trainer.loggers[0]
        if isinstance(logger, (TensorBoardLogger, CSVLogger)):
            return Path(logger.log_dir)
        if logger.save_dir is not None:
            return Path(logger.save_dir)
    return Path(trainer.default_root_dir)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, then
    ``os.replace``, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike, data: Any) -> Path:
    """``data`` as indented JSON, atomically (non-finite floats must already be None)."""
    return write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
