"""Progress bars in optimizer steps (``Step k/max``), no ``v_num``, one bar for all held-out;
where the output is no terminal (a log file, a pipe, ``make``), a line every few seconds."""

from __future__ import annotations

import math
import sys
import time
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


def _number(value: Any) -> str:
    value = float(value)
    return f"{value:.4g}" if math.isfinite(value) else str(value)


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


class StepLinesProgressBar(ProgressBar):
    """Progress as whole lines, at most one every ``every`` seconds, and one at the last step:
    a redrawn bar ends no line, so a log, a pipe or ``make`` shows nothing until it is done.

    ``Step 120/2000 (6%): 1.9 s/step, about 59 min left; train/loss 4.12`` while training,
    ``Validation: 12/40 batches`` while validating a long held-out set."""

    def __init__(self, every: float = 10.0):
        super().__init__()
        self.every = every
        self._enabled = True
        self._last = self._start = time.monotonic()
        self._first_step = self._printed_step = self._seen = 0

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    @property
    def is_disabled(self) -> bool:
        return not self._enabled

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        items.pop("v_num", None)
        return items

    def _due(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.every:
            return False
        self._last = now
        return True

    def _print(self, line: str) -> None:
        if self._enabled:
            print(line, flush=True)

    def _train_line(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> str:
        step, limit = trainer.global_step, trainer.max_steps
        line = step_description(trainer)
        if limit and limit > 0:
            line += f" ({100 * step // limit}%)"
        done = step - self._first_step
        if done > 0:
            per_step = (time.monotonic() - self._start) / done
            line += f": {per_step:.3g} s/step"
            if limit and limit > step:
                line += f", about {_duration(per_step * (limit - step))} left"
        metrics = self.get_metrics(trainer, pl_module)
        shown = [f"{k} {_number(v)}" for k, v in metrics.items() if _is_number(v)]
        return line + ("; " + ", ".join(shown) if shown else "")

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = self._last = time.monotonic()
        self._first_step = self._printed_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        last = 0 < trainer.max_steps <= trainer.global_step  # before the end-of-fit evaluations
        if (last or self._due()) and trainer.global_step != self._printed_step:
            self._printed_step = trainer.global_step
            self._print(self._train_line(trainer, pl_module))

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.global_step != self._printed_step:  # stopped early, or by max_epochs
            self._print(self._train_line(trainer, pl_module))

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._seen = 0

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._seen += 1
        if self._due():
            sanity = trainer.sanity_checking
            counts = trainer.num_sanity_val_batches if sanity else trainer.num_val_batches
            total = sum(counts) if isinstance(counts, list) else counts
            what = self.sanity_check_description if sanity else self.validation_description
            of = f"/{total}" if math.isfinite(total) else ""
            self._print(f"{what}: {self._seen}{of} batches")


def output_is_live() -> bool:
    """Whether a redrawn bar is seen as it is drawn: stdout a terminal, or a notebook's."""
    stdout = sys.stdout
    if type(stdout).__module__.startswith("ipykernel"):
        return True
    try:
        return stdout.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def with_step_bar(callbacks: list[Callback], given: Any) -> None:
    """Replace Lightning's default progress bar (not in ``given``) with the step-counting one:
    whole lines where the output is no terminal (``output_is_live``)."""
    given = given if isinstance(given, list) else [given] if given is not None else []
    for i, callback in enumerate(callbacks):
        if not isinstance(callback, ProgressBar) or any(callback is c for c in given):
            continue
        if type(callback) in (RichProgressBar, TQDMProgressBar) and not output_is_live():
            callbacks[i] = StepLinesProgressBar()
        elif type(callback) is RichProgressBar:
            callbacks[i] = StepRichProgressBar()
        elif type(callback) is TQDMProgressBar:
            callbacks[i] = StepTQDMProgressBar()
