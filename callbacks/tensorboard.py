"""TensorBoard charts whose lines can be told apart, and the Custom Scalars layout.

TensorBoard colours a chart's lines by run, never by tag, so a :class:`SeriesRuns` writes each
line of such a chart (``alpha/layer_00``, ``pos_nll/000-031``, ...) to its own small run inside
the run's log folder under one tag: each gets a colour and a name in the runs panel. The
callbacks also log their usual tags to the run itself, for CSV and other loggers. The Custom
Scalars tab reads one layout per run, so :func:`write_layout` writes every callback's charts
(from its ``custom_scalar_charts(trainer, pl_module)``) into one layout, once per log folder.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.loggers import TensorBoardLogger

from lit_sparse.callbacks.run_dir import purge_step

__all__ = ["CATEGORY", "SeriesRuns", "tensorboard_logger", "write_layout"]

CATEGORY = "lit_sparse"
"""The Custom Scalars tab's section holding the charts."""

_with_layout: weakref.WeakSet = weakref.WeakSet()  # writers that hold the layout already


def tensorboard_logger(trainer: pl.Trainer) -> TensorBoardLogger | None:
    """The trainer's first TensorBoard logger, if any."""
    return next((lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)), None)


def write_layout(trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
    """Write the Custom Scalars layout of every callback's charts to the run, once (rank 0;
    a callback's ``custom_scalar_charts`` returns ``{title: ["Multiline", [tag regex]]}``)."""
    logger = tensorboard_logger(trainer)
    if logger is None or not trainer.is_global_zero or logger.experiment in _with_layout:
        return
    charts: dict[str, list] = {}
    for callback in trainer.callbacks:
        chart_of = getattr(callback, "custom_scalar_charts", None)
        if callable(chart_of):
            charts.update(chart_of(trainer, pl_module))
    if charts:
        logger.experiment.add_custom_scalars({CATEGORY: charts})
    _with_layout.add(logger.experiment)


class SeriesRuns:
    """One TensorBoard run per line of a chart, inside the run's log folder (rank 0 only).

    ``log(trainer, {"alpha/layer_00": 0.5, ...}, tag="alpha", step=10)`` writes each value to
    the run ``<log dir>/<name>`` under ``tag``. A resume in place purges each one's events
    from the resume's step, as the CLI does for the run itself.
    """

    def __init__(self) -> None:
        self._writers: dict[Path, Any] = {}

    def log(self, trainer: pl.Trainer, values: dict[str, float], tag: str, step: int) -> None:
        logger = tensorboard_logger(trainer)
        if logger is None or not trainer.is_global_zero:
            return
        for name, value in values.items():
            self._writer(trainer, logger, name).add_scalar(tag, value, global_step=step)

    def _writer(self, trainer: pl.Trainer, logger: TensorBoardLogger, name: str) -> Any:
        folder = Path(logger.log_dir) / name
        writer = self._writers.get(folder)
        if writer is None:
            # the run's own writer class (torch's SummaryWriter or tensorboardX's)
            writer = type(logger.experiment)(log_dir=str(folder), purge_step=purge_step(trainer))
            self._writers[folder] = writer
        return writer

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
