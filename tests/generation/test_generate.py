"""The generation API: greedy is deterministic, a seed reproduces a sample, EOS stops, bad
arguments are one clear line each, before any model work."""

from __future__ import annotations

import pytest
import torch

import lit_sparse
from lit_sparse import LanguageModel, build_attention, generate
from lit_sparse.attention import AttentionPlugin
from lit_sparse.attention.sliding_window import SlidingWindowPattern
from lit_sparse.errors import ConfigError

from .cases import VOCAB, tiny_model


@pytest.fixture(scope="module")
def model() -> LanguageModel:
    return tiny_model(build_attention("fibonacci", window=2, schedule="coprime"))


def prompt(batch: int = 2, length: int = 6, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_generate_is_exported_and_yields_tokens_as_they_are_made(model):
    assert lit_sparse.generate is generate
    steps = iter(generate(model, prompt(), 5, temperature=0))
    first = next(steps)
    assert first.shape == (2,) and first.dtype == torch.long
    assert len([first, *steps]) == 5


def test_greedy_is_deterministic_and_the_argmax_of_the_full_forward(model):
    ids = prompt()
    tokens = generate(model, ids, 12, temperature=0).run()
    assert torch.equal(tokens, generate(model, ids, 12, temperature=0).run())
    sequence = ids
    for _ in range(12):  # the same by full forwards, no cache
        with torch.inference_mode():
            nxt = model(sequence)[:, -1].argmax(-1, keepdim=True)
        sequence = torch.cat([sequence, nxt], dim=1)
    assert torch.equal(tokens, sequence[:, ids.shape[1] :])


def test_a_seed_reproduces_a_sample_and_another_seed_differs(model):
    ids = prompt()
    a = generate(model, ids, 30, temperature=1.0, seed=7).run()
    assert torch.equal(a, generate(model, ids, 30, temperature=1.0, seed=7).run())
    assert not torch.equal(a, generate(model, ids, 30, temperature=1.0, seed=8).run())


def test_top_k_1_and_a_tiny_top_p_are_greedy(model):
    ids = prompt()
    greedy = generate(model, ids, 10, temperature=0).run()
    assert torch.equal(generate(model, ids, 10, temperature=2.0, top_k=1, seed=0).run(), greedy)
    assert torch.equal(generate(model, ids, 10, temperature=2.0, top_p=1e-6, seed=0).run(), greedy)


def test_eos_stops_each_prompt_and_the_batch(model):
    ids = prompt()
    greedy = generate(model, ids, 12, temperature=0).run()
    eos = int(greedy[0, 3])  # the first prompt's 4th token
    stopped = generate(model, ids, 12, temperature=0, eos_id=eos).run()
    first_hit = [int((row == eos).nonzero()[0]) if (row == eos).any() else None for row in greedy]
    last = max(12 if hit is None else hit + 1 for hit in first_hit)
    assert stopped.shape == (2, last)  # ends when every prompt has produced eos
    for row, hit in enumerate(first_hit):
        if hit is not None:
            assert torch.equal(stopped[row, : hit + 1], greedy[row, : hit + 1])
            assert (stopped[row, hit:] == eos).all()  # eos from then on
    single = generate(model, ids[:1], 12, temperature=0, eos_id=eos).run()
    assert single.shape == (1, first_hit[0] + 1) and int(single[0, -1]) == eos


def test_stats_count_tokens_and_the_cache(model):
    generation = generate(model, prompt(), 8, temperature=0)
    generation.run()
    stats = generation.stats
    assert (stats.batch, stats.prompt_tokens, stats.new_tokens) == (2, 6, 8)
    assert stats.cache_bytes == generation.cache.nbytes > 0
    assert "tokens/s" in stats.to_text() and "KV cache" in stats.to_text()


class ShortPattern(SlidingWindowPattern):
    max_length = 20


class ShortAttention(AttentionPlugin):
    def build(self, layer, n_layers, training_length):
        return ShortPattern(training_length, window=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens=0: must be >= 1"),
        ({"max_new_tokens": -3}, "max_new_tokens=-3: must be >= 1"),
        ({"top_p": 1.5}, "top_p=1.5: must be in (0, 1]"),
        ({"top_p": 0.0}, "top_p=0.0: must be in (0, 1]"),
        ({"top_k": 0}, "top_k=0: must be an integer >= 1"),
        ({"temperature": -1.0}, "temperature=-1.0: must be a number >= 0"),
        ({"eos_id": VOCAB}, f"eos_id={VOCAB}: must be a token id in [0, {VOCAB})"),
        ({"prompt_ids": [[1, 2], [3]]}, "prompt_ids: prompts of unequal lengths [1, 2]"),
        ({"prompt_ids": [[]]}, "prompt_ids: an empty prompt"),
        ({"prompt_ids": [[1, VOCAB]]}, f"prompt_ids: token id {VOCAB} outside the vocabulary"),
        ({"prompt_ids": torch.ones(1, 3)}, "prompt_ids: expected integer token ids"),
        # issue 47: a list of floats was truncated to ids (1.5 -> 1) while a float tensor was
        # refused; now refused alike, naming the value
        ({"prompt_ids": [[1.5, 2.9]]}, "prompt_ids[0][0]=1.5: expected an integer token id"),
        ({"prompt_ids": [3, 2.0]}, "prompt_ids[1]=2.0: expected an integer token id"),
        ({"prompt_ids": [[1, True]]}, "prompt_ids[0][1]=True: expected an integer token id"),
    ],
)
def test_bad_arguments_are_one_line_each(model, kwargs, message):
    args = {"prompt_ids": prompt(), "max_new_tokens": 4, **kwargs}
    with pytest.raises(ConfigError) as err:
        generate(model, args.pop("prompt_ids"), args.pop("max_new_tokens"), **args)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_prompt_longer_than_the_model_can_take_is_refused():
    """A pattern may state the longest sequence it supports (none of the built-ins does)."""
    model = tiny_model(ShortAttention())
    assert model.max_length == 20
    with pytest.raises(ConfigError, match=r"a prompt of 25 tokens is longer than the model can"):
        generate(model, prompt(1, 25), 1)
    with pytest.raises(ConfigError, match=r"max_new_tokens=10: .* use at most 5"):
        generate(model, prompt(1, 15), 10)
    assert generate(model, prompt(1, 15), 5, temperature=0).run().shape == (1, 5)
    assert tiny_model(build_attention("dense")).max_length is None
