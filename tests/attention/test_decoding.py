"""Incremental decoding equals the full forward, for every registered plugin (through its
slots or its own decoder), and the caches stay as small as the patterns' reach."""

from __future__ import annotations

import pytest
import torch

from lit_sparse import LanguageModel, build_attention, list_attention
from lit_sparse.attention import AttentionPattern, AttentionPlugin
from lit_sparse.attention.decoding import RecomputeDecoder, SlotDecoder
from lit_sparse.kernels.reference import masked_attention
from tests.generation.cases import (
    TOTAL,
    TRAINING_LENGTH,
    VOCAB,
    generation_cases,
    tiny_config,
    tiny_model,
)

CASES = generation_cases()
SHORT, LONG = 5, TOTAL - 6  # prompts shorter and longer than the largest distance (55 at 64)


def test_every_registered_plugin_is_decoded():
    assert {type(plugin).name for plugin in CASES.values()} >= set(list_attention())


def cached_logits(model: LanguageModel, ids: torch.Tensor, prompt: int) -> torch.Tensor:
    """Logits of ``ids`` from a prefill of ``prompt`` tokens, then one token at a time."""
    cache = model.new_cache(ids.shape[0], ids.shape[1])
    with torch.inference_mode():
        logits = [model(ids[:, :prompt], cache)]
        for t in range(prompt, ids.shape[1]):
            logits.append(model(ids[:, t : t + 1], cache))
    return torch.cat(logits, dim=1)


