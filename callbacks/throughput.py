"""Lightning's ThroughputMonitor with FLOPs that count the sparse attention term.

Lightning's ``measure_flops`` traces the forward with torch's flop counter, which does not see
the custom sparse op, so this monitor sets ``pl_module.flops_per_batch`` from
:func:`lit_sparse.evaluation.flops.flops_per_batch` for each batch's shape (forward + backward
in training, forward only in validation). Items are predicted tokens: it logs e.g.
``train/items_per_sec`` and ``train/device/flops_per_sec`` (``mfu`` where the device's peak is
known); a validation's ``validate/*`` throughput is logged once, at the step of the weights.
Lightning's names are changed to what the values hold (``tag_name``): its cumulative
``lengths`` (a token count, not a length) is ``total/tokens``, ``items_per_sec`` is
``tokens_per_sec``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ThroughputMonitor
from lightning.pytorch.trainer.states import RunningStage, TrainerFn
from lightning.pytorch.utilities import rank_zero_only

from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.flops import flops_per_batch

__all__ = ["SparseThroughputMonitor", "batch_size", "batch_tokens", "tag_name"]


def batch_size(batch: Any) -> int:
    """Windows in an (x, y) batch of (B, T) token ids."""
    return int(batch[0].shape[0])


def batch_tokens(batch: Any) -> int:
    """Predicted tokens in an (x, y) batch of (B, T) token ids."""
    return int(batch[0].numel())


TOTALS = {"time": "seconds", "batches": "batches", "samples": "windows", "lengths": "tokens"}
"""Lightning's running totals, by what they count (under ``<stage>/total/``)."""
RATES = {"samples_per_sec": "windows_per_sec", "items_per_sec": "tokens_per_sec"}
"""Lightning's rates whose names do not say what they count."""


def tag_name(key: str) -> str:
    """The logged name of one of Lightning's throughput keys (``lengths`` -> ``total/tokens``,
    ``device/items_per_sec`` -> ``device/tokens_per_sec``); others unchanged."""
    prefix, _, name = key.rpartition("/")
    if name in TOTALS and not prefix:
        return f"total/{TOTALS[name]}"
    renamed = RATES.get(name, name)
    return f"{prefix}/{renamed}" if prefix else renamed


AVERAGE_OVER = 100
"""Batches a throughput is averaged over by default (Lightning's ``window_size`` default)."""


class SparseThroughputMonitor(ThroughputMonitor):
    """ThroughputMonitor for (x, y) token batches, with the model's own FLOPs count.

    Args:
        average_over: batches over which throughput is averaged (Lightning's ``window_size``).
        separator: between the stage and the metric name in the logged keys.
        window_size: the earlier name of ``average_over`` (read in older configs).
    """

    def __init__(
        self,
        average_over: int = AVERAGE_OVER,
        separator: str = "/",
        window_size: int | None = None,
    ):
        if window_size is not None:
            if average_over not in (AVERAGE_OVER, window_size):  # both given, and unequal
                raise ConfigError(
                    f"window_size={window_size} and average_over={average_over}: window_size "
                    "is the earlier name of average_over; give one of them"
                )
            average_over = window_size
        super().__init__(
            batch_size_fn=batch_size,
            length_fn=batch_tokens,
            window_size=average_over,
            separator=separator,
        )
        self._flops: dict[tuple[int, int, bool], int] = {}

    def _set_flops(self, pl_module: pl.LightningModule, batch: Any, training: bool) -> None:
        b, t = batch[0].shape[:2]
        key = (int(b), int(t), training)
        if key not in self._flops:
            self._flops[key] = flops_per_batch(pl_module, key[0], key[1], training=training)
        pl_module.flops_per_batch = self._flops[key]

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._set_flops(pl_module, batch, training=True)

    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._set_flops(pl_module, batch, training=False)

    on_test_batch_start = on_validation_batch_start

    def _named(self, stage: RunningStage) -> dict[str, float]:
        throughput = self._throughputs[stage]
        prefix = f"{stage.value}{throughput.separator}"
        return {prefix + tag_name(k): v for k, v in throughput.compute().items()}

    def _compute(self, trainer: pl.Trainer, iter_num: int | None = None) -> None:
        # Lightning's, with the tags named by what they hold
        if not trainer._logger_connector.should_update_logs:
            return
        metrics = self._named(trainer.state.stage)
        trainer._logger_connector.log_metrics(metrics, step=iter_num)

    @rank_zero_only
    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if trainer.state.fn != TrainerFn.FITTING:  # validate, extrapolate: per batch
            return super().on_validation_batch_end(
                trainer, pl_module, outputs, batch, *args, **kwargs
            )
        if not trainer.sanity_checking:  # measured per batch, logged at the end
            iter_num = trainer._evaluation_loop.batch_progress.total.ready
            self._update(trainer, pl_module, batch, iter_num)

    @rank_zero_only
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking:
            metrics = self._named(RunningStage.VALIDATING)
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=trainer.global_step)
        super().on_validation_end(trainer, pl_module)
