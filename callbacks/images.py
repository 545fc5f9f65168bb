"""Figures as TensorBoard images: rendered off-screen with matplotlib when it is installed
(the ``notebook`` extra), else a plain grayscale image of the data (heatmaps only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import lightning.pytorch as pl
import numpy as np
from lightning.pytorch.loggers import TensorBoardLogger

__all__ = ["heatmap_image", "lines_image", "log_image"]


def _figure():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure(figsize=(6.4, 4.0), dpi=80, layout="constrained")


def _render(fig) -> np.ndarray:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()  # (H, W, 3) uint8


def heatmap_image(
    values: np.ndarray, x: Sequence[float], title: str, xlabel: str, ylabel: str
) -> np.ndarray:
    """(H, W, 3) uint8 image of ``values`` (rows x columns), columns labelled by ``x``."""
    values = np.asarray(values, dtype=np.float64)
    fig = _figure()
    if fig is None:
        low, high = np.nanmin(values), np.nanmax(values)
        scaled = (values - low) / (high - low) if high > low else np.zeros_like(values)
        gray = np.kron(np.nan_to_num(scaled) * 255, np.ones((16, 16))).astype(np.uint8)
        return np.repeat(gray[..., None], 3, axis=-1)
    from matplotlib.ticker import MaxNLocator

    ax = fig.add_subplot()
    x = np.asarray(list(x), dtype=np.float64)
    # cell edges halfway between the columns' x values (unit width for a single column)
    middle = (x[1:] + x[:-1]) / 2
    first = x[0] - (middle[0] - x[0] if len(x) > 1 else 0.5)
    last = x[-1] + (x[-1] - middle[-1] if len(x) > 1 else 0.5)
    x_edges = np.concatenate([[first], middle, [last]])
    y_edges = np.arange(values.shape[0] + 1) - 0.5
    mesh = ax.pcolormesh(x_edges, y_edges, values, shading="flat")
    fig.colorbar(mesh, ax=ax)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.invert_yaxis()
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return _render(fig)


def lines_image(
    x: Sequence[float], lines: Mapping[str, Sequence[float]], title: str, xlabel: str, ylabel: str
) -> np.ndarray | None:
    """(H, W, 3) uint8 image of one line per entry of ``lines``; None without matplotlib."""
    fig = _figure()
    if fig is None:
        return None
    ax = fig.add_subplot()
    for label, y in lines.items():
        ax.plot(list(x), list(y), marker="o", label=label)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return _render(fig)


def log_image(trainer: pl.Trainer, tag: str, image: Any, step: int) -> None:
    """``image`` (H, W, 3) to every TensorBoard logger of ``trainer`` (call on rank 0)."""
    if image is None:
        return
    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):
            logger.experiment.add_image(tag, image, global_step=step, dataformats="HWC")
