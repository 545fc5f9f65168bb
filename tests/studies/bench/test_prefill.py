"""Smoke test of ``bench prefill``: one fresh process per length, plugin and chunk, its rows
and its table. Speed is reported by the bench, never asserted here."""

from __future__ import annotations

import json

import pytest

from .test_decode import TINY, main

pytestmark = pytest.mark.slow  # trains, starts processes or benches


def test_bench_prefill_rows_whole_and_in_chunks(tmp_path, capsys):
    """One fresh process per length, plugin and chunk: tokens/s is the length over the
    prefill's seconds, the peak and its rise are there, and the cache filled is the
    pattern's (dense: the whole prompt; fibonacci: its ring)."""
    path = tmp_path / "prefill.json"
    args = ["prefill", *TINY, "--lengths", "300", "--plugins", "fibonacci", "dense"]
    assert main([*args, "--chunk", "64", "0", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [(r["T"], r["plugin"], r["chunk"]) for r in rows] == [
        (300, "fibonacci", 64),
        (300, "fibonacci", 0),
        (300, "dense", 64),
        (300, "dense", 0),
    ]
    row_bytes = 2 * 2 * 2 * 8 * 4 / 2**20  # 2 layers, k and v, 2 KV heads, head dim 8, fp32
    for row in rows:
        assert row["tokens_per_s"] == pytest.approx(300 / row["seconds"])
        assert row["peak_rss_mb"] > row["rise_mb"] >= 0
        # fibonacci: its ring, the farthest rung below 300 (233, W = 4) + 1; dense: the whole
        # prompt at once allocates its 300 rows, in chunks its rows double (64, 128, 256) up
        # to the capacity asked for, the prompt + 1
        rows_held = {"fibonacci": 234, "dense": 300 if row["chunk"] == 0 else 301}[row["plugin"]]
        assert row["cache_mb"] == pytest.approx(rows_held * row_bytes)
    out = capsys.readouterr().out
    assert "| T | plugin | chunk | s | tokens/s | peak RSS MB | rise MB | cache MB |" in out
    assert "| 300 | dense | whole |" in out
