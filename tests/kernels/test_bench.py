"""Smoke tests of ``lit_sparse.bench``: tiny lengths, the table and the JSON schema.

Speed is reported by the bench, never asserted here.
"""

from __future__ import annotations

import json

import pytest

from lit_sparse import list_attention
from lit_sparse.bench import LEARNED, build_plugin, fibonacci_keys, main


def test_bench_attention_writes_rows(tmp_path, capsys):
    path = tmp_path / "rows.json"
    args = ["attention", "--lengths", "32", "48", "--plugins", "fibonacci", LEARNED]
    assert main([*args, "--repeats", "1", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [(r["T"], r["plugin"]) for r in rows] == [
        (t, p) for t in (32, 48) for p in ("dense", "fibonacci", LEARNED)
    ]
    for row in rows:
        assert set(row) == {"T", "plugin", "ms", "speedup_vs_dense", "peak_mb"}
        assert row["ms"] > 0 and row["peak_mb"] >= 0 and row["speedup_vs_dense"] > 0
    assert [r["speedup_vs_dense"] for r in rows if r["plugin"] == "dense"] == [1.0, 1.0]
    table = capsys.readouterr().out
    assert "x dense" in table and "fibonacci_learned" in table


def test_bench_train_reports_tokens_per_second(tmp_path):
    path = tmp_path / "train.json"
    args = ["train", "--lengths", "32", "--plugins", "fibonacci", "--tokens-per-step", "64"]
    assert main([*args, "--repeats", "1", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [r["plugin"] for r in rows] == ["dense", "fibonacci"]
    for row in rows:
        assert set(row) == {"T", "plugin", "ms", "tokens_per_s", "speedup_vs_dense", "peak_mb"}
        assert row["tokens_per_s"] == pytest.approx(2 * 32 / (row["ms"] / 1e3))


def test_dense_is_skipped_above_its_maximum_length(tmp_path):
    path = tmp_path / "rows.json"
    args = ["attention", "--lengths", "40", "--plugins", "sliding_window"]
    assert main([*args, "--dense-max-length", "16", "--repeats", "1", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [(r["plugin"], r["speedup_vs_dense"]) for r in rows] == [("sliding_window", None)]


def test_unknown_plugin_is_an_error(capsys):
    assert main(["attention", "--plugins", "nope"]) == 2
    assert "unknown plugins" in capsys.readouterr().err


@pytest.mark.parametrize("name", [*list_attention(), LEARNED])
def test_plugins_attend_equal_keys_per_query(name):
    """The bench's configurations give every sparse plugin fibonacci's keys per query."""
    if name == "dense":
        return
    length, window = 1024, 12
    keys = fibonacci_keys(window, length)
    slots = build_plugin(name, window, keys).build(0, 16, length).slots(length, "cpu")
    rungs = int(slots.rung_valid.sum()) if slots.n_rungs else 0  # learned: only valid rungs
    assert len(slots.distances) + rungs + slots.n_absolute == keys
