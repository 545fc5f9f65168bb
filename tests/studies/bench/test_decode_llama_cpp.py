"""``bench decode --llama-cpp`` (lit_sparse_studies/bench/decode_llama_cpp.py): llama.cpp on
the bench's dense weights as GGUF files (f32, q8_0; flash attention on and off), its cache and
floor. The rest of ``bench decode``: tests/studies/bench/test_decode.py; ``open_llama`` on an
export: tests/formats/test_gguf.py."""

from __future__ import annotations

import json

import pytest

from lit_sparse_studies.bench.decode_llama_cpp import LLAMA_CPP_ROWS

from .decode_cli import TINY, main


@pytest.mark.slow
def test_bench_decode_llama_cpp_rows(tmp_path, capsys):
    """--llama-cpp adds llama.cpp on the dense weights as GGUF files (f32, q8_0; flash
    attention on and off) beside the float32 rows: its cache holds the whole computed context,
    its floor counts the GGUF's bytes (q8_0: about a quarter of f32's)."""
    pytest.importorskip("llama_cpp")
    path = tmp_path / "decode.json"
    args = ["decode", *TINY, "--vocab-size", "320", "--contexts", "120", "--tokens", "3"]
    args += ["--rss-tokens", "0", "--plugins", "dense", "--llama-cpp", "--threads", "1"]
    assert main([*args, "--json", str(path)]) == 0
    timed = {row["plugin"]: row for row in json.loads(path.read_text())}
    assert list(timed) == ["dense", *LLAMA_CPP_ROWS]
    f32, q8, f32_nofa, q8_nofa = (timed[name] for name in LLAMA_CPP_ROWS)
    for row in (f32, q8, f32_nofa, q8_nofa):
        assert row["ms_per_token"] > 0 and row["x_lit_sparse"] > 0 and row["x_floor"] > 0
        # llama.cpp rounds its context (120 + 2 warm-up + 3 timed + 1) up to a multiple of 256
        flash = "no flash attention" if row is f32_nofa or row is q8_nofa else "flash attention"
        assert row["cache"] == f"llama.cpp KV cache (f16): 256 rows a layer, {flash}"
    assert f32["weight_bytes"] == f32_nofa["weight_bytes"] == timed["dense"]["weight_bytes"]
    assert q8["weight_bytes"] == q8_nofa["weight_bytes"] < 0.5 * f32["weight_bytes"]
    assert "llama_cpp_q8_0" in capsys.readouterr().out
