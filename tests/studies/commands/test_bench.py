"""Smoke tests of ``lit_sparse_studies.commands.bench``: tiny lengths, the table and the JSON
schema.

Speed is reported by the bench, never asserted here.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from lit_sparse import list_attention
from lit_sparse_studies.bench.attention import (
    FLEX,
    LEARNED,
    bench_plugins,
    build_plugin,
    fibonacci_keys,
    flex_block_mask,
    floor_bytes,
)
from lit_sparse_studies.bench.plan import bench_rows, length_spec
from lit_sparse_studies.bench.timing import busy_cores
from lit_sparse_studies.bench.train import TRAIN_SHAPES
from lit_sparse_studies.commands.bench import parse_bench

FLOOR_KEYS = {"floor_ms", "x_floor", "gb_per_s", "gflop_s", "x_peak"}
ROW_KEYS = {"T", "plugin", "busy_cores", "ms", "x_idle", "speedup_vs_dense", "peak_mb"}
ATTENTION_KEYS = {"pass", "speedup_vs_flex"}


def main(argv):
    """``python -m lit_sparse bench ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["bench", *argv])


@pytest.mark.slow
def test_bench_attention_writes_rows_floors_and_skips_dense_above_its_length(
    tmp_path, capsys, monkeypatch
):
    """One bench run (its processes are the cost) checks the rows, the table, the floor
    columns and dense's maximum length: bfloat16 inputs, T = 32 and 64 with dense up to 32.
    On Linux each length is one process: the rows' peaks are measured in forks of it."""
    from lit_sparse_studies.bench import rows as bench_rows

    started, run_child = [], bench_rows.run_child
    monkeypatch.setattr(
        bench_rows, "run_child", lambda spec: started.append(spec) or run_child(spec)
    )
    path = tmp_path / "rows.json"
    args = ["attention", "--lengths", "32", "64", "--plugins", "fibonacci", LEARNED]
    args += ["--dtype", "bfloat16", "--dense-max-length", "32"]
    assert main([*args, "--repeats", "1", "--json", str(path)]) == 0
    if sys.platform == "linux":  # one process per length: the peaks are measured in its forks
        assert [(spec["length"], spec["mode"]) for spec in started] == [(32, "time"), (64, "time")]
    rows = json.loads(path.read_text())
    assert [(r["T"], r["plugin"]) for r in rows] == [
        (32, "dense"),
        (32, "fibonacci"),
        (32, LEARNED),
        (64, "fibonacci"),
        (64, LEARNED),
    ]
    for row in rows:
        assert set(row) == ROW_KEYS | FLOOR_KEYS | ATTENTION_KEYS
        assert row["ms"] > 0 and row["peak_mb"] >= 0  # measured: not None
        assert row["pass"] == "fwd+bwd" and row["speedup_vs_flex"] is None
    # dense runs up to --dense-max-length only; above it no row divides by it
    assert [r["speedup_vs_dense"] for r in rows if r["plugin"] == "dense"] == [1.0]
    assert all(r["speedup_vs_dense"] > 0 for r in rows if r["T"] == 32)
    assert all(r["speedup_vs_dense"] is None for r in rows if r["T"] == 64)
    # GFLOP/s: the useful FLOPs (dense: every distance up to T, as the FLOPs counter counts
    # them; 4 D per head and key forward, 3x with backward) over the time; x peak: against
    # the one matmul rate its process measured
    dense = next(r for r in rows if r["plugin"] == "dense")
    assert dense["gflop_s"] == pytest.approx(4 * 64 * 32 * 8 * 32 * 3 / dense["ms"] / 1e6)
    for length in (32, 64):
        rates = [r["gflop_s"] / r["x_peak"] for r in rows if r["T"] == length]
        assert all(rate == pytest.approx(rates[0]) for rate in rates) and rates[0] > 0
    # x_floor = ms / floor_ms, and floor_ms scales with the bytes one call must move
    for row in rows:
        assert row["x_floor"] == pytest.approx(row["ms"] / row["floor_ms"])
        spec = {"dtype": "bfloat16", "batch": 1, "length": row["T"], "heads": 8, "kv_heads": 2}
        traffic = floor_bytes({**spec, "dim": 64})
        assert traffic == 2 * row["T"] * 6 * (8 + 2) * 64  # bf16: 2 bytes an element
        assert row["gb_per_s"] == pytest.approx(traffic / row["ms"] / 1e6)
        # the floor is that traffic over the copy bandwidth its process measured: a reading
        # that moves with the machine's load (under load, 64's floor was 3.4x 32's), so only
        # its range is checked, not a ratio between two processes' readings
        assert 1e8 < traffic / (row["floor_ms"] / 1e3) < 1e13  # bytes/s
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| T | plugin | ms fwd+bwd | x dense |")
    assert table[1] == "|---:|---|---:|---:|---:|---:|---:|---:|---:|"  # a Markdown table
    assert [line.split(" | ")[1] for line in table[2:]] == [r["plugin"] for r in rows]


