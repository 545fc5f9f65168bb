"""Progress bars in optimizer steps (``Step k/max``), no ``v_num``, one bar for all held-out."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback, ProgressBar, RichProgressBar, TQDMProgressBar
from lightning.pytorch.callbacks.progress.tqdm_progress import convert_inf


def step_description(trainer: pl.Trainer) -> str:
    """``Step <k>/<max_steps>`` (``Step <k>`` without a step limit)."""
    limit = trainer.max_steps
    return f"Step {trainer.global_step}" + (f"/{limit}" if limit and limit > 0 else "")


class _StepBar:
    """What both bars change: no v_num, one validation bar over every loader."""

    _seen = 0  # batches of this validation so far, every loader's
    _loader: int | None = None  # the loader whose batches run now (None: none yet)

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        items.pop("v_num", None)  # the version is the run folder's name, printed at the end
        return items

    @property
    def total_val_batches_current_dataloader(self) -> int | float:
        """Every held-out set's batches: the one bar counts them all."""
        trainer = self.trainer
        counts = (
            trainer.num_sanity_val_batches if trainer.sanity_checking else trainer.num_val_batches
        )
        total = sum(counts)
        return total if math.isfinite(total) else float("inf")

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_validation_start(trainer, pl_module)
        self._seen, self._loader = 0, None

    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._loader is None:  # the first loader opens the bar; the others continue it
            super().on_validation_batch_start(trainer, pl_module, batch, batch_idx, dataloader_idx)
        self._loader = dataloader_idx

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._seen += 1
        super().on_validation_batch_end(
            trainer, pl_module, outputs, batch, self._seen - 1, dataloader_idx
        )


class StepRichProgressBar(_StepBar, RichProgressBar):
    """Lightning's Rich bar, told in optimizer steps (see the module)."""

    def _get_train_description(self, current_epoch: int) -> str:
        description = step_description(self.trainer)
        return f"{description:{max(len(self.validation_description), len(description))}}"

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if self.progress is not None and self.train_progress_bar_id is not None:
            description = self._get_train_description(trainer.current_epoch)
            if self.theme.description:
                description = f"[{self.theme.description}]{description}"
            self.progress.update(self.train_progress_bar_id, description=description)
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)


class StepTQDMProgressBar(_StepBar, TQDMProgressBar):
    """Lightning's tqdm bar, told in optimizer steps (see the module)."""

    def on_train_epoch_start(self, trainer: pl.Trainer, *_: Any) -> None:
        # Lightning's, but never drawn with its "Epoch 0" description
        if self._leave:
            self.train_progress_bar = self.init_train_tqdm()
        self.train_progress_bar.reset()
        self.train_progress_bar.total = convert_inf(self.total_train_batches)
        self.train_progress_bar.initial = 0
        self.train_progress_bar.set_description(step_description(trainer))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if self.train_progress_bar is not None:
            self.train_progress_bar.set_description(step_description(trainer), refresh=False)
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        # Lightning's for the first loader only, never drawn as "DataLoader 0": every set's
        if self._loader is None:
            bar = self.val_progress_bar
            bar.reset()
            bar.total = convert_inf(self.total_val_batches_current_dataloader)
            bar.initial = 0
            sanity = trainer.sanity_checking
            bar.set_description(
                self.sanity_check_description if sanity else self.validation_description
            )
        self._loader = dataloader_idx


def with_step_bar(callbacks: list[Callback], given: Any) -> None:
    """Replace Lightning's default progress bar (not in ``given``) with the step-counting one."""
    given = given if isinstance(given, list) else [given] if given is not None else []
    for i, callback in enumerate(callbacks):
        if not isinstance(callback, ProgressBar) or any(callback is c for c in given):
            continue
        if type(callback) is RichProgressBar:
            callbacks[i] = StepRichProgressBar()
        elif type(callback) is TQDMProgressBar:
            callbacks[i] = StepTQDMProgressBar()
