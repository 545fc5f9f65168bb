"""What ``fit`` prints when it ends: the length-extrapolation table, where the logs went (for
the logger in use) and where the checkpoints are."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch import Trainer
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from lit_sparse.callbacks import LengthExtrapolation

__all__ = ["fit_summary", "logs_hint"]


def logs_hint(trainer: Trainer, log_dir: str | None) -> str:
    """Where a run's logs went and how to look at them, for the logger in use."""
    if not trainer.loggers:
        return f"logs: none (no logger); files: {log_dir or trainer.default_root_dir}"
    hints = []
    for logger in trainer.loggers:
        name = type(logger).__name__
        if isinstance(logger, TensorBoardLogger):
            hints.append(
                f"logs: {logger.log_dir}  (tensorboard --logdir {Path(logger.log_dir).parent})"
            )
        elif isinstance(logger, CSVLogger):
            hints.append(f"logs: {logger.log_dir}  (CSVLogger: metrics.csv; figures in images/)")
        elif name == "WandbLogger":
            hints.append(
                f"logs: Weights & Biases run {logger.version} under {logger.save_dir}  "
                f"(an offline run uploads with: wandb sync {logger.save_dir}/wandb/offline-run-*)"
            )
        else:
            hints.append(f"logs: {log_dir}  ({name})")
    return "\n".join(hints)


def fit_summary(trainer: Trainer, log_dir: str | None) -> str:
    """The end of a fit (``log_dir``: ``trainer.log_dir``, a collective every process asks)."""
    if trainer.fast_dev_run:
        return (
            f"fast_dev_run: {trainer.global_step} optimizer step(s) ran; nothing was kept "
            "(its files went to a temporary folder, now removed)"
        )
    lines = []
    for callback in trainer.callbacks:  # a finished run resumed: the table it saved
        if isinstance(callback, LengthExtrapolation) and callback.result is not None:
            saved = f" ({callback.filename}.md)" if callback.filename else ""
            lines.append(f"\nlength extrapolation{saved}:\n{callback.result.to_markdown()}")
    lines.append(logs_hint(trainer, log_dir))
    callback = trainer.checkpoint_callback
    if callback is not None and callback.dirpath:
        lines.append(f"checkpoints: {callback.dirpath}  (resume: fit ... --ckpt_path last)")
    return "\n".join(lines)