@pytest.mark.parametrize("case", sorted(CASES))
def test_prefill_and_decoding_equal_the_full_forward(case):
    """Every position's logits within 1e-4 (fp32), to 4x the training length, for a prompt
    shorter than the largest distance (the ring fills while decoding) and one longer (the
    prefill wraps it), batch 2, GQA, learned alphas at non-integer values."""
    model = tiny_model(CASES[case])
    ids = torch.randint(0, VOCAB, (2, TOTAL), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        full = model(ids)
    for prompt in (SHORT, LONG):
        torch.testing.assert_close(cached_logits(model, ids, prompt), full, rtol=0, atol=1e-4)


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_are_prefix_consistent(case):
    """Position t's logits do not depend on whether the sequence ends at t or goes on to
    4x the training length: what makes decoding well defined."""
    model = tiny_model(CASES[case])
    ids = torch.randint(0, VOCAB, (1, TOTAL), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        full = model(ids)
        for end in (1, 6, TRAINING_LENGTH - 1, TRAINING_LENGTH, TRAINING_LENGTH + 1, 40, 63):
            torch.testing.assert_close(model(ids[:, :end]), full[:, :end], rtol=0, atol=1e-5)


def test_the_prompts_straddle_the_largest_distance():
    model = tiny_model(CASES["fibonacci-fixed-fibonacci-use"])
    largest = max(max(p.distances(TOTAL)) for p in model.patterns)
    assert largest == 55 and SHORT < largest < LONG


def test_fibonacci_caches_are_rings_of_the_largest_distance():
    """Fixed alpha = 1, W = 2 at 64 tokens: distances up to 55 -> 56 rows per layer; a learned
    rung reads floor(alpha f) and the row before it; BigBird and dense keep the whole past."""
    expect = {
        "fibonacci-fixed-fibonacci-use": [56, 56],
        "fibonacci-fixed-fibonacci-drop": [14, 14],  # the training length's 13 + 1
        "sliding_window": [3, 3],
        "bigbird": [TOTAL, TOTAL],
        "dense": [TOTAL, TOTAL],
    }
    for case, rows in expect.items():
        cache = tiny_model(CASES[case]).new_cache(1, TOTAL)
        assert [layer.cache.capacity for layer in cache.layers] == rows, case
    learned = tiny_model(CASES["fibonacci-learned-fibonacci-use"])
    cache = learned.new_cache(1, TOTAL)
    for pattern, layer in zip(learned.patterns, cache.layers, strict=True):
        alpha = float(pattern.alpha.detach())
        lows = [int(alpha * f) for f in (1, 2, 3, 5, 8, 13, 21, 34, 55) if int(alpha * f) < TOTAL]
        assert layer.cache.capacity == max(lows) + 2, alpha


@pytest.mark.slow
def test_a_fixed_fibonacci_cache_does_not_grow_past_the_largest_distance():
    """Decoding 3,000 tokens: the caches hold 988 rows a layer (largest distance 987 + 1)
    after 1,500 tokens and after 3,000, whatever the generation's length; a dense model's
    cache holds the whole past."""
    from lit_sparse import generate

    model = tiny_model(build_attention("fibonacci", window=8), n_layers=1, training_length=64)
    prompt = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(3))
    generation = generate(model, prompt, 3000, temperature=0)
    sizes = {}
    for step, _ in enumerate(generation, start=1):
        if step in (1500, 3000):
            layer = generation.cache.layers[0]
            storage = sum(t.untyped_storage().nbytes() for t in (layer.cache.k, layer.cache.v))
            sizes[step] = (generation.cache.nbytes, storage)
    ring = 2 * 1 * 2 * 988 * 8 * 4  # k and v, batch 1, 2 KV heads, 988 rows, head dim 8, fp32
    assert sizes[1500] == sizes[3000] == (ring, ring)
    shorter = generate(model, prompt, 1500, temperature=0)
    shorter.run()
    assert shorter.stats.cache_bytes == ring  # the same ring whatever the generation's length
    dense = tiny_model(build_attention("dense"), n_layers=1, training_length=64)
    whole = generate(dense, prompt, 3000, temperature=0)
    whole.run()
    assert whole.stats.cache_bytes == 2 * 2 * 3003 * 8 * 4 > ring  # the whole past


def test_lengths_add_no_table_or_slot_entries():
    """Forwards at 40 lengths and 300 decoding steps: one RoPE table per device and dtype,
    a bounded number of slot sets per layer."""
    model = tiny_model(build_attention("fibonacci", window=2, schedule="learned"))
    rope = model.blocks[0].attn.rope
    with torch.inference_mode():
        for length in range(1, 41):
            model(torch.zeros(1, length, dtype=torch.long))
        generation = torch.zeros(1, 300, dtype=torch.long)
        cache = model.new_cache(1, 300)
        model(generation[:, :1], cache)
        for t in range(1, 300):
            model(generation[:, t : t + 1], cache)
    assert len(rope._tables) == 1
    for pattern in model.patterns:
        assert len(pattern._cache) <= 8 and len(pattern._rung_cache) <= 8


class BandPattern(AttentionPattern):
    """A pattern with a custom forward and no slots: distances 0..2 through a dense mask."""

    def forward(self, q, k, v):
        length = q.shape[-2]
        i = torch.arange(length)
        rel = i[:, None] - i[None, :]
        return masked_attention(q, k, v, (rel >= 0) & (rel <= 2))

    def reference(self, q, k, v):
        return self.forward(q, k, v)

    def distances(self, length):
        return list(range(min(2, length - 1) + 1))


class BandAttention(AttentionPlugin):
    def build(self, layer, n_layers, training_length):
        return BandPattern(training_length)


def test_a_pattern_without_slots_decodes_by_rerunning_its_forward():
    model = tiny_model(BandAttention())
    ids = torch.randint(0, VOCAB, (2, 30), generator=torch.Generator().manual_seed(4))
    cache = model.new_cache(2, 30)
    assert all(isinstance(layer, RecomputeDecoder) for layer in cache.layers)
    with torch.inference_mode():
        full = model(ids)
    torch.testing.assert_close(cached_logits(model, ids, 7), full, rtol=0, atol=1e-4)


def test_a_slot_pattern_with_its_own_math_does_not_get_the_slot_decoder():
    """A subclass whose reference is not its slots' would be decoded wrongly from the slots:
    it falls back to rerunning its forward (the Gaussian read has its own decoder)."""
    plain = tiny_model(CASES["fibonacci-learned-fibonacci-use"]).new_cache(1, 8)
    gaussian = tiny_model(CASES["fibonacci-learned-gaussian-use"]).new_cache(1, 8)
    assert all(isinstance(layer, SlotDecoder) for layer in plain.layers)
    assert not any(isinstance(layer, (SlotDecoder, RecomputeDecoder)) for layer in gaussian.layers)

    from lit_sparse.attention.sliding_window import SlidingWindowPattern

    class Doubled(SlidingWindowPattern):
        def forward(self, q, k, v):
            return 2 * super().forward(q, k, v)

        def reference(self, q, k, v):
            return 2 * super().reference(q, k, v)

    pattern = Doubled(16, window=2)
    from lit_sparse.attention.decoding import DecodeShape

    shape = DecodeShape(1, 4, 2, 8, 8, torch.device("cpu"), torch.float32)
    assert isinstance(pattern.decoder(shape), RecomputeDecoder)


def test_after_the_prompt_chunks_of_any_size_continue_the_sequence():
    """A chunk of several tokens after the prompt (chunked prefill) continues the sequence
    like one token at a time; nothing may go past max_length."""
    model = tiny_model(build_attention("sliding_window", window=2))
    cache = model.new_cache(1, 10)
    ids = torch.randint(0, VOCAB, (1, 10), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        full = model(ids)
        parts = [model(ids[:, :4], cache), model(ids[:, 4:6], cache)]
        parts += [model(ids[:, t : t + 1], cache) for t in range(6, 10)]
        with pytest.raises(ValueError, match="max_length=10"):
            model(ids[:, :1], cache)
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=0, atol=1e-5)


def test_tiny_config_is_gqa():
    assert tiny_config().n_groups == 2
