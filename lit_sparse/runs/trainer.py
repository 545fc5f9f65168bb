"""The Lightning commands' Trainer, early trainer checks, and :func:`run_trainer` outside CLIs."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.loops.fit_loop import _FitLoop

from lit_sparse.callbacks import LengthExtrapolation
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation import ExtrapolationResult
from lit_sparse.io.class_paths import names_subclass
from lit_sparse.kernels.threads import usable_cores
from lit_sparse.runs.checkpoints import AtomicCheckpointIO, FinalCheckpoint, RandomStates
from lit_sparse.runs.locks import RunLock
from lit_sparse.runs.model_summary import use_sparse_flops_summary
from lit_sparse.runs.progress import with_step_bar
from lit_sparse.runs.resumed_validation import ResumedValidation
from lit_sparse.runs.summary import held_out_table, logs_hint


def check_trainer_options(trainer: Any, subcommand: str) -> None:
    """ConfigError for ``trainer`` values (a Namespace or dict) Lightning would refuse late."""
    get = trainer.get
    accumulate = get("accumulate_grad_batches")
    if accumulate is not None and not _is_count(accumulate):
        raise ConfigError(
            f"trainer.accumulate_grad_batches={accumulate!r}: must be an integer >= 1 "
            "(micro-batches per optimizer step)"
        )
    interval = get("val_check_interval")
    if isinstance(interval, (int, float)) and not isinstance(interval, bool):
        by_batches = get("check_val_every_n_epoch") is None
        if interval <= 0 or (by_batches and not isinstance(interval, int)):
            raise ConfigError(
                f"trainer.val_check_interval={interval!r}: must be an integer >= 1 "
                "(micro-batches between validations; the training stream has no epochs, so a "
                "fraction of one means nothing) or a duration 'DD:HH:MM:SS'"
            )
    clip = get("gradient_clip_val")
    if clip is not None and (isinstance(clip, bool) or not clip >= 0):
        raise ConfigError(
            f"trainer.gradient_clip_val={clip!r}: must be >= 0 (the gradient norm an optimizer "
            "step is clipped to; 0 or null: no clipping)"
        )
    _check_cpu_devices(get("devices"), get("accelerator"))
    max_steps = get("max_steps")
    if subcommand == "fit" and not _is_count(max_steps):
        raise ConfigError(
            f"trainer.max_steps={max_steps!r}: must be an integer >= 1 (the optimizer steps "
            "to train; the learning-rate schedule ends there)"
        )


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


FORCE_DEVICES = "LIT_SPARSE_FORCE_DEVICES"
"""Set to 1 to start more CPU training processes than this process may use cores."""


def _check_cpu_devices(devices: Any, accelerator: Any) -> None:
    """Refuse more CPU devices than usable cores, unless ``LIT_SPARSE_FORCE_DEVICES=1``."""
    if isinstance(devices, str) and devices.strip().isdigit():
        devices = int(devices)
    if not _is_count(devices) or devices == 1:
        return
    if accelerator in (None, "auto"):
        import torch

        on_cpu = not torch.cuda.is_available() and not torch.backends.mps.is_available()
    else:
        on_cpu = accelerator == "cpu"
    cores = usable_cores()
    if on_cpu and devices > cores and os.environ.get(FORCE_DEVICES, "").strip() != "1":
        raise ConfigError(
            f"trainer.devices={devices}: more processes than the {cores} CPU cores this process "
            f"may use (each device is a training process with its own model and data); use at "
            f"most {cores}, or set {FORCE_DEVICES}=1 to start them anyway"
        )


def drop_checkpoint_callbacks(trainer: Any) -> int:
    """Remove ModelCheckpoint callbacks when checkpointing is off (Lightning refuses the pair)."""
    if trainer.get("enable_checkpointing") is not False:
        return 0
    callbacks = trainer.get("callbacks") or []
    kept = [c for c in callbacks if not names_subclass(c, ModelCheckpoint)]
    trainer.callbacks = kept
    return len(callbacks) - len(kept)


def unvalidated_note(
    max_steps: int, accumulate: int, val_check_batch: Any, validates: bool
) -> str | None:
    """The line saying a fit ends before its first validation (None when it validates): a
    short run (``--trainer.max_steps 20`` on a config validating every 100) had no val/ metric
    and no held-out table, and nothing said why."""
    if not validates or max_steps is None or max_steps <= 0:
        return None
    if not isinstance(val_check_batch, int) or max_steps * accumulate >= val_check_batch:
        return None
    per_step = f" ({accumulate} per optimizer step)" if accumulate > 1 else ""
    return (
        f"note: this fit is never validated: it ends at max_steps {max_steps} "
        f"({max_steps * accumulate} batches{per_step}), before the first validation at batch "
        f"{val_check_batch} (trainer.val_check_interval); --trainer.val_check_interval "
        f"{max_steps * accumulate} validates at its last step"
    )


class _CompletingFitLoop(_FitLoop):
    """Lightning's fit loop; a run resumed at its final step runs the end-of-fit hooks it missed.
    A fit that will never validate says so as it starts (``unvalidated_note``)."""

    def run(self) -> None:
        self.setup_data()
        trainer = self.trainer
        note = unvalidated_note(
            self.max_steps,
            trainer.accumulate_grad_batches,
            trainer.val_check_batch,
            trainer.enable_validation,
        )
        if note and trainer.is_global_zero:
            print(note, flush=True)
        ended = 0 < self.max_steps <= self.epoch_loop.global_step
        if self.skip and trainer.ckpt_path is not None and ended:
            bar = trainer.progress_bar_callback
            if bar is not None:  # its on_train_end closes the bar on_train_start opens
                bar.on_train_start(trainer, trainer.lightning_module)
            self.on_run_end()
            return
        super().run()


def _without_epoch(trainer: Trainer, log_metrics):
    """Lightning's ``log_metrics`` without the ``epoch`` it adds to every step's metrics: a
    stream of one epoch made it a flat chart among the training curves."""

    def log(metrics, step=None):
        if step is None and "step" not in metrics:
            step = trainer.fit_loop.epoch_loop._batches_that_stepped  # as Lightning picks it
        return log_metrics(metrics, step)

    return log


def _scoring_held_out(name: str, prefix: str, summary: str):
    """Trainer.validate or .test (``name``) printing one table of the held-out sets."""

    def score(
        self,
        model: LightningModule | None = None,
        dataloaders: Any = None,
        ckpt_path: str | Path | None = None,
        verbose: bool = True,
        datamodule: LightningDataModule | None = None,
        weights_only: bool | None = None,
    ) -> list[Mapping[str, float]]:
        lightning = getattr(super(LitSparseTrainer, self), name)
        results = lightning(model, dataloaders, ckpt_path, False, datamodule, weights_only)
        # "step" (the evaluated checkpoint's) only placed the metrics in the logs
        results = [{k: v for k, v in loader.items() if k != "step"} for loader in results]
        if verbose:
            self._print_held_out(results, prefix)
        return results

    score.__name__, score.__qualname__ = name, f"LitSparseTrainer.{name}"
    score.__doc__ = f"""{summary}, logged as {prefix}/*.

        Args:
            model: the LightningModule (from the config).
            dataloaders: loaders to score instead of the data's held-out sets.
            ckpt_path: the checkpoint whose weights are scored.
            verbose: print the results: one table, a row per metric, a column per held-out set.
            datamodule: the data (its held-out sets).
            weights_only: how the checkpoint is loaded (torch.load's weights_only; a run's
                saved config.yaml carries fit's value).
        """
    return score


class LitSparseTrainer(Trainer):
    """Lightning's Trainer with ``extrapolate``; ``validate`` and ``test`` print one held-out table,
    the summary's FLOPs count the sparse attention, the progress bar counts optimizer steps."""

    def __init__(self, *args, **kwargs):
        given = kwargs.get("callbacks")  # Lightning appends its default bar to this list
        given = list(given) if isinstance(given, list) else given
        super().__init__(*args, **kwargs)
        with_step_bar(self.callbacks, given)  # no "Epoch 0/-2", no v_num
        loop = _CompletingFitLoop(
            self, min_epochs=self.fit_loop.min_epochs, max_epochs=self.fit_loop.max_epochs
        )
        loop.epoch_loop = self.fit_loop.epoch_loop
        self.fit_loop = loop
        use_sparse_flops_summary(self)
        connector = self._logger_connector
        connector.log_metrics = _without_epoch(self, connector.log_metrics)

    validate = _scoring_held_out("validate", "val", "Score a checkpoint on every held-out set")
    test = _scoring_held_out("test", "test", "Score a checkpoint as validate does")

    def _print_held_out(self, results: list[Mapping[str, float]], prefix: str) -> None:
        """Print one table of the held-out sets (rank 0), not Lightning's column per loader."""
        table = held_out_table(results, prefix, self.lightning_module.val_set_names())
        log_dir = self.log_dir  # a collective under DDP: every process asks
        if table is not None and self.is_global_zero:
            print(f"held-out sets, {prefix}/* ({self.ckpt_path or 'the current weights'}):")
            print(table)
            print(logs_hint(self, log_dir))

    def extrapolate(
        self,
        model: LightningModule | None = None,
        datamodule: LightningDataModule | None = None,
        ckpt_path: str | None = None,
        lengths: list[int] | None = None,
        multiples: list[float] | None = None,
        new_offsets: Literal["use", "drop"] | None = None,
        batch_size: int | None = None,
        weights_only: bool | None = None,
    ) -> ExtrapolationResult | None:
        """Perplexity of a checkpoint at several evaluation lengths on every held-out set.

        Prints the table and writes extrapolation.json / .md in the run directory; every held-out
        token is predicted once, end-of-text tokens included (docs/evaluation.md).

        Args:
            model: the LightningModule (the checkpoint's hyperparameters override it).
            datamodule: the data (its held-out sets).
            ckpt_path: the checkpoint whose weights are evaluated.
            lengths: evaluation lengths (default: multiples of the training length, always added).
            multiples: multiples of the training length (default 1, 2, 4).
            new_offsets: "use" or "drop" distances seen only beyond the training length
                (FibonacciAttention); default: the model's own value.
            batch_size: windows per batch (default: about the validation batch's tokens).
            weights_only: how the checkpoint is loaded (torch.load's; as ``validate``).
        """
        options = {"stages": ["validate"], "print_table": True}
        callback = LengthExtrapolation(multiples, lengths, new_offsets, batch_size, **options)
        self.callbacks.append(callback)
        try:
            loading = {"ckpt_path": ckpt_path, "weights_only": weights_only}
            self.validate(model, datamodule=datamodule, verbose=False, **loading)
        finally:
            self.callbacks.remove(callback)
        return callback.result


def with_run_callbacks(callbacks: list[Callback]) -> list[Callback]:
    """``callbacks`` with FinalCheckpoint first, ResumedValidation and RandomStates last."""
    callbacks.insert(0, FinalCheckpoint())
    callbacks.extend([ResumedValidation(), RandomStates()])
    return callbacks


@contextlib.contextmanager
def run_trainer(
    logger: TensorBoardLogger,
    command: str,
    checkpoint_every: int | None = None,
    callbacks: list[Callback] | None = None,
    **trainer_args: Any,
) -> Iterator[LitSparseTrainer]:
    """The Trainer of a run trained outside the CLI, as fit's: locked for ``command``, atomic
    verified checkpoints, ``last.ckpt`` every ``checkpoint_every`` steps and at the end."""
    lock = RunLock.acquire(logger.log_dir, command)
    try:
        last = ModelCheckpoint(save_last=True, save_top_k=0, every_n_train_steps=checkpoint_every)
        yield LitSparseTrainer(
            logger=logger,
            callbacks=with_run_callbacks([*(callbacks or []), last]),
            plugins=[AtomicCheckpointIO()],
            **trainer_args,
        )
    finally:
        lock.release()
