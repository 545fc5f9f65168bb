"""Chunked prefill equals the whole prompt's, the output layer runs for the last position
only, and the caches grow with the sequence instead of being allocated for its end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from lit_sparse import build_attention, generate
from lit_sparse.attention.decoding import DecodingMemoryError, KVCache, SlotDecoder
from lit_sparse.errors import ConfigError
from lit_sparse.generation.prefill import prefill

from .cases import TOTAL, VOCAB, generation_cases, tiny_model

CASES = generation_cases()


def ids(batch: int = 2, length: int = TOTAL, seed: int = 11) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("case", sorted(CASES))
def test_chunked_prefill_gives_the_whole_prompts_next_token_logits(case):
    """Chunks of 7 and of 20 tokens over a prompt of 4x the training length (longer than
    the largest distance, so the rings wrap between chunks) give the next-token logits of
    the whole prompt at once within 1e-4, for every plugin's decoder."""
    model = tiny_model(CASES[case])
    prompt = ids()
    whole = prefill(model, prompt, model.new_cache(2, TOTAL), chunk=None)
    for chunk in (7, 20):
        chunked = prefill(model, prompt, model.new_cache(2, TOTAL), chunk=chunk)
        torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-4)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_position_of_chunks_equals_the_full_forward(case):
    """Uneven chunks (5, then 9, 1, 17, ...) give every position's logits of the full forward."""
    model = tiny_model(CASES[case])
    sequence = ids()
    with torch.inference_mode():
        full = model(sequence)
        cache, start, parts = model.new_cache(2, TOTAL), 0, []
        for size in (5, 9, 1, 17, 2, 30):
            parts.append(model(sequence[:, start : start + size], cache))
            start += size
    torch.testing.assert_close(torch.cat(parts, dim=1), full[:, :start], rtol=0, atol=1e-4)


def test_the_output_layer_runs_for_the_kept_positions_only():
    model = tiny_model(build_attention("fibonacci", window=2))
    sequence = ids(length=40)
    with torch.inference_mode():
        full = model(sequence)
        last = model(sequence, logits_to_keep=1)
        three = model(sequence, logits_to_keep=3)
    assert last.shape == (2, 1, VOCAB) and three.shape == (2, 3, VOCAB)
    torch.testing.assert_close(last, full[:, -1:], rtol=0, atol=1e-6)
    torch.testing.assert_close(three, full[:, -3:], rtol=0, atol=1e-6)


def test_a_generation_gives_the_same_tokens_with_and_without_chunks():
    model = tiny_model(build_attention("fibonacci", window=2, schedule="learned"))
    prompt = ids(length=50)
    whole = generate(model, prompt, 10, temperature=0, prefill_chunk=None).run()
    assert torch.equal(generate(model, prompt, 10, temperature=0, prefill_chunk=6).run(), whole)


@pytest.mark.parametrize("chunk", [0, -2, 2.5, True])
def test_a_bad_chunk_is_one_line(chunk):
    model = tiny_model(build_attention("dense"))
    with pytest.raises(ConfigError, match=r"^prefill_chunk=.*: must be an integer >= 1"):
        generate(model, ids(), 3, prefill_chunk=chunk)


def test_a_dense_cache_grows_with_the_sequence():
    """A dense model asked for a billion tokens allocates nothing up front: its cache grows
    by doubling as positions arrive, to the rows written so far (not the billion)."""
    model = tiny_model(build_attention("dense"), n_layers=1)
    generation = generate(model, ids(1, 6), 10**9, temperature=0)
    row = 2 * 2 * 8 * 4  # k and v, 2 KV heads, head dim 8, fp32
    for step, _ in enumerate(generation, start=1):
        if step == 100:  # 105 positions written
            assert generation.cache.layers[0].cache.capacity == 6 + 10**9 - 1
            assert 105 * row <= generation.stats.cache_bytes <= 2 * 105 * row
            break
    assert model.new_cache(1, 10**9).nbytes == 0


def test_the_cache_keeps_every_row_while_it_grows():
    """Rows written before a growth are still there after it (positions 0..n-1 in order
    until the ring wraps), and a ring never grows past its capacity."""
    model = tiny_model(build_attention("sliding_window", window=2))
    shape = model.new_cache(1, 100).layers[0].shape
    cache = KVCache(shape, capacity=40)
    rows = torch.randn(1, 2, 100, 8, generator=torch.Generator().manual_seed(0))
    for position in range(35):
        cache.write(
            position, rows[:, :, position : position + 1], rows[:, :, position : position + 1]
        )
    assert cache.allocated == 40 and torch.equal(cache.k[:, :, :35], rows[:, :, :35])
    cache.write(35, rows[:, :, 35:60], rows[:, :, 35:60])  # wraps: positions 20..59 kept
    assert cache.allocated == 40
    keys, _ = cache.past(20, 60)
    assert torch.equal(keys, rows[:, :, 20:60])


def test_a_growth_that_does_not_fit_in_memory_is_one_line():
    model = tiny_model(build_attention("dense"), n_layers=1)
    cache = model.new_cache(1, 10**15)
    with pytest.raises(DecodingMemoryError) as err:
        cache.layers[0].cache.reserve(10**14)
    message = str(err.value)
    assert (
        message.startswith("decoding cache: a layer's keys and values for") and "\n" not in message
    )
    assert "max_new_tokens" in message


def test_a_slot_decoders_chunk_reads_only_its_reach():
    """After the ring wrapped, a chunk reads the last `reach` positions from the ring (a few
    hundred rows here), not the whole past."""
    model = tiny_model(build_attention("fibonacci", window=2), n_layers=1)
    decoder = model.new_cache(1, 1000).layers[0]
    assert isinstance(decoder, SlotDecoder) and not decoder.absolute
    assert decoder.cache.capacity == decoder.reach < 1000


PEAK_SCRIPT = """
import json, sys, torch
from lit_sparse import LanguageModel, ModelConfig, build_attention
from lit_sparse_studies.bench.timing import peak_rss_mb
from lit_sparse.generation.prefill import prefill
tokens = int(sys.argv[1])
config = ModelConfig(vocab_size=8192, context_length=256, n_layers=5, d_model=96, n_heads=4,
                     n_kv_heads=2, head_dim=24)
model = LanguageModel(config, build_attention("fibonacci", schedule="coprime")).eval()
ids = torch.randint(0, 8192, (1, tokens), generator=torch.Generator().manual_seed(0))
logits = prefill(model, ids, model.new_cache(1, tokens + 1))
print(json.dumps({"shape": list(logits.shape),
                  "peak_mb": peak_rss_mb()}))
"""


@pytest.mark.slow
def test_a_1_mb_prompt_on_the_quickstart_model_stays_under_1_5_gb():
    """Issue 24, item 6: a 1 MB prompt is 285,716 tokens of the embedded tokenizer; the
    quickstart model (5 layers, d_model 96, vocabulary 8,192) prefills it within 1.5 GB
    of peak resident memory (the (T, vocab) logits alone would be 9.4 GB)."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, "285716"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shape"] == [1, 8192]
    assert result["peak_mb"] < 1536, result
