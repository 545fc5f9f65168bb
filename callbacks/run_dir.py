"""The run directory (``trainer.log_dir`` for TensorBoard and CSV); the callbacks write into
it on rank 0 only, with the atomic writers of :mod:`lit_sparse.io.atomic` (re-exported here).

``trainer.log_dir`` broadcasts from rank 0, so every process would have to ask at the same
moment; the callbacks only write on rank 0, so :func:`run_dir` reads the same folder
without a collective.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.trainer.states import TrainerFn

from lit_sparse.io.atomic import write_json, write_text

__all__ = [
    "evaluation_run",
    "evaluated_step",
    "publish_result",
    "purge_step",
    "run_dir",
    "write_json",
    "write_text",
]


def run_dir(trainer: pl.Trainer) -> Path:
    """The run's folder, no broadcast: the first logger's version folder (TensorBoard, CSV),
    for other loggers the folder that holds the run's ``checkpoints/`` (Lightning's
    ``save_dir/name/version``, e.g. a Weights & Biases run's id), without a logger the
    trainer's ``default_root_dir``."""
    if trainer.loggers:
        logger = trainer.loggers[0]
        if isinstance(logger, (TensorBoardLogger, CSVLogger)):
            return Path(logger.log_dir)
        if logger.save_dir is not None:
            folder = Path(logger.save_dir)
            if logger.name and logger.version is not None:
                version = logger.version
                folder = (
                    folder
                    / str(logger.name)
                    / (version if isinstance(version, str) else f"version_{version}")
                )
            return folder
    return Path(trainer.default_root_dir)


def evaluated_step(trainer: pl.Trainer, checkpoint_step: int | None) -> int:
    """The step the weights being scored were trained to: the trainer's while fitting, else
    the evaluated checkpoint's (``validate`` and ``test`` leave the step counter at 0), so
    an evaluation's charts and images sit at the checkpoint's step."""
    fitting = trainer.state.fn == TrainerFn.FITTING
    return trainer.global_step if fitting or checkpoint_step is None else int(checkpoint_step)


def purge_step(trainer: pl.Trainer) -> int | None:
    """The step from which a resume's TensorBoard logger hides earlier events (its
    ``purge_step``; None: it hides none)."""
    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):
            step = (getattr(logger, "_kwargs", None) or {}).get("purge_step")
            return None if step is None else int(step)
    return None


def evaluation_run(trainer: pl.Trainer, step: int) -> Path:
    """The TensorBoard run of the evaluations at the end of fit, ``<run>/evals/fit-step<N>``:
    apart from the training curves, as ``validate`` and ``test`` write theirs
    (``<run>/evals/<command>-step<N>``)."""
    return run_dir(trainer) / "evals" / f"fit-step{step}"


def _log_apart(logger: TensorBoardLogger, folder: Path, metrics: dict, step: int) -> None:
    """``metrics`` at ``step`` in the TensorBoard run ``folder`` (an evaluation done again
    there hides the earlier points from its step on: ``purge_step``)."""
    writer = type(logger.experiment)(log_dir=str(folder), purge_step=step)
    try:
        for tag, value in metrics.items():
            writer.add_scalar(tag, value, global_step=step)
    finally:
        writer.close()


def publish_result(
    trainer: pl.Trainer,
    result,
    *,
    prefix: str,
    filename: str | None,
    checkpoint,
    checkpoint_step,
    print_table: bool = False,
) -> Path | None:
    """An end-of-fit evaluation's result, stamped and published: its ``step`` (the trainer's
    while fitting, else the evaluated checkpoint's) and ``checkpoint``; then, on rank zero,
    its ``metrics(prefix)`` logged to every logger (a fit's TensorBoard logger: in the run of
    :func:`evaluation_run`, apart from the training curves), ``<filename>.json`` / ``.md``
    written in the run folder and, with ``print_table``, its table and the files printed. A fit that
    ended before ``max_steps`` (an early stop) says so in the JSON (``stopped_early``), so a
    study counts it complete. Returns the written files' path without suffix (None: none)."""
    fitting = trainer.state.fn == TrainerFn.FITTING
    result.step = evaluated_step(trainer, checkpoint_step)
    result.checkpoint = None if checkpoint is None else str(checkpoint)
    if not trainer.is_global_zero:
        return None
    metrics = result.metrics(prefix)
    for logger in trainer.loggers:  # at the evaluated weights' step (validate's counter is 0)
        if fitting and isinstance(logger, TensorBoardLogger):
            _log_apart(logger, evaluation_run(trainer, result.step), metrics, result.step)
            continue
        logger.log_metrics(metrics, step=result.step)
        logger.save()
    written = None
    if filename:
        written = run_dir(trainer) / filename
        data = result.to_dict()
        if fitting:
            data["stopped_early"] = 0 < trainer.global_step < (trainer.max_steps or 0)
        write_json(written.with_name(f"{filename}.json"), data)
        write_text(written.with_name(f"{filename}.md"), result.to_markdown())
    if print_table:
        print(result.to_markdown())
        if written is not None:
            print(f"written to {written}.json and {written}.md")
    return written
