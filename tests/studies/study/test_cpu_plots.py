"""The cpu study's figures (lit_sparse_studies/study/cpu_plots.py), drawn from the records
committed under docs/cpu-study/results and inspected on the matplotlib Figure (none is
rendered): a column per held-out set, the zoomed row without the variants that do not stay
flat, and no alpha figure without a variant that learns alpha."""

from __future__ import annotations

from pathlib import Path

from lit_sparse_studies.study import cpu_plots, figures
from lit_sparse_studies.study.cpu_results import collect
from lit_sparse_studies.study.preset import preset_runs

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "cpu-study" / "results"


def test_the_figures_of_dense_and_fib_fixed(tmp_path, monkeypatch):
    saved = {}
    monkeypatch.setattr(
        figures, "save", lambda fig, path: saved.setdefault(path.name, fig) and path
    )
    study = collect(preset_runs("cpu", [0, 1, 2], variants=["dense", "fib_fixed"]), RESULTS)
    written = cpu_plots.write_plots(study, tmp_path)
    assert [p.name for p in written] == ["ppl_vs_length.png", "position_nll.png"]  # no alpha
    top_left, top_right, zoom_left, zoom_right = saved["ppl_vs_length.png"].axes
    assert top_left.get_title() == "shakespeare: perplexity against evaluation length"
    assert top_left.get_yscale() == "log" and top_right.get_title().startswith("math:")
    assert [line.get_label() for line in top_left.get_lines()][:2] == ["dense (3)", "fib_fixed (3)"]
    # dense's change at 16x (+35.5 %) is beyond FLAT_PCT: only fib_fixed is zoomed on
    assert "not shown: dense" in zoom_left.get_title()
    assert [line.get_label() for line in zoom_left.get_lines() if "(" in line.get_label()] == [
        "fib_fixed (3)"
    ]
    titles = [ax.get_title() for ax in saved["position_nll.png"].axes]
    assert titles == ["shakespeare: validation NLL by position", "math: validation NLL by position"]


def test_a_flat_variant_is_zoomed_on(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_plots, "FLAT_PCT", 400.0)  # dense's +262 % at 16x on math: flat
    saved = {}
    monkeypatch.setattr(
        figures, "save", lambda fig, path: saved.setdefault(path.name, fig) and path
    )
    study = collect(preset_runs("cpu", [0, 1, 2], variants=["dense"]), RESULTS)
    cpu_plots.plot_ppl_vs_length(study, tmp_path / "ppl.png")
    zoom_left = saved["ppl.png"].axes[2]
    assert "not shown" not in zoom_left.get_title()
    assert "dense (3)" in [line.get_label() for line in zoom_left.get_lines()]
