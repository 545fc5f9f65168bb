"""The study's figures (PNG, rendered off-screen with matplotlib's Agg canvas; no pyplot state):

- ``ppl_vs_length.png``: perplexity against evaluation length per variant, one panel per
  held-out set, a band of mean ± sd over seeds;
- ``position_nll.png``: position-binned NLL per variant, one panel per set, the same bands;
- ``alpha_trajectories.png``: learned alpha per layer over steps, one thin line per seed and
  the mean over seeds.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from lit_sparse.study.seeds import Spread, StudyResults

__all__ = ["write_plots"]


def _figure(panels: int, height: float = 3.6):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2 * panels, height), dpi=110, layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    return fig, axes


def _save(fig, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from lit_sparse.atomic_files import write_bytes

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return write_bytes(path, buffer.getvalue())


def _band(ax, x, spreads: list[Spread], label: str, color) -> None:
    mean = np.array([s.mean for s in spreads])
    sd = np.array([s.sd if s.n >= 2 else 0.0 for s in spreads])
    ax.plot(x, mean, marker="o", markersize=3, label=label, color=color)
    if any(s.n >= 2 for s in spreads):
        ax.fill_between(x, mean - sd, mean + sd, color=color, alpha=0.18, linewidth=0)


def _colors(n: int):
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def plot_ppl_vs_length(results: StudyResults, path: Path) -> Path:
    sets = results.sets
    fig, axes = _figure(len(sets))
    lengths = results.lengths
    colors = _colors(len(results.variants))
    for ax, set_name in zip(axes, sets, strict=True):
        for variant, color in zip(results.variants, colors, strict=True):
            spreads = [variant.ppl(set_name, t) for t in lengths]
            _band(ax, lengths, spreads, f"{variant.name} ({len(variant.runs)})", color)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths, [f"{t}\n({results.multiple(t)})" for t in lengths])
        ax.axvline(results.training_length, color="gray", linestyle=":", linewidth=1)
        ax.set_title(f"{set_name}: perplexity against evaluation length")
        ax.set_xlabel("evaluation length (multiple of the training length)")
        ax.set_ylabel("perplexity")
    axes[-1].legend(fontsize=7, title="variant (seeds)", title_fontsize=7)
    fig.suptitle("band: mean ± sd over seeds", fontsize=8)
    return _save(fig, path)


def plot_position_nll(results: StudyResults, path: Path) -> Path:
    from lit_sparse.evaluation.position_loss import bin_edges

    sets = results.sets
    fig, axes = _figure(len(sets))
    colors = _colors(len(results.variants))
    for ax, set_name in zip(axes, sets, strict=True):
        for variant, color in zip(results.variants, colors, strict=True):
            spreads = variant.bins(set_name)
            if not spreads:
                continue
            edges = bin_edges(results.training_length, len(spreads))
            centers = [(a + b - 1) / 2 for a, b in zip(edges, edges[1:], strict=False)]
            _band(ax, centers, spreads, f"{variant.name} ({len(variant.runs)})", color)
        ax.set_title(f"{set_name}: validation NLL by position")
        ax.set_xlabel(f"position in the window (bin centre, T = {results.training_length})")
        ax.set_ylabel("mean NLL")
    axes[-1].legend(fontsize=7, title="variant (seeds)", title_fontsize=7)
    fig.suptitle("band: mean ± sd over seeds", fontsize=8)
    return _save(fig, path)


def plot_alpha(results: StudyResults, path: Path) -> Path | None:
    learned = [v for v in results.variants if v.learns_alpha]
    if not learned:
        return None
    fig, axes = _figure(len(learned), height=4.0)
    for ax, variant in zip(axes, learned, strict=True):
        runs = [r for r in variant.runs if r.alphas is not None and len(r.alphas)]
        n_layers = runs[0].alphas.shape[1]
        colors = _colors(n_layers)
        for run in runs:
            for layer in range(n_layers):
                ax.plot(
                    run.alpha_steps,
                    run.alphas[:, layer],
                    color=colors[layer],
                    alpha=0.35,
                    linewidth=0.8,
                )
        steps = runs[0].alpha_steps
        if all(len(r.alpha_steps) == len(steps) and (r.alpha_steps == steps).all() for r in runs):
            mean = np.mean([r.alphas for r in runs], axis=0)  # (S, L) over seeds
            for layer in range(n_layers):
                ax.plot(
                    steps, mean[:, layer], color=colors[layer], linewidth=2, label=f"layer {layer}"
                )
        ax.set_title(f"{variant.name}: alpha per layer ({len(runs)} seeds)")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("alpha")
        ax.legend(fontsize=7)
    fig.suptitle("thin: each seed; thick: mean over seeds", fontsize=8)
    return _save(fig, path)


def write_plots(results: StudyResults, folder: str | Path) -> list[Path]:
    """Write the figures into ``folder``; returns the files written."""
    folder = Path(folder)
    written = [
        plot_ppl_vs_length(results, folder / "ppl_vs_length.png"),
        plot_position_nll(results, folder / "position_nll.png"),
        plot_alpha(results, folder / "alpha_trajectories.png"),
    ]
    return [p for p in written if p is not None]
