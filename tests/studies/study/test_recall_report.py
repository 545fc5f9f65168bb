"""The recall study's tables read from the committed records: rows read per query (a learned
rung reads two rows), "beyond T" as d >= T, coverage counted on the distances the held-out
sets sampled (regenerated from the data module's val_seed), and a pattern rebuilt from its
record reaching what the run itself recorded."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from lit_sparse_studies.study.preset import preset_runs
from lit_sparse_studies.study.recall_report import Geometry, _buckets, steps_to, strict_reach
from lit_sparse_studies.study.recall_results import RecallRun, collect_recall

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "recall-study" / "results"


@pytest.fixture(scope="module")
def study():
    runs = preset_runs("recall", seeds=(0, 1, 2), tasks=("mqar64", "mqar128", "distance"))
    return collect_recall(runs, RESULTS)


@pytest.mark.parametrize(("task", "rows"), [("mqar64", 17), ("mqar128", 19), ("distance", 23)])
def test_a_learned_rung_counts_as_the_two_rows_it_reads(study, task, rows):
    results = study.task(task)
    geometry = Geometry(results)
    length = results.training_length
    assert geometry.rows(results.variant("fib_learned"), length) == rows
    assert results.variant("fib_learned").offer(length)[0] == 24  # its slots
    assert (
        geometry.rows(results.variant("sw_keys"), length)
        == results.variant("sw_keys").offer(length)[0]
    )  # a window's slots are its rows


def test_beyond_t_holds_only_distances_of_t_and_more(study):
    task = study.task("distance")
    beyond = _buckets(task, 16384, within=False)
    within = _buckets(task, 16384, within=True)
    assert beyond[0] == "d256-511" and within[-1] == "d128-255"
    assert len(within) + len(beyond) == len(_buckets(task, 16384))


@pytest.mark.stored_values
def test_coverage_counts_the_sampled_distances(study):
    """sw_keys (window 15, 5 layers: reach 75) on d64-127 answers exactly the reachable share
    of the sampled distances, not of the bucket's whole range (0.20)."""
    task = study.task("distance")
    geometry, variant = Geometry(task), task.variant("sw_keys")
    coverage = [geometry.coverage(variant, "use", t, "d64-127") for t in task.lengths]
    # shares of counted distances, written to 3 places: any CPU counts them the same
    assert coverage == pytest.approx([0.328, 0.250, 0.375, 0.250], abs=1e-3)
    # the records' accuracies (scored on another machine) are what the window reaches to
    # 0.01, far above the answer or two another CPU's rounding could score otherwise
    per_bucket = [variant.spread("use", t, "d64-127").mean for t in task.lengths]
    assert per_bucket == pytest.approx(coverage, abs=0.01)


@pytest.mark.stored_values
def test_a_rebuilt_pattern_reaches_what_its_run_recorded(study):
    """Over the bucket's whole range, the rebuilt stack (a learned alpha at its last recorded
    value) gives the coverage each run recorded, in every cell."""
    task = study.task("distance")
    geometry = Geometry(task)
    for variant in task.variants:
        for run in variant.runs:
            for policy in task.policies if run.result.has_new_offsets else task.policies[:1]:
                for length in task.lengths:
                    reach = geometry.reach(run, policy, length)
                    for name in _buckets(task, length):
                        low, high = task.first.distances[name]
                        whole = float(np.mean(reach[low - 1 : min(high, length - 2)]))
                        recorded = run.result.accuracy(policy, length, name, "coverage")
                        # recorded on another machine, but a share of counted distances
                        # (no sum to reassociate): approx's default 1e-6 is rounding's room
                        assert whole == pytest.approx(recorded), (variant.name, policy, name)


def test_mqar_distances_lead_every_query_back_to_its_key_and_value():
    from lit_sparse.tasks.mqar import multiquery_ar
    from lit_sparse_studies.study.coverage import example_distances

    x, y = multiquery_ar(50, 256, 8, 512, seed=3, gap=96)
    rows, query = np.nonzero(y.numpy() != -100)
    distances = example_distances(x, y)
    assert len(distances) == len(query) == 50 * 8
    key = query - distances
    assert (x[rows, key] == x[rows, query]).all() and (key < 16).all()
    assert (x[rows, key + 1] == y[rows, query]).all()  # the value, one after its key
    assert (distances - 1 > 96).all()  # far MQAR: every value more than G back


@pytest.mark.stored_values
def test_mqar_reach_counts_the_held_out_queries(study):
    """One hop: the layers after the first (a value learns its key in the first), so a window
    of 13 reaches exactly the queries whose value lies within 13; the counts of fixed and
    linear spacing are issue 44's (one hop 0.198 and 0.091, through 2 layers 0.738 and 0.858,
    on 4,000 other examples)."""
    task = study.task("mqar128")
    geometry, name = Geometry(task), task.sets(128)[0]
    value_distances = geometry.distances(128, name) - 1
    window = task.variant("sw_keys")
    one = geometry.coverage(window, "use", 128, name, "one")
    assert one == pytest.approx(np.mean(value_distances <= 13))
    fixed = task.variant("fib_fixed")  # issue 44's shares: other examples, so to 0.01
    assert geometry.coverage(fixed, "use", 128, name, "one") == pytest.approx(0.198, abs=0.01)
    assert geometry.coverage(fixed, "use", 128, name) == pytest.approx(0.738, abs=0.01)
    linear = task.variant("fib_linear")
    assert geometry.coverage(linear, "use", 128, name, "one") == pytest.approx(0.091, abs=0.01)
    assert geometry.coverage(linear, "use", 128, name) == pytest.approx(0.858, abs=0.01)
    dense = task.variant("dense")
    assert geometry.coverage(dense, "use", 128, name, "one") == 1.0


