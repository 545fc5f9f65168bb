"""A callback for fault tests: SIGKILL the process before a chosen micro-batch."""

import os
import signal

import lightning.pytorch as pl


class KillBeforeBatch(pl.Callback):
    """Kill this process with SIGKILL just before micro-batch ``batch`` (0-based, whole run)."""

    def __init__(self, batch: int):
        self.batch = batch

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        seen = trainer.fit_loop.epoch_loop.batch_progress.total.ready - 1
        if seen == self.batch:
            os.kill(os.getpid(), signal.SIGKILL)
