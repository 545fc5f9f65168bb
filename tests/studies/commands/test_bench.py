"""Smoke tests of ``lit_sparse_studies.commands.bench``: tiny lengths, the table and the JSON
schema.

Speed is reported by the bench, never asserted here.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from lit_sparse_studies.bench.attention import (
    FLEX,
    LEARNED,
    build_plugin,
    floor_bytes,
)

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


def test_busy_cores_must_leave_a_core_to_the_bench(capsys):
    cores = len(os.sched_getaffinity(0))
    assert main(["attention", "--busy-cores", str(cores)]) != 0
    assert f"--busy-cores {cores}: must be in 0..{cores - 1}" in capsys.readouterr().err
