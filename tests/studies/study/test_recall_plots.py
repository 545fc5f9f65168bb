"""The recall study's figures, drawn from the committed records: every line of every panel
is named, in its own colour, by the legend that panel is read by (the figure's one legend;
inspected on the matplotlib Figure, not its pixels), and a variant keeps its colour across
panels and figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba

from lit_sparse_studies.study import figures, recall_plots
from lit_sparse_studies.study.preset import preset_runs
from lit_sparse_studies.study.recall_results import collect_recall

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "recall-study" / "results"


def _draw(study, folder: Path) -> dict:
    """The study's figures, as Figure objects by file name (none is rendered to PNG)."""
    saved = {}

    def keep(fig, path):
        saved[Path(path).name] = fig
        return Path(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(figures, "save", keep)
        patch.setattr(recall_plots, "save", keep)
        written = recall_plots.write_recall_plots(study, folder)
    assert {path.name for path in written} == set(saved)
    return saved


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Every figure of the committed study, as Figure objects by file name."""
    runs = preset_runs("recall", seeds=(0, 1, 2), tasks=("mqar64", "mqar128", "distance"))
    return _draw(collect_recall(runs, RESULTS), tmp_path_factory.mktemp("plots"))


def _legend(fig) -> dict[str, tuple]:
    """The figure's one legend: label -> colour."""
    assert len(fig.legends) == 1, "a figure of variants has one legend beside every panel"
    legend = fig.legends[0]
    return {
        text.get_text(): to_rgba(handle.get_color())
        for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True)
    }


@pytest.mark.parametrize("name", ["learning.png", "distance_use.png", "distance_drop.png"])
def test_every_line_of_every_panel_is_named_in_its_colour_by_the_legend(drawn, name):
    fig = drawn[name]
    legend = _legend(fig)
    for ax in fig.axes:
        lines = [line for line in ax.get_lines() if line.get_gid()]
        assert lines, f"{name}: a panel draws no variant"
        for line in lines:
            assert line.get_gid() in legend, f"{name}: {line.get_gid()} is not in the legend"
            assert to_rgba(line.get_color()) == legend[line.get_gid()], line.get_gid()


def test_a_variant_has_one_colour_in_every_figure(drawn):
    colours: dict[str, set] = {}
    for name in ("learning.png", "distance_use.png"):
        for label, colour in _legend(drawn[name]).items():
            colours.setdefault(label.split(" (")[0], set()).add(colour)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({c.pop() for c in colours.values()}) == len(colours)  # and no two share one


def test_the_mqar_bars_carry_a_dot_per_seed(drawn):
    (ax,) = drawn["mqar.png"].axes
    dots = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
    assert dots == 2 * 8 * 3  # 2 settings x 8 variants x 3 seeds
    bars = [text.get_text() for text in ax.get_legend().get_texts()][1:]  # after "a seed"
    assert bars == ["MQAR L=64, kv=4", "MQAR L=128, kv=8"]  # the tasks, as the pages name them


@pytest.mark.slow  # reads three tasks' records (about 8 s)
def test_panels_with_other_seed_counts_name_each_variant_once(tmp_path):
    """A figure over tasks whose seed counts differ (a study still running beside a finished
    one) names each variant once, its seeds per panel in the label; two distance tasks write
    two files, not one over the other; four tasks' learning curves and learned alphas wrap
    onto a second row; and far MQAR's bars are named far MQAR, not by the setting it shares
    with plain MQAR."""
    tasks = ("mqar128", "distance", "distance_budget", "far_mqar")
    runs = preset_runs("recall", seeds=(0, 1, 2), tasks=tasks)
    study = collect_recall(runs, RESULTS)
    dense = study.task("mqar128").variants[0]
    dense.runs = dense.runs[:1]
    saved = _draw(study, tmp_path)
    assert {"distance_use.png", "distance_budget_use.png", "distance_budget_drop.png"} <= set(saved)
    legend = _legend(saved["learning.png"])
    variants = [label.split(" (")[0] for label in legend]
    assert len(variants) == len(set(variants)), f"a variant named twice: {list(legend)}"
    order = ["mqar128", "far_mqar", "distance", "distance_budget"]  # the preset's order
    assert [t.task.name for t in study.tasks] == order
    assert f"{dense.name} (1/3/3/3)" in legend
    assert "fib_coprime (-/-/3/3)" in legend  # run on neither MQAR task
    assert saved["learning.png"].legends[0].get_title().get_text().startswith("variant (seeds a")
    panels = saved["learning.png"].axes
    assert [ax.get_title() for ax in panels] == [t.task.label for t in study.tasks]
    assert sorted({ax.get_subplotspec().rowspan.start for ax in panels}) == [0, 1]
    for ax in panels:
        assert all(line.get_gid() in legend for line in ax.get_lines() if line.get_gid())
    alphas = saved["alpha_recall.png"].axes  # fib_learned on each of the four tasks
    assert [ax.get_subplotspec().rowspan.start for ax in alphas] == [0, 0, 0, 1]
    (bars,) = saved["mqar.png"].axes
    names = [text.get_text() for text in bars.get_legend().get_texts()]
    assert names[1:] == ["MQAR L=128, kv=8", "far MQAR L=256, kv=8, gap 96"]


def test_every_alpha_panel_draws_the_mean_over_seeds(drawn):
    """Early-stopped seeds end at other steps: the mean is drawn up to the first stop, and the
    panel's legend names its thick lines."""
    for ax in drawn["alpha_recall.png"].axes:
        thick = [line for line in ax.get_lines() if line.get_linewidth() == 2]
        thin = [line for line in ax.get_lines() if line.get_linewidth() != 2]
        assert thick, f"{ax.get_title()}: no mean line"
        assert [line.get_label() for line in thick] == [
            text.get_text() for text in ax.get_legend().get_texts()
        ]
        first_stop = min(max(line.get_xdata()) for line in thin)
        assert all(max(line.get_xdata()) == first_stop for line in thick), ax.get_title()