@pytest.mark.slow
def test_bench_train_reports_tokens_per_second(tmp_path):
    path = tmp_path / "train.json"
    args = ["train", "--lengths", "32", "--plugins", "fibonacci", "--tokens-per-step", "64"]
    assert main([*args, "--repeats", "1", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [r["plugin"] for r in rows] == ["dense", "fibonacci"]
    for row in rows:
        assert set(row) == ROW_KEYS | {"tokens_per_s"}
        assert row["tokens_per_s"] == pytest.approx(2 * 32 / (row["ms"] / 1e3))


def test_unknown_plugin_is_an_error(capsys):
    assert main(["attention", "--plugins", "nope"]) == 2
    assert "unknown plugins" in capsys.readouterr().err


def test_every_registered_plugin_has_a_bench_row():
    rows = bench_plugins(12, fibonacci_keys(12, 1024))
    assert {type(plugin).name for plugin in rows.values()} == set(list_attention())
    assert {"dense", "fibonacci", LEARNED} <= set(rows)


@pytest.mark.parametrize("name", list(bench_plugins(12, fibonacci_keys(12, 1024))))
def test_plugins_attend_equal_keys_per_query(name):
    """The bench's configurations give every sparse plugin fibonacci's keys per query."""
    if name == "dense":
        return
    length, window = 1024, 12
    keys = fibonacci_keys(window, length)
    slots = build_plugin(name, window, keys).build(0, 16, length).slots(length, "cpu")
    rungs = int(slots.rung_valid.sum()) if slots.n_rungs else 0  # learned: only valid rungs
    assert len(slots.distances) + rungs + slots.n_absolute == keys


@pytest.mark.slow
def test_flex_rows_are_forward_only_on_the_cpu_beside_their_plugins(tmp_path, capsys):
    """`flex` adds a FlexAttention row per slot plugin listed; on the CPU it is timed forward
    only (it has no backward there), its plugin's row divides by it (x flex), and it reports
    the share of tiles its mask keeps and its compile time (eager below one tile)."""
    path = tmp_path / "rows.json"
    args = ["attention", "--lengths", "48", "--plugins", "fibonacci", "bigbird", FLEX]
    assert main([*args, "--repeats", "1", "--json", str(path)]) == 0
    rows = {row["plugin"]: row for row in json.loads(path.read_text())}
    assert list(rows) == ["dense", "fibonacci", "bigbird", "flex:fibonacci", "flex:bigbird"]
    for name in ("fibonacci", "bigbird"):
        plugin, flex = rows[name], rows[f"flex:{name}"]
        assert (plugin["pass"], flex["pass"]) == ("fwd+bwd", "fwd")
        assert plugin["speedup_vs_flex"] == pytest.approx(flex["ms"] / plugin["ms"])
        assert flex["block_density"] == 1.0  # one tile: kept
        assert flex["compile_s"] >= 0 and flex["speedup_vs_dense"] is None
        assert "x_floor" not in flex  # the floor is forward + backward traffic
    table = capsys.readouterr().out
    assert "| T | plugin | pass | ms | x dense | x flex | tiles kept | compile s |" in table


def test_flex_is_refused_by_bench_train(capsys):
    assert main(["train", "--plugins", FLEX]) == 2
    assert "bench attention" in capsys.readouterr().err


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


@pytest.mark.parametrize("name", ["fibonacci", LEARNED, "bigbird", "sliding_window"])
@pytest.mark.parametrize("length", [300, 1000])
def test_the_flex_mask_gives_the_plugins_output(name, length):
    """FlexAttention (forward: it has no CPU backward) with the bench's block mask equals
    the plugin's reference at lengths that are not multiples of its 128-row tiles, for exact
    distances, rungs (learned, at their starting integer distances) and absolute keys."""
    import warnings

    import torch
    from torch.nn.attention.flex_attention import flex_attention

    window = 12
    pattern = build_plugin(name, window, fibonacci_keys(window, length)).build(0, 16, length)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 8, length, 64, generator=gen)
    k, v = (torch.randn(1, 2, length, 64, generator=gen) for _ in range(2))
    mask = flex_block_mask(pattern.slots(length, "cpu"), length, "cpu")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager flex warns that it is unfused
        got = flex_attention(q, k, v, block_mask=mask, enable_gqa=True)
    torch.testing.assert_close(got, pattern.reference(q, k, v), atol=1e-5, rtol=1e-5)


def test_the_sdpa_row_is_dense_on_sdpa_and_a_known_row(capsys):
    """``sdpa`` is dense pinned to SDPA (where flash-attn would serve ``dense``): its output is
    dense's causal reference, and ``--plugins sdpa`` passes the bench's row check."""
    import torch

    pattern = build_plugin("sdpa", 12, 23).build(0, 16, 64)
    assert pattern.backend == "sdpa"
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 8, 64, 16, generator=gen)
    k, v = (torch.randn(1, 2, 64, 16, generator=gen) for _ in range(2))
    torch.testing.assert_close(pattern(q, k, v), pattern.reference(q, k, v))
    assert main(["attention", "--lengths", "32", "--plugins", "sdpa", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("unknown plugins ['nope'];")  # sdpa is known


def test_the_block_mask_keeps_the_tiles_its_distances_touch():
    """Fibonacci's distances (0..13, 21, 34, ..., 610, 987) reach 987: a query tile keeps
    the tiles 0, 1, 2, 3, 4, 5, 7 and 8 tiles back (the tiles 6 back span distances
    641..895, which hold none; 9 back start at 1025), so at 4,096 the mask keeps fewer
    tiles than causal attention's; a window of 23 keys keeps the diagonal and the one
    before it; dense keeps every causal tile, the ones below the diagonal full."""
    from lit_sparse.kernels import exact_slots
    from lit_sparse_studies.bench.attention import block_density

    length, n = 4096, 32
    fibonacci = build_plugin("fibonacci", 12, fibonacci_keys(12, length)).build(0, 16, length)
    mask = flex_block_mask(fibonacci.slots(length, "cpu"), length, "cpu")
    kept = [sum(1 for back in (0, 1, 2, 3, 4, 5, 7, 8) if back <= i) for i in range(n)]
    assert mask.kv_num_blocks.flatten().tolist() == kept
    assert block_density(mask) == pytest.approx(sum(kept) / (n * (n + 1) / 2))
    window = flex_block_mask(exact_slots(list(range(23))), length, "cpu")
    assert window.kv_num_blocks.flatten().tolist() == [1] + [2] * (n - 1)
    dense = flex_block_mask(exact_slots(list(range(length))), length, "cpu")
    assert block_density(dense) == 1.0
    full = dense.full_kv_num_blocks.flatten().tolist()
    assert full == list(range(n))  # every tile below the diagonal is full


@pytest.mark.slow
def test_flex_is_compiled_past_one_tile(tmp_path):
    """At 256 tokens (two tiles) the flex row runs compiled; its compile time is reported
    apart from its timed calls."""
    path = tmp_path / "rows.json"
    args = ["attention", "--lengths", "256", "--plugins", "fibonacci", FLEX, "--repeats", "1"]
    assert main([*args, "--json", str(path)]) == 0
    rows = {row["plugin"]: row for row in json.loads(path.read_text())}
    flex = rows["flex:fibonacci"]
    assert flex["pass"] == "fwd" and flex["block_density"] == 1.0
    assert flex["compile_s"] > 10 * flex["ms"] / 1e3  # compiling costs more than a call


def test_a_failing_plugin_spares_the_others():
    """A plugin that fails in the timing process is reported; the others are timed."""
    from lit_sparse_studies.bench import rows as bench

    spec = {
        "kind": "attention",
        "length": 32,
        "device": "cpu",
        "window": 12,
        "keys": fibonacci_keys(12, 32),
        "dtype": "float32",
        "batch": 1,
        "heads": 8,
        "kv_heads": 2,
        "dim": 64,
        "repeats": 2,
        "budget": 5.0,
        "plugins": ["fibonacci", "no_such_plugin", "dense"],
        "busy_cores": [0],
    }
    measured = bench._timing(spec)
    assert set(measured["busy"]["0"]) == {"fibonacci", "dense"}
    assert all(timing["runs"] == 2 for timing in measured["busy"]["0"].values())
    assert "no_such_plugin" in measured["failed"]["no_such_plugin"]


def test_a_failed_row_carries_its_error_and_the_exit_code_is_1(tmp_path, monkeypatch, capsys):
    """The parent's side: the bench's children run in this process (so the patched list of
    plugins reaches them), one plugin fails in them, its row holds the error."""
    from lit_sparse_studies.bench import plan as bench
    from lit_sparse_studies.bench import rows

    def in_process(spec):  # as run_child: None when the child fails
        try:
            return json.loads(json.dumps(rows.measure(spec)))
        except Exception:
            return None

    monkeypatch.setattr(
        bench, "plugin_names", lambda window=12: ["dense", "fibonacci", "no_such_plugin"]
    )
    monkeypatch.setattr(rows, "run_child", in_process)
    path = tmp_path / "rows.json"
    args = ["attention", "--lengths", "32", "--plugins", "fibonacci", "no_such_plugin"]
    assert main([*args, "--repeats", "1", "--json", str(path)]) == 1
    rows = {row["plugin"]: row for row in json.loads(path.read_text())}
    assert rows["fibonacci"]["ms"] > 0 and rows["dense"]["ms"] > 0
    assert rows["no_such_plugin"]["ms"] is None
    assert "no_such_plugin" in rows["no_such_plugin"]["error"]
    assert "no_such_plugin failed" in capsys.readouterr().err


def test_training_is_measured_with_subnormals_flushed_as_fit_runs(monkeypatch):
    """A train row reads and writes subnormals as zero while it is measured, as fit does (and
    keeps IEEE floats under LIT_SPARSE_KEEP_DENORMALS, as fit does); an attention row keeps
    IEEE floats. The caller's mode is restored after."""
    from lit_sparse.kernels.denormals import KEEP_VARIABLE, denormals_flushed
    from lit_sparse_studies.bench import rows

    monkeypatch.setattr(rows, "_memory", lambda spec: {"flushed": denormals_flushed()})
    spec = {"kind": "train", "device": "cpu", "mode": "memory"}
    assert rows.measure(spec) == {"flushed": True}
    assert not denormals_flushed()
    assert rows.measure({**spec, "kind": "attention"}) == {"flushed": False}
    monkeypatch.setenv(KEEP_VARIABLE, "1")
    assert rows.measure(spec) == {"flushed": False}


def test_heads_must_be_a_multiple_of_kv_heads(capsys):
    assert main(["attention", "--heads", "6", "--kv-heads", "4"]) == 2
    assert "--heads 6" in capsys.readouterr().err


@pytest.mark.slow
def test_busy_cores_time_every_row_idle_and_loaded(tmp_path, capsys):
    path = tmp_path / "rows.json"
    args = ["attention", "--lengths", "32", "--plugins", "fibonacci", "--busy-cores", "0", "1"]
    assert main([*args, "--repeats", "1", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [(r["plugin"], r["busy_cores"]) for r in rows] == [
        ("dense", 0),
        ("fibonacci", 0),
        ("dense", 1),
        ("fibonacci", 1),
    ]
    assert [r["x_idle"] for r in rows[:2]] == [1.0, 1.0]
    for idle, loaded in zip(rows[:2], rows[2:], strict=True):
        assert loaded["x_idle"] == pytest.approx(loaded["ms"] / idle["ms"])
    assert "| busy cores | ms fwd+bwd | x idle |" in capsys.readouterr().out


def test_busy_cores_spin_only_inside_the_block():
    with busy_cores(2) as spinners:
        assert len(spinners) == 2 and all(s.poll() is None for s in spinners)
    assert all(s.poll() is not None for s in spinners)


def test_busy_cores_must_leave_a_core_to_the_bench(capsys):
    cores = len(os.sched_getaffinity(0))
    assert main(["attention", "--busy-cores", str(cores)]) != 0
    assert f"--busy-cores {cores}: must be in 0..{cores - 1}" in capsys.readouterr().err


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


def test_the_recall_study_shapes_are_its_configs_and_train_at_the_asked_positions():
    """``--shape mqar128|distance|far_mqar``: the study's model, T and batch (from its task
    config), one step of the study's loss; ``--compile`` adds a compiled row per plugin."""
    import torch
    import yaml

    from lit_sparse_studies.bench.train import COMPILED, train_case

    for name in ("mqar128", "distance", "far_mqar"):
        config = yaml.safe_load(open(f"configs/study/recall/{name}.yaml"))
        shape, arch, data = TRAIN_SHAPES[name], config["model"]["arch"], config["data"]
        assert (shape["d_model"], shape["ffn_hidden"], shape["vocab_size"]) == (
            arch["d_model"], arch["ffn_hidden"], data["init_args"]["vocab_size"]
        )  # fmt: skip
        assert shape["n_layers"] == arch["n_layers"]
        assert (shape["length"], shape["batch"]) == (
            data["init_args"]["seq_len"], data["init_args"]["batch_size"]
        )  # fmt: skip
        assert shape["task"].get("gap", 0) == data["init_args"].get("gap", 0)
    args = parse_bench(["train", "--shape", "mqar128", "--compile"])
    args.plugins, args.lengths = ["fibonacci"], None
    assert bench_rows(args) == ["dense", "dense" + COMPILED, "fibonacci", "fibonacci" + COMPILED]
    assert length_spec(args, 128)["batch"] == 256
    spec = {**length_spec(args, 128), "plugin": "fibonacci", "batch": 4}
    case, _ = train_case(spec)
    step = case(128)
    torch.manual_seed(0)
    step()  # one AdamW step of the loss at the 8 queries of each example
    far = parse_bench(["train", "--shape", "far_mqar"])
    far.plugins, far.lengths = ["fibonacci"], None
    spec = {**length_spec(far, 256), "plugin": "fibonacci"}
    train_case(spec)[0](64)  # the memory row's warm-up: a batch at 64, where G = 96 has no room
