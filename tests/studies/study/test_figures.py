"""What the studies' figures share (lit_sparse_studies/study/figures.py): a variant's colour
fixed by its name, a grid of panels in reading order, and the steps a mean over seeds is
taken at. The recall study's figures: tests/studies/study/test_recall_plots.py."""

from __future__ import annotations

import zlib
from types import SimpleNamespace

import numpy as np
from matplotlib import colormaps

from lit_sparse_studies.study.figures import VARIANT_COLORS, panel_grid, shared_steps, variant_color


def test_a_variants_colour_is_fixed_by_its_name():
    assert variant_color("fib_learned") == VARIANT_COLORS["fib_learned"] == "#d62728"
    other = variant_color("my_variant")  # not a study's: tab20's, by a stable hash of the name
    assert other == colormaps["tab20"](zlib.crc32(b"my_variant") % 20)
    assert variant_color("another") != other and variant_color("my_variant") == other


def test_a_grid_of_five_panels_is_two_rows_of_three_without_the_empty_place():
    fig, axes = panel_grid(5, height=2.0)
    assert len(axes) == 5 and fig.axes == axes  # the sixth place removed
    rows = [(ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start) for ax in axes]
    assert rows == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert tuple(fig.get_size_inches()) == (3 * 5.2, 2 * 2.0)
    fig, axes = panel_grid(2, height=2.0)  # fewer than a row: as many columns as panels
    assert len(axes) == 2 and tuple(fig.get_size_inches()) == (2 * 5.2, 2.0)


def test_a_mean_over_seeds_is_taken_up_to_the_first_stop():
    def run(*steps):
        return SimpleNamespace(alpha_steps=np.array(steps))

    assert shared_steps([run(10, 20, 30), run(10, 20)]).tolist() == [10, 20]
    assert shared_steps([run(10, 20, 30), run(10, 20, 30)]).tolist() == [10, 20, 30]
    assert shared_steps([run(10, 20), run(10, 25)]).tolist() == []  # other steps: none shared
