"""What the Lightning commands print: the held-out table; at the end of fit where things went."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch import Trainer
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from lit_sparse.callbacks import LengthExtrapolation
from lit_sparse.io.tables import markdown_table

MEAN = "mean over sets"


def _number(value: Any) -> float | None:
    try:
        number = float(value)  # a float, or a one-element tensor
    except (TypeError, ValueError, RuntimeError):
        return None
    return number if math.isfinite(number) else None


def held_out_table(
    metrics: Mapping[str, Any] | Iterable[Mapping[str, Any]], prefix: str, sets: list[str]
) -> str | None:
    """``<prefix>/<metric>/<set>`` of ``trainer.callback_metrics`` or ``trainer.validate``'s list as
    a Markdown table (a row per metric, a column per set, the mean last), or None."""
    loaders = [metrics] if isinstance(metrics, Mapping) else metrics
    merged = {tag: value for loader in loaders for tag, value in loader.items()}
    values: dict[str, dict[str, float]] = {}
    for tag, value in merged.items():
        parts = tag.split("/")
        number = _number(value)
        if parts[0] != prefix or number is None or len(parts) not in (2, 3):
            continue
        column = MEAN if len(parts) == 2 else parts[2]
        if column in sets or column == MEAN:
            values.setdefault(f"{prefix}/{parts[1]}", {})[column] = number
    if not values:
        return None
    columns = [name for name in sets if any(name in row for row in values.values())] + [MEAN]
    rows = [
        [metric]
        + [
            "" if column not in row else f"{row[column]:.{2 if metric.endswith('ppl') else 4}f}"
            for column in columns
        ]
        for metric, row in values.items()
    ]
    table = markdown_table(["metric", *columns], rows, align="l" + "r" * len(columns))
    if MEAN in values.get(f"{prefix}/ppl", {}):
        table += (
            f"\n{prefix}/ppl, {MEAN}: exp({prefix}/loss), the perplexity of the mean loss "
            "(not the mean of the sets' perplexities)"
        )
    return table


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
    sets = trainer.lightning_module.val_set_names()
    if (validation := held_out_table(trainer.callback_metrics, "val", sets)) is not None:
        lines.append(f"\nheld-out sets at the last validation:\n{validation}")
    for callback in trainer.callbacks:  # a finished run resumed: the table it saved
        if isinstance(callback, LengthExtrapolation) and callback.result is not None:
            saved = f" ({callback.filename}.md)" if callback.filename else ""
            lines.append(f"\nlength extrapolation{saved}:\n{callback.result.to_markdown()}")
    lines.append(logs_hint(trainer, log_dir))
    if (callback := trainer.checkpoint_callback) is not None and callback.dirpath:
        lines.append(f"checkpoints: {callback.dirpath}  (resume: fit ... --ckpt_path last)")
    return "\n".join(lines)