def test_strict_reach_moves_a_value_through_the_first_layer_only_with_its_key():
    """The first layer's distance r counts only beside r + 1 (the key, one before the
    value): 0 beside 1, and 8 beside 9, but not a lone 5; later layers count every
    distance."""
    assert np.flatnonzero(strict_reach([[0, 1, 5], [0, 3]], 12)).tolist() == [0, 3]
    reached = strict_reach([[0, 1, 2, 8, 9], [0, 4]], 16)
    assert np.flatnonzero(reached).tolist() == [0, 1, 4, 5, 8, 12]


@pytest.mark.stored_values
def test_far_mqar_strict_reach_counts_only_hops_that_carry_the_key():
    """Issue 56's strict count of far MQAR's held-out queries: linear staggering 0.903
    (0.993 composed), fixed spacing 0.732 (0.765)."""
    runs = preset_runs(
        "recall", seeds=(0,), tasks=("far_mqar",), variants=("fib_fixed", "fib_linear")
    )
    task = collect_recall(runs, RESULTS).task("far_mqar")
    geometry, name = Geometry(task), task.sets(256)[0]
    for variant, composed, strict in (("fib_linear", 0.993, 0.903), ("fib_fixed", 0.765, 0.732)):
        coverage = [
            geometry.coverage(task.variant(variant), "use", 256, name, h)
            for h in ("stack", "strict")
        ]
        # issue 56's shares as written, to 3 places: counts, the same on any CPU
        assert coverage == pytest.approx([composed, strict], abs=5e-4), variant


@pytest.mark.slow
@pytest.mark.stored_values
def test_the_committed_tables_are_what_the_records_make():
    """``docs/recall-study/refresh_tables.py --check``: every committed tables file is
    ``matrix --table`` of the committed records, every table the document marks
    (``<!-- name -->`` ... ``<!-- /name -->``) is one of theirs, line for line, and every
    interval the README and the document quote is one they make (as a - b or b - a)."""
    refresh = runpy.run_path(str(RESULTS.parent / "refresh_tables.py"))
    made = refresh["made_tables"]()
    # text, exactly, though written on another machine: the records' numbers are averaged by
    # statistics.fmean (an exact sum) and bootstrapped by numpy, whose sums run in one order
    # on every CPU (the same text here with numpy's SIMD dispatch off and any ATen capability)
    assert refresh["stale"](made) == []
    marked = {name for name, _ in refresh["MARKED"].findall(refresh["DOCUMENT"].read_text())}
    assert {"mqar", "distance", "coverage", "alpha", "alpha-control", "far-mqar"} <= marked
    # the document quotes intervals (stale() above held each to a table, as a - b or b - a);
    # the README summarises in words, and any interval it quotes is held the same way
    assert refresh["_intervals"](refresh["DOCUMENT"].read_text())


def test_a_quoted_interval_wrapped_across_lines_is_still_checked():
    """Markdown wraps at about 95 columns, so a quote's mean and bracket often sit on two
    lines; the check reads them as one interval either way."""
    refresh = runpy.run_path(str(RESULTS.parent / "refresh_tables.py"))
    wrapped = "fib fixed - window +0.021\n[-0.009, +0.049] at 16x, and 0.458 [0.440,\n0.475]"
    assert refresh["_intervals"](wrapped) == {(0.021, -0.009, 0.049), (0.458, 0.44, 0.475)}


def test_steps_to_a_share_is_the_first_evaluation_at_or_above_it():
    curve = {"step": [100, 200, 300, 400], "val/acc": [0.12, None, 0.5, 0.95]}
    run = RecallRun(seed=0, path=Path("x"), result=None, curve=curve)
    assert steps_to(run, 0.5) == 300 and steps_to(run, 0.9) == 400
    assert steps_to(run, 0.99) is None
    assert steps_to(RecallRun(seed=0, path=Path("x"), result=None), 0.5) is None


def test_far_mqars_dense_reaches_09_where_its_records_say():
    """From the committed records: dense's seeds pass 0.9 at steps 800, 1000 and 500, each
    at or before its early stop."""
    runs = preset_runs("recall", seeds=(0, 1, 2), tasks=["far_mqar"], variants=["dense"])
    [task] = collect_recall(runs, RESULTS).tasks
    [dense] = task.variants
    assert [steps_to(run, 0.9) for run in dense.runs] == [800, 1000, 500]
    assert all(steps_to(run, 0.9) <= run.result.step for run in dense.runs)
