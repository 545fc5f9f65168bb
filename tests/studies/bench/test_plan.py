"""The bench's plan (lit_sparse_studies/bench/plan.py): the rows a command asks for (a flex
row per slot plugin by default) and each length's spec (the paper's shape: one sequence a
step). The command: tests/studies/commands/test_bench.py."""

from __future__ import annotations

from lit_sparse_studies.bench.attention import LEARNED
from lit_sparse_studies.bench.plan import bench_rows, length_spec
from lit_sparse_studies.bench.train import TRAIN_SHAPES
from lit_sparse_studies.commands.bench import parse_bench


def test_by_default_every_slot_plugin_gets_a_flex_row():
    from lit_sparse_studies.bench.attention import plugin_names, slot_plugin_names

    args = parse_bench(["attention"])
    rows = bench_rows(args)
    assert rows[0] == "dense"
    flex = [r for r in rows if r.startswith("flex:")]
    assert flex == [f"flex:{p}" for p in rows if p in slot_plugin_names()]
    assert {"fibonacci", LEARNED, "bigbird", "sliding_window"} <= set(slot_plugin_names())
    assert "dense" not in slot_plugin_names()
    # every plugin's row but a stack's (a hybrid's one layer is its local plugin's op)
    assert set(plugin_names()) - set(rows) == {"hybrid"}


def test_train_at_the_papers_shape_runs_one_sequence_per_step():
    args = parse_bench(["train", "--shape", "paper", "--lengths", "1024", "4096"])
    args.plugins = None
    assert [length_spec(args, t)["batch"] for t in (1024, 4096)] == [1, 1]
    assert length_spec(args, 1024)["shape"] == "paper"
    paper = TRAIN_SHAPES["paper"]
    assert (paper["n_layers"], paper["d_model"], paper["n_heads"], paper["n_kv_heads"]) == (
        16,
        512,
        8,
        2,
    )
    small = parse_bench(["train", "--lengths", "1024"])
    assert length_spec(small, 1024)["batch"] == 8  # 8192 tokens a step
