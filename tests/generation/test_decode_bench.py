"""Smoke tests of ``bench decode``: a tiny model shape, the table, the JSON rows and the RSS
check. Speed is reported by the bench, never asserted here."""

from __future__ import annotations

import json

import pytest

from lit_sparse.bench.decode import PLUGINS, decode_plugin
from lit_sparse.bench.decode_transformers import TRANSFORMERS_ROWS
from lit_sparse.commands.bench import main

pytestmark = pytest.mark.slow  # trains, starts processes or benches

TINY = ["--n-layers", "2", "--d-model", "32", "--n-heads", "4", "--n-kv-heads", "2"]
TINY += ["--vocab-size", "256", "--training-length", "64", "--window", "4"]


def test_bench_decode_writes_rows_and_the_rss_check(tmp_path, capsys):
    path = tmp_path / "decode.json"
    args = ["decode", *TINY, "--contexts", "120", "--tokens", "2"]
    args += ["--rss-tokens", "40", "--rss-context", "200", "--rss-after", "10"]
    assert main([*args, "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    timed = {row["plugin"]: row for row in rows if "check" not in row}
    assert list(timed) == list(PLUGINS)
    for row in timed.values():
        assert {"context", "plugin", "ms_per_token", "cache_mb", "speedup_vs_dense"} <= set(row)
        assert row["context"] == 120 and row["ms_per_token"] > 0
    assert timed["dense"]["speedup_vs_dense"] == 1.0
    # dense and bigbird keep the whole past: the context, 2 warm-up and 2 timed tokens and
    # one more = 125 rows; fibonacci a ring of 90 (its rungs reach 89)
    assert timed["bigbird"]["cache_mb"] == timed["dense"]["cache_mb"]
    assert timed["fibonacci"]["cache_mb"] == pytest.approx(timed["dense"]["cache_mb"] * 90 / 125)
    assert timed["sliding_window"]["cache_mb"] < timed["fibonacci"]["cache_mb"]
    (rss,) = [row for row in rows if row.get("check") == "rss"]
    assert (rss["plugin"], rss["context"], rss["tokens"], rss["after"]) == (
        "fibonacci",
        200,
        40,
        10,
    )
    assert rss["rss_growth_mb"] >= 0
    out = capsys.readouterr().out
    assert "ms/token" in out and "ring of 90 rows" in out and "RSS check (fibonacci)" in out


@pytest.mark.slow
def test_bench_decode_transformers_rows(tmp_path, capsys):
    """--transformers adds transformers' generate on the same weights: lit_sparse's ring
    through LitSparseCache (the same bytes as fibonacci's), the stock Llama's DynamicCache
    (the whole past) and Mistral's sliding-window cache (W rows: sliding_window - 1)."""
    pytest.importorskip("transformers")
    path = tmp_path / "decode.json"
    args = ["decode", *TINY, "--contexts", "120", "--tokens", "8", "--rss-tokens", "0"]
    assert (
        main(
            [
                *args,
                "--plugins",
                "dense",
                "fibonacci",
                "sliding_window",
                "--transformers",
                "--json",
                str(path),
            ]
        )
        == 0
    )
    timed = {row["plugin"]: row for row in json.loads(path.read_text())}
    assert list(timed) == ["dense", "fibonacci", "sliding_window", *TRANSFORMERS_ROWS]
    for name in TRANSFORMERS_ROWS:
        assert timed[name]["ms_per_token"] > 0 and timed[name]["x_lit_sparse"] > 0
    assert timed["hf_fibonacci"]["cache_mb"] == timed["fibonacci"]["cache_mb"]
    assert "LitSparseCache: 2 layers: ring of 90 rows" == timed["hf_fibonacci"]["cache"]
    # the DynamicCache holds what was decoded: the context and the tokens so far
    assert timed["hf_llama_dense"]["cache"].startswith("DynamicCache: ")
    keys = len(decode_plugin("sliding_window", 4, 64).build(0, 2, 64).distances(4096))
    assert timed["hf_mistral_sliding"]["cache"] == f"DynamicCache: {keys - 1} rows a layer"
    assert "x lit_sparse" in capsys.readouterr().out


def test_bad_rss_options_are_one_line(capsys):
    assert main(["decode", "--rss-tokens", "10", "--rss-after", "10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: rss_tokens=10, rss_after=10: need 0") and err.count("\n") == 1


@pytest.mark.parametrize("name", PLUGINS)
def test_sparse_plugins_attend_equal_keys_per_query(name):
    if name == "dense":
        return
    slots = decode_plugin(name, 8, 1024).build(0, 16, 1024).slots(4096, "cpu")
    rungs = int(slots.rung_valid.sum()) if slots.n_rungs else 0
    assert len(slots.distances) + rungs + slots.n_absolute == 19  # fibonacci's at W = 8
