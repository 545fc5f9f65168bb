"""What the studies' figures share (PNG, rendered off-screen with matplotlib's Agg canvas; no
pyplot state): a figure and its panels, a band of mean ± sd over seeds, a palette, a colour
fixed per variant name (the same in every panel and figure) with one legend for the whole
figure, and the learned alpha per layer over steps (one thin line per seed and layer, a thick
one for the mean over seeds)."""

from __future__ import annotations

import io
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lit_sparse_studies.study.seeds import SeedRun, Spread, VariantRuns

__all__ = [
    "VARIANT_COLORS",
    "band",
    "figure",
    "figure_legend",
    "finish",
    "finish_figure",
    "palette",
    "plot_alpha",
    "save",
    "variant_color",
]

VARIANT_COLORS = {
    "dense": "#000000",
    "fib_fixed": "#1f77b4",
    "fib_linear": "#ff7f0e",
    "fib_coprime": "#2ca02c",
    "fib_learned": "#d62728",
    "pow2_fixed": "#9467bd",
    "bigbird": "#8c564b",
    "sw_keys": "#e377c2",
    "sw_cache": "#17becf",
}
"""The studies' variants, one colour each, the same in every figure."""


def variant_color(name: str):
    """The colour of variant ``name``: its fixed one, else one of tab20 chosen by a stable
    hash of the name (never by drawing order, so no panel shifts another's colours)."""
    if name in VARIANT_COLORS:
        return VARIANT_COLORS[name]
    from matplotlib import colormaps

    return colormaps["tab20"](zlib.crc32(name.encode()) % 20)


def figure(panels: int, height: float = 3.6, rows: int = 1):
    """A figure and its axes, always indexed [row][panel]."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2 * panels, height * rows), dpi=110, layout="constrained")
    return fig, fig.subplots(rows, panels, squeeze=False)


PANELS_A_ROW = 3  # more panels than that in one row are too small to read


def panel_grid(count: int, height: float, columns: int = PANELS_A_ROW):
    """A figure of ``count`` panels, at most ``columns`` a row, and its panels in reading
    order (the last row's empty places removed)."""
    columns = min(count, columns)
    fig, grid = figure(columns, height=height, rows=-(-count // columns))
    axes = [ax for row in grid for ax in row]
    for ax in axes[count:]:
        fig.delaxes(ax)
    return fig, axes[:count]


def save(fig, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from lit_sparse.io import write_bytes

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return write_bytes(path, buffer.getvalue())


def figure_legend(fig, title: str = "variant (seeds)", size: int = 7):
    """One legend for the whole figure, beside every panel: each label drawn in any panel,
    once, in drawing order."""
    handles: dict[str, object] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    return fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside right upper",
        fontsize=size,
        title=title,
        title_fontsize=size,
    )


def finish_figure(
    fig, title: str, path: Path, title_size: int = 9, legend: str = "variant (seeds)"
) -> Path:
    """The figure's one legend (:func:`figure_legend`, titled ``legend``), its title, and the
    figure saved to ``path``."""
    figure_legend(fig, legend)
    fig.suptitle(title, fontsize=title_size)
    return save(fig, path)


def finish(fig, ax, title: str, path: Path, size: int = 6, title_size: int = 9) -> Path:
    """The variants' legend on ``ax``, the figure's title, and the figure saved to ``path``
    (for figures whose every panel draws the same variants in the same order)."""
    ax.legend(fontsize=size, title="variant (seeds)", title_fontsize=size)
    fig.suptitle(title, fontsize=title_size)
    return save(fig, path)


def band(ax, x, spreads: list[Spread], label: str, color) -> None:
    """The mean over seeds as a line, and a band of ± sd where there are two seeds or more."""
    mean = np.array([s.mean for s in spreads])
    sd = np.array([s.sd if s.n >= 2 else 0.0 for s in spreads])
    (line,) = ax.plot(x, mean, marker="o", markersize=3, label=label, color=color)
    line.set_gid(label)
    if any(s.n >= 2 for s in spreads):
        ax.fill_between(x, mean - sd, mean + sd, color=color, alpha=0.18, linewidth=0)


def palette(n: int):
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def shared_steps(runs: Sequence[SeedRun]) -> np.ndarray:
    """The steps every run logged, up to where the first of them stopped (an early stop ends
    some seeds sooner): where a mean over seeds is taken. Empty if the runs logged at other
    steps."""
    n = min(len(r.alpha_steps) for r in runs)
    steps = runs[0].alpha_steps[:n]
    return steps if all((r.alpha_steps[:n] == steps).all() for r in runs) else steps[:0]


def plot_alpha(panels: Sequence[tuple[str, VariantRuns]], path: Path) -> Path | None:
    """A panel per (title, variant) that learns alpha: every layer's alpha over steps, each
    seed thin and the mean over seeds thick (over :func:`shared_steps`)."""
    panels = [(title, variant) for title, variant in panels if variant.learns_alpha]
    if not panels:
        return None
    fig, axes = panel_grid(len(panels), height=4.0)
    for ax, (title, variant) in zip(axes, panels, strict=True):
        runs = variant.alpha_runs()
        n_layers = runs[0].alphas.shape[1]
        color = palette(n_layers)
        steps = shared_steps(runs)
        for index, run in enumerate(runs):
            for k in range(n_layers):
                label = f"layer {k}" if index == 0 and not len(steps) else None  # no mean line
                ax.plot(
                    run.alpha_steps, run.alphas[:, k], color=color[k], alpha=0.35, linewidth=0.8,
                    label=label,
                )  # fmt: skip
        if len(steps):
            mean = np.mean([r.alphas[: len(steps)] for r in runs], axis=0)  # (S, L) over seeds
            for k in range(n_layers):
                ax.plot(steps, mean[:, k], color=color[k], linewidth=2, label=f"layer {k}")
        ax.set_title(f"{title} ({len(runs)} seeds)")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("alpha")
        ax.legend(fontsize=7)
    fig.suptitle(
        "thin: each seed; thick: mean over seeds, up to the step where the first seed stopped",
        fontsize=8,
    )
    return save(fig, path)
