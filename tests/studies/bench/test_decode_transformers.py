"""``bench decode --transformers`` (lit_sparse_studies/bench/decode_transformers.py):
transformers' generate on the bench's weights, through LitSparseCache, the stock Llama's
DynamicCache and Mistral's sliding-window cache. The rest of ``bench decode``:
tests/studies/bench/test_decode.py."""

from __future__ import annotations

import json

import pytest

from lit_sparse_studies.bench.decode import decode_plugin
from lit_sparse_studies.bench.decode_transformers import TRANSFORMERS_ROWS

from .decode_cli import TINY, main


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
