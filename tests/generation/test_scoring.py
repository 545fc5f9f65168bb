"""lit_sparse.score: log-likelihoods of continuations, batched with right padding that is exact
for every registered plugin, against a plain forward, with the length policy and bad input
one line each."""

from __future__ import annotations

import pytest
import torch

import lit_sparse
from lit_sparse.errors import ConfigError
from lit_sparse.generation import Score

from .cases import VOCAB, generation_cases, tiny_model

CASES = generation_cases()


def random_pairs(n: int = 7, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Pairs of unequal lengths: contexts of 1..40 tokens (past 2x the training length of
    16), continuations of 1..20."""
    gen = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        context = torch.randint(0, VOCAB, (int(torch.randint(1, 41, (), generator=gen)),))
        continuation = torch.randint(0, VOCAB, (int(torch.randint(1, 21, (), generator=gen)),))
        pairs.append((context.tolist(), continuation.tolist()))
    return pairs


def plain_logprob(model, context: list[int], continuation: list[int]) -> float:
    """The continuation's log-likelihood from one unpadded forward, computed here."""
    tokens = torch.tensor([context + continuation])
    with torch.inference_mode():
        logprobs = model(tokens[:, :-1]).log_softmax(-1)[0]
    positions = range(len(context) - 1, len(context) + len(continuation) - 1)
    return sum(float(logprobs[p, t]) for p, t in zip(positions, continuation, strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_batched_equals_one_by_one_for_every_plugin(name):
    model = tiny_model(CASES[name])
    pairs = random_pairs()
    batched = lit_sparse.score(model, pairs, batch_size=4)
    alone = [lit_sparse.score(model, [pair], batch_size=1)[0] for pair in pairs]
    for got, expected in zip(batched, alone, strict=True):
        assert got.logprob == pytest.approx(expected.logprob, abs=1e-4)
        assert got.greedy == expected.greedy


def test_every_registered_plugin_is_covered():
    names = {type(plugin).name for plugin in CASES.values()}
    assert set(lit_sparse.list_attention()) <= names


def test_scores_are_the_continuations_log_likelihood():
    model = tiny_model(CASES["dense"])
    pairs = random_pairs(5, seed=1)
    for (context, continuation), got in zip(pairs, lit_sparse.score(model, pairs), strict=True):
        assert isinstance(got, Score) and isinstance(got, tuple)
        assert got.logprob == pytest.approx(plain_logprob(model, context, continuation), abs=1e-4)
        assert got.logprob < 0


def test_greedy_says_whether_argmax_produces_the_continuation():
    model = tiny_model(CASES["fibonacci-learned-fibonacci-use"])
    context = [3, 14, 15, 9, 26]
    tokens = torch.tensor([context])
    with torch.inference_mode():
        for _ in range(6):  # the greedy continuation, one token at a time
            tokens = torch.cat([tokens, model(tokens)[:, -1:].argmax(-1)], dim=1)
    greedy = tokens[0, len(context) :].tolist()
    other = [*greedy[:-1], (greedy[-1] + 1) % VOCAB]
    first, second = lit_sparse.score(model, [(context, greedy), (context, other)])
    assert first.greedy and not second.greedy
    assert first.logprob > second.logprob


def test_the_output_layer_runs_at_the_continuation_positions_only(monkeypatch):
    """Issue 36: score built the whole (B, width, vocab) logits to read a few positions (16
    contexts of 4,000 tokens with one-token continuations peaked at 2.5 GB RSS here; 0.7 GB now)."""
    model = tiny_model(CASES["fibonacci-coprime-fibonacci-use"])
    pairs = [(list(range(1, 41)), [7]), (list(range(1, 31)), [8, 9]), ([3], [4, 5, 6])]
    head_rows = []
    head = model.head

    def counted_head(features):
        head_rows.append(features.shape[:-1].numel())
        return head(features)

    monkeypatch.setattr(model, "head", counted_head)
    scores = lit_sparse.score(model, pairs, batch_size=3)
    assert sum(head_rows) == 1 + 2 + 3  # not 3 rows x 40 positions
    for (context, continuation), got in zip(pairs, scores, strict=True):
        assert got.logprob == pytest.approx(plain_logprob(model, context, continuation), abs=1e-4)


def test_a_pair_longer_than_max_length_is_one_error_or_clipped_from_the_left():
    model = tiny_model(CASES["sliding_window"])
    context, continuation = list(range(1, 31)), [5, 6, 7]
    with pytest.raises(ConfigError, match=r"pairs\[0\]: context \+ continuation need 32 input"):
        lit_sparse.score(model, [(context, continuation)], max_length=20)
    with pytest.warns(UserWarning, match="1 of 1 contexts clipped from the left to max_length=20"):
        (clipped,) = lit_sparse.score(
            model, [(context, continuation)], max_length=20, truncation="left"
        )
    (expected,) = lit_sparse.score(model, [(context[-18:], continuation)])  # 20 input tokens
    assert clipped.logprob == pytest.approx(expected.logprob, abs=1e-5)
    with pytest.raises(ConfigError, match="a continuation of 3 tokens is longer than max_length"):
        lit_sparse.score(model, [([1], continuation)], max_length=2, truncation="left")


@pytest.mark.parametrize(
    ("pairs", "kwargs", "message"),
    [
        ([([], [1])], {}, r"pairs\[0\]: an empty context; .*tokenizer.document_prefix"),
        ([([1], [])], {}, r"pairs\[0\]: an empty continuation"),
        ([([1], [VOCAB])], {}, rf"continuation: token id {VOCAB} outside the vocabulary"),
        ([([1.5], [2])], {}, r"pairs\[0\] context: expected integer token ids, got 1.5"),
        ([("ab", [2])], {}, r"pairs\[0\] context: expected a list of token ids, got str"),
        ([[1, 2, 3]], {}, r"pairs\[0\]: expected a \(context ids, continuation ids\) pair"),
        ([([1], [2])], {"batch_size": 0}, "batch_size=0: must be an integer >= 1"),
        ([([1], [2])], {"max_length": 0}, "max_length=0: must be an integer >= 1"),
        ([([1], [2])], {"truncation": "right"}, "truncation='right': allowed: error, left"),
    ],
)
def test_bad_input_is_one_line(pairs, kwargs, message):
    model = tiny_model(CASES["dense"])
    with pytest.raises(ConfigError, match=message) as err:
        lit_sparse.score(model, pairs, **kwargs)
    assert "\n" not in str(err.value)
