"""Figures of the observers, rendered off-screen with matplotlib (a dependency: a figure
without axis labels, titles and a colour bar would not say what it shows), and logged to
every logger that takes images: TensorBoard (``add_image``) and Weights & Biases
(``log_image``). When a logger in use takes no images (CSVLogger, or no logger at all), the
figure is saved as a PNG file in the run folder: ``images/<tag>/step_<N>.png``.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
from lightning.pytorch.loggers import TensorBoardLogger

from lit_sparse.callbacks.run_dir import run_dir
from lit_sparse.io.atomic import write_bytes

__all__ = ["cell_edges", "heatmap_image", "image_path", "lines_image", "log_image"]


def _figure():
    from matplotlib.figure import Figure

    return Figure(figsize=(6.4, 4.0), dpi=80, layout="constrained")


def _render(fig) -> np.ndarray:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()  # (H, W, 3) uint8


def cell_edges(x: Sequence[float]) -> np.ndarray:
    """Column edges of a heatmap whose column i holds the value recorded at ``x[i]`` until
    the next record: [x_0, x_1), [x_1, x_2), ..., the last as wide as the one before (unit
    width for a single column). The axis starts at the first record (step 0 or a resume),
    never before it."""
    x = np.asarray(list(x), dtype=np.float64)
    last = x[-1] + (x[-1] - x[-2] if len(x) > 1 else 1.0)
    return np.concatenate([x, [last]])


def heatmap_image(
    values: np.ndarray,
    x: Sequence[float],
    title: str,
    xlabel: str,
    ylabel: str,
    rows: Sequence[int] | None = None,
) -> np.ndarray:
    """(H, W, 3) uint8 image of ``values`` (rows x columns), columns at ``x`` (see
    :func:`cell_edges`), with a colour bar; ``rows`` names the rows (default 0, 1, ...)."""
    from matplotlib.ticker import MaxNLocator

    values = np.asarray(values, dtype=np.float64)
    fig = _figure()
    ax = fig.add_subplot()
    y_edges = np.arange(values.shape[0] + 1) - 0.5
    mesh = ax.pcolormesh(cell_edges(x), y_edges, values, shading="flat")
    fig.colorbar(mesh, ax=ax)
    if rows is None:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    else:  # only some layers have a row (a hybrid's): each row named by its layer
        ax.set_yticks(range(len(rows)), [str(row) for row in rows])
    ax.invert_yaxis()
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return _render(fig)


def lines_image(
    x: Sequence[float], lines: Mapping[str, Sequence[float]], title: str, xlabel: str, ylabel: str
) -> np.ndarray:
    """(H, W, 3) uint8 image of one labelled line per entry of ``lines``."""
    fig = _figure()
    ax = fig.add_subplot()
    for label, y in lines.items():
        ax.plot(list(x), list(y), marker="o", label=label)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return _render(fig)


def image_path(folder: Path, tag: str, step: int) -> Path:
    """Where a figure is saved as a file: ``<folder>/images/<tag>/step_<step>.png``."""
    return folder / "images" / Path(*tag.split("/")) / f"step_{step:06d}.png"


def _png(image: np.ndarray) -> bytes:
    from matplotlib.image import imsave

    buffer = io.BytesIO()
    imsave(buffer, image, format="png")
    return buffer.getvalue()


def log_image(trainer: pl.Trainer, tag: str, image: np.ndarray, step: int) -> None:
    """``image`` (H, W, 3) to every logger of ``trainer`` that takes images; a PNG file in
    the run folder if any logger in use does not (call on rank 0)."""
    as_file = not trainer.loggers
    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):
            logger.experiment.add_image(tag, image, global_step=step, dataformats="HWC")
        elif type(logger).__name__ == "WandbLogger":  # no import of wandb unless in use
            logger.log_image(key=tag, images=[image], step=step)
        else:
            as_file = True
    if as_file:
        write_bytes(image_path(run_dir(trainer), tag, step), _png(image))
