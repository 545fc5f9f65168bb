"""The recall study's figures (:mod:`lit_sparse_studies.study.figures`):

- ``mqar.png``: accuracy per MQAR task per variant: a bar at the mean over seeds, its 95 %
  bootstrap interval, and a dot per seed;
- ``<task>_<policy>.png`` (``distance_use.png``, ``distance_budget_drop.png``): accuracy
  against the key-to-query distance per variant, one panel per evaluation length, the
  pattern's coverage of each bucket's sampled distances dotted below;
- ``<task>.png`` (``passkey.png``): keys recalled whole against evaluation length per
  variant, one panel per depth and a row per policy;
- ``alpha_recall.png``: learned alpha per layer over steps, per task and variant;
- ``learning.png``: held-out accuracy against training examples, a line per run, a panel per
  task (three a row); a variant's seeds per panel in its one legend entry.

Every variant has one colour in every panel and figure (:func:`figures.variant_color`), and a
figure of several panels has one legend beside them all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lit_sparse_studies.study.figures import (
    band,
    figure,
    finish_figure,
    panel_grid,
    plot_alpha,
    save,
    variant_color,
)
from lit_sparse_studies.study.recall_report import Geometry, _task_kind, headline, headline_interval
from lit_sparse_studies.study.recall_results import RecallStudy, TaskResults

__all__ = ["write_recall_plots"]


def plot_mqar(study: RecallStudy, path: Path) -> Path | None:
    tasks = [t for t in study.tasks if _task_kind(t) == "mqar"]
    if not tasks:
        return None
    fig, ((ax,),) = figure(1, height=4.0)
    names = [v.name for v in study.preset.variants if any(t.variant(v.name) for t in tasks)]
    width = 0.8 / max(1, len(tasks))
    for index, task in enumerate(tasks):
        x = np.arange(len(names)) + (index - (len(tasks) - 1) / 2) * width
        means, low, high = [], [], []
        for position, name in zip(x, names, strict=True):
            variant = task.variant(name)
            if variant is None:
                means.append(np.nan), low.append(0.0), high.append(0.0)
                continue
            interval = headline_interval(task, variant, "use", task.training_length)
            means.append(interval.mean)
            low.append(interval.mean - interval.low)
            high.append(interval.high - interval.mean)
            values = headline(task, variant, "use", task.training_length).values
            offsets = np.linspace(-0.25, 0.25, len(values)) * width if len(values) > 1 else [0]
            ax.scatter(
                position + np.asarray(offsets), values, s=9, color="black", zorder=3,
                label="a seed" if index == 0 and position == x[0] else None,
            )  # fmt: skip
        label = task.task.label or task.sets(task.training_length)[0]  # far MQAR says so
        ax.bar(x, means, width, yerr=[low, high], capsize=2, label=label, alpha=0.75)
    ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("accuracy at the queries")
    ax.set_title(
        "MQAR: accuracy per task\nbar: mean over seeds; whisker: 95 % bootstrap interval; "
        "dot: a seed",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    return save(fig, path)


def _bucket_centre(bounds: list[int]) -> float:
    return float(np.sqrt(bounds[0] * bounds[1]))


def plot_distance(task: TaskResults, policy: str, path: Path, geometry: Geometry) -> Path:
    lengths = task.lengths
    fig, axes = figure(len(lengths), height=3.8, rows=2)
    colors = [variant_color(v.name) for v in task.variants]
    for column, length in enumerate(lengths):
        top, bottom = axes[0][column], axes[1][column]
        names = [n for n in task.sets(length) if task.first.distances.get(n)]
        x = [_bucket_centre(task.first.distances[n]) for n in names]
        for variant, color in zip(task.variants, colors, strict=True):
            label = f"{variant.name} ({len(variant.runs)})"
            band(top, x, [variant.spread(policy, length, n) for n in names], label, color)
            coverage = [geometry.coverage(variant, policy, length, n) for n in names]
            (line,) = bottom.plot(x, coverage, linestyle=":", marker=".", color=color, label=label)
            line.set_gid(label)
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.axvline(task.training_length - 2, color="gray", linestyle=":", linewidth=1)
            ax.set_ylim(-0.03, 1.03)
            ax.set_xlabel("key-to-query distance d (bucket centre)")
        top.set_title(f"length {length} ({task.multiple(length)}): accuracy", fontsize=10)
        bottom.set_title("coverage of the sampled distances by composition", fontsize=10)
        top.set_ylabel("accuracy")
        bottom.set_ylabel("coverage")
    title = (
        f"{task.task.name}: accuracy against distance, new_offsets={policy} (band: mean ± sd "
        "over seeds; dotted line: the training length)"
    )
    return finish_figure(fig, title, path)


def plot_passkey(task: TaskResults, path: Path) -> Path:
    depths = task.sets()
    fig, axes = figure(len(depths), height=3.4, rows=len(task.policies))
    colors = [variant_color(v.name) for v in task.variants]
    for row, policy in enumerate(task.policies):
        for column, depth in enumerate(depths):
            ax = axes[row][column]
            for variant, color in zip(task.variants, colors, strict=True):
                spreads = [variant.spread(policy, t, depth, "exact") for t in task.lengths]
                band(ax, task.lengths, spreads, f"{variant.name} ({len(variant.runs)})", color)
            ax.set_xscale("log", base=2)
            ax.set_xticks(task.lengths, [task.multiple(t) for t in task.lengths])
            ax.set_ylim(-0.03, 1.03)
            ax.set_title(f"{depth}, new_offsets={policy}", fontsize=9)
            ax.set_xlabel("evaluation length")
            ax.set_ylabel("keys recalled whole")
    return finish_figure(fig, f"{task.task.name}: passkey against length and depth", path)


def plot_learning(study: RecallStudy, path: Path) -> Path | None:
    """Held-out accuracy (``val/acc``) over training examples seen, one panel per task."""
    tasks = [
        t for t in study.tasks if any(r.curve.get("val/acc") for v in t.variants for r in v.runs)
    ]
    if not tasks:
        return None
    from matplotlib.ticker import EngFormatter

    seeds = _seeds_per_panel(tasks)
    fig, axes = panel_grid(len(tasks), height=3.8)
    for ax, task in zip(axes, tasks, strict=True):
        batch = task.setup.get("data.init_args.batch_size") or 1
        for variant in task.variants:
            name = f"{variant.name} ({seeds[variant.name]})"
            for index, run in enumerate(r for r in variant.runs if r.curve.get("val/acc")):
                steps, acc = run.curve["step"], run.curve["val/acc"]
                points = [(s * batch, a) for s, a in zip(steps, acc, strict=True) if a is not None]
                (line,) = ax.plot(
                    *zip(*points, strict=True),
                    color=variant_color(variant.name),
                    linewidth=0.9,
                    label=name if index == 0 else None,
                )
                line.set_gid(name)
        ax.set_title(task.task.label or task.task.name, fontsize=9)
        ax.set_xlabel("training examples seen")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 120k, not 120000 run together
        ax.set_ylabel("held-out accuracy")
        ax.set_ylim(-0.02, 1.02)
    uneven = any("/" in count for count in seeds.values())
    legend = "variant (seeds a panel, in reading order)" if uneven else "variant (seeds)"
    return finish_figure(fig, "learning curves: a line per run (seed)", path, legend=legend)


def _seeds_per_panel(tasks: list[TaskResults]) -> dict[str, str]:
    """Each variant's seeds in each panel, as its one legend entry shows them: ``3`` when
    every panel has the same count, else the counts in reading order (``1/3``; ``-``: not in
    that panel), so a variant is named once however many panels draw it."""
    counts: dict[str, list[str]] = {}
    for index, task in enumerate(tasks):
        for variant in task.variants:
            counts.setdefault(variant.name, ["-"] * len(tasks))[index] = str(len(variant.runs))
    return {name: c[0] if len(set(c)) == 1 else "/".join(c) for name, c in counts.items()}


def write_recall_plots(study: RecallStudy, folder: str | Path) -> list[Path]:
    """Write the figures into ``folder``; returns the files written."""
    folder = Path(folder)
    written = [plot_mqar(study, folder / "mqar.png")]
    for task in study.tasks:
        kind = _task_kind(task)
        if kind == "distance":
            geometry = Geometry(task)
            for policy in task.policies:  # named by task: two distance tasks, two files
                out = folder / f"{task.task.name}_{policy}.png"
                written.append(plot_distance(task, policy, out, geometry))
        elif kind == "passkey":
            written.append(plot_passkey(task, folder / f"{task.task.name}.png"))
    alpha = [(f"{t.task.name}: {v.name}", v) for t in study.tasks for v in t.variants]
    written.append(plot_alpha(alpha, folder / "alpha_recall.png"))
    written.append(plot_learning(study, folder / "learning.png"))
    return [p for p in written if p is not None]
