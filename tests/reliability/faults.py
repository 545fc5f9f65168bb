"""Callbacks that inject faults into a real training run (tests only)."""

import os
import signal

import lightning.pytorch as pl
import torch


class KillBeforeBatch(pl.Callback):
    """Kill this process with SIGKILL just before micro-batch ``batch`` (0-based, whole run)."""

    def __init__(self, batch: int):
        self.batch = batch

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        seen = trainer.fit_loop.epoch_loop.batch_progress.total.ready - 1
        if seen == self.batch:
            os.kill(os.getpid(), signal.SIGKILL)


class PoisonWeightsAtStep(pl.Callback):
    """Fill the embedding with NaN before the first micro-batch of optimizer step ``step``."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            with torch.no_grad():
                pl_module.model.embedding.weight.fill_(float("nan"))
