"""The cpu study's figures (:mod:`lit_sparse_studies.study.figures`):

- ``ppl_vs_length.png``: perplexity against evaluation length per variant, one column per
  held-out set, a band of mean ± sd over seeds; below it, the change against 1x of the
  variants that stay flat, zoomed;
- ``position_nll.png``: position-binned NLL per variant, one panel per set, the same bands;
- ``alpha_trajectories.png``: learned alpha per layer over steps, one thin line per seed and
  the mean over seeds.
"""

from __future__ import annotations

from pathlib import Path

from lit_sparse_studies.study.cpu_results import StudyResults
from lit_sparse_studies.study.figures import band, figure, finish, palette, plot_alpha

__all__ = ["write_plots"]


FLAT_PCT = 10.0
"""The zoomed row of ``ppl_vs_length.png`` shows the variants whose mean change at the
longest evaluation length stays within this many percent of 1x."""


def plot_ppl_vs_length(results: StudyResults, path: Path) -> Path:
    """Top row: perplexity of every variant (log scale); bottom row: the change against 1x
    of the variants that stay within ``FLAT_PCT``, on a scale where they differ."""
    from matplotlib.ticker import FormatStrFormatter

    sets = results.sets
    fig, axes = figure(len(sets), rows=2)
    lengths = results.lengths
    colors = palette(len(results.variants))
    for column, set_name in enumerate(sets):
        top, zoom = axes[0][column], axes[1][column]
        hidden = []
        for variant, color in zip(results.variants, colors, strict=True):
            label = f"{variant.name} ({len(variant.runs)})"
            band(top, lengths, [variant.ppl(set_name, t) for t in lengths], label, color)
            changes = [variant.change(set_name, t) for t in lengths]
            if abs(changes[-1].mean) <= FLAT_PCT:
                band(zoom, lengths, changes, label, color)
            else:
                hidden.append(variant.name)
        top.set_yscale("log")
        for axis_format in (top.yaxis.set_major_formatter, top.yaxis.set_minor_formatter):
            axis_format(FormatStrFormatter("%g"))
        top.set_title(f"{set_name}: perplexity against evaluation length")
        top.set_ylabel("perplexity")
        zoom.axhline(0, color="gray", linewidth=0.8)
        not_shown = f"; not shown: {', '.join(hidden)}" if hidden else ""
        zoom.set_title(
            f"{set_name}: change against 1x\n"
            f"(variants within ±{FLAT_PCT:g} % at {results.multiple(lengths[-1])}{not_shown})",
            fontsize=10,
        )
        zoom.set_ylabel("change against 1x (%)")
        for ax in (top, zoom):
            ax.set_xscale("log", base=2)
            ax.set_xticks(lengths, [f"{t}\n({results.multiple(t)})" for t in lengths])
            ax.axvline(results.training_length, color="gray", linestyle=":", linewidth=1)
            ax.set_xlabel("evaluation length (multiple of the training length)")
    return finish(fig, axes[0][-1], "band: mean ± sd over seeds", path, 7, 8)


def plot_position_nll(results: StudyResults, path: Path) -> Path:
    from lit_sparse.evaluation import bin_edges

    sets = results.sets
    fig, (axes,) = figure(len(sets))
    colors = palette(len(results.variants))
    for ax, set_name in zip(axes, sets, strict=True):
        for variant, color in zip(results.variants, colors, strict=True):
            spreads = variant.bins(set_name)
            if not spreads:
                continue
            edges = bin_edges(results.training_length, len(spreads))
            centers = [(a + b - 1) / 2 for a, b in zip(edges, edges[1:], strict=False)]
            band(ax, centers, spreads, f"{variant.name} ({len(variant.runs)})", color)
        ax.set_title(f"{set_name}: validation NLL by position")
        ax.set_xlabel(f"position in the window (bin centre, T = {results.training_length})")
        ax.set_ylabel("mean NLL")
    return finish(fig, axes[-1], "band: mean ± sd over seeds", path, 7, 8)


def write_plots(results: StudyResults, folder: str | Path) -> list[Path]:
    """Write the figures into ``folder``; returns the files written."""
    folder = Path(folder)
    written = [
        plot_ppl_vs_length(results, folder / "ppl_vs_length.png"),
        plot_position_nll(results, folder / "position_nll.png"),
        plot_alpha(
            [(f"{v.name}: alpha per layer", v) for v in results.variants],
            folder / "alpha_trajectories.png",
        ),
    ]
    return [p for p in written if p is not None]
