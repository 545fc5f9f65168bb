"""A resume in place logs again the checkpoint step's ``val/*`` scalars TensorBoard would hide."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import TensorBoardLogger

from lit_sparse.runs.events import writer_file

PREFIX = "val/"


def logged_scalars(files: list[Path], step: int) -> dict[str, float]:
    """Every scalar the event ``files`` hold at ``step`` (the last value of a tag wins)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    found: dict[str, float] = {}
    for path in files:
        for event in EventFileLoader(str(path)).Load():
            if event.step != step or not event.HasField("summary"):
                continue
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    found[value.tag] = float(value.simple_value)
                elif value.HasField("tensor") and not value.tensor.tensor_shape.dim:
                    found[value.tag] = float(tensor_util.make_ndarray(value.tensor))
    return found


class ResumedValidation(Callback):
    """Logs the scalars again, except tags another callback rewrites (its ``prefix``)."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        logger = next((lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)), None)
        purge = (getattr(logger, "_kwargs", None) or {}).get("purge_step")
        if logger is None or purge is None or not trainer.is_global_zero:
            return
        step = trainer.global_step
        if step != int(purge):  # a finished run completed at its end: nothing is hidden
            return
        own = writer_file(logger)
        files = [p for p in sorted(Path(logger.log_dir).glob("events.*")) if str(p) != own]
        prefixes = [getattr(callback, "prefix", None) for callback in trainer.callbacks]
        rewritten = tuple(f"{prefix}/" for prefix in prefixes if isinstance(prefix, str))
        scalars = {
            tag: value
            for tag, value in logged_scalars(files, step).items()
            if tag.startswith(PREFIX) and not (rewritten and tag.startswith(rewritten))
        }
        if scalars:
            logger.log_metrics(scalars, step=step)
