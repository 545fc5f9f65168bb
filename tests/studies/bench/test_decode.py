"""Smoke tests of ``bench decode``: a tiny model shape, the table, the JSON rows and the RSS
check. Speed is reported by the bench, never asserted here."""

from __future__ import annotations

import json

import pytest
from torch import nn

from lit_sparse_studies.bench.decode import (
    PLUGINS,
    DecodeBenchSpec,
    decode_model,
    decode_plugin,
    weight_bytes,
)

from .decode_cli import TINY, main

pytestmark = pytest.mark.slow  # trains, starts processes or benches

SPEC = {"n_layers": 2, "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 256}
SPEC.update(training_length=64, window=4, rss_tokens=0)


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
    assert "ms/step" in out and "ring of 90 rows" in out and "RSS check (fibonacci)" in out


def test_llama_cpp_options_are_checked_before_any_work(capsys):
    for extra, why in (
        (["--device", "cuda"], "the llama.cpp rows time its CPU build"),
        (["--dtype", "bfloat16"], "include batch 1 and float32"),
        (["--vocab-size", "100"], "vocabulary needs at least 258 rows"),
    ):
        assert main(["decode", "--llama-cpp", *extra]) == 2
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1


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


def test_batches_dtypes_the_floor_and_the_breakdown(tmp_path, capsys):
    """One process per batch size; each row's tokens/s is its batch over its step time, its
    floor the weights' bytes over the copy bandwidth of its process (bfloat16: half the
    matrices' bytes; --quantize int8: rows of dtype int8 with the same columns, their bytes
    the int8 matrices, input width padded to 16, and a float32 scale per output channel),
    and the breakdown's parts are there."""
    path = tmp_path / "decode.json"
    args = ["decode", *TINY, "--contexts", "100", "--tokens", "2", "--rss-tokens", "0"]
    args += ["--plugins", "dense", "fibonacci", "--batch", "1", "3"]
    args += ["--dtype", "float32", "bfloat16", "--quantize", "int8", "--breakdown"]
    assert main([*args, "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    dtypes = ("float32", "bfloat16", "int8")
    assert [(r["batch"], r["dtype"], r["plugin"]) for r in rows] == [
        (b, d, p) for b in (1, 3) for d in dtypes for p in ("dense", "fibonacci")
    ]
    model = decode_model(DecodeBenchSpec(**SPEC), "fibonacci")
    fp32_bytes = sum(p.numel() * 4 for p in model.parameters())
    norms = sum(p.numel() * 4 for n, p in model.named_parameters() if "norm" in n)
    matrices = [m.weight for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    stored = {
        "float32": fp32_bytes,
        "bfloat16": norms + (fp32_bytes - norms) // 2,
        "int8": norms + sum(w.shape[0] * (-(-w.shape[1] // 16) * 16 + 4) for w in matrices),
    }
    assert weight_bytes(model) == stored["float32"]
    for row in rows:
        assert set(row) == set(rows[0])
        assert row["tokens_per_s"] == pytest.approx(row["batch"] / (row["ms_per_step"] / 1e3))
        assert row["ms_per_token"] == pytest.approx(row["ms_per_step"] / row["batch"])
        assert row["x_floor"] == pytest.approx(row["ms_per_step"] / row["floor_ms"])
        floor = 1e3 * row["weight_bytes"] / (row["bandwidth_gb_s"] * 1e9)
        assert row["floor_ms"] == pytest.approx(floor)
        assert row["weight_bytes"] == stored[row["dtype"]]
        assert all(row[key] > 0 for key in ("proj_ms", "attn_ms", "head_ms", "other_ms"))
    table = capsys.readouterr().out
    assert "| context | batch | dtype | plugin | ms/step | tokens/s | x dense | x floor |" in table
    assert "| proj ms | attn ms | head ms | other ms |" in table
    assert "| 100 | 3 | int8 | fibonacci |" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--quantize", "int4"], "error: quantize='int4': expected one of none, int8\n"),
        (
            ["--quantize", "int8", "--device", "cuda"],
            "error: quantize='int8' with device='cuda': the int8 kernel runs on the CPU only\n",
        ),
    ],
)
def test_a_bad_quantize_is_one_line(args, message, capsys):
    assert main(["decode", *args]) == 2
    assert capsys.readouterr().err == message


def test_a_batch_of_sequences_decodes_like_each_alone():
    """The batched ring buffers: greedy steps of 3 sequences at once give each sequence's
    own tokens (the batch shares nothing but the weights)."""
    import torch

    from lit_sparse_studies.bench.decode import _Decoder

    spec = DecodeBenchSpec(**SPEC)
    model = decode_model(spec, "fibonacci")
    together = _Decoder(model, 3, 50, 8)
    together.token = torch.tensor([[1], [2], [3]])
    alone = []
    for row in range(3):
        single = _Decoder(model, 1, 50, 8)
        with torch.inference_mode():  # the caches are inference tensors
            for layer, source in zip(single.cache.layers, together.cache.layers, strict=True):
                layer.cache.k.copy_(source.cache.k[row : row + 1])
                layer.cache.v.copy_(source.cache.v[row : row + 1])
        single.token = together.token[row : row + 1].clone()
        alone.append(single)
    for _ in range(5):
        together.step()
        for single in alone:
            single.step()
        assert torch.equal(together.token, torch.cat([single.token for single in alone]))
