"""Forced-choice scoring (lit_sparse/evaluation/forced_choice.py): the likeliest candidate's
total log-probability, batched as unbatched; a constant model scores chance, a knowing one 1;
the per-group summary, its scalars and table."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lit_sparse import FibonacciAttention, LanguageModel, ModelConfig
from lit_sparse.data.tokenizer import load_tokenizer
from lit_sparse.evaluation.forced_choice import (
    ChoiceItem,
    choose,
    results_table,
    score_task,
)
from lit_sparse.tasks import lego_items, ruler_vt_items


@pytest.fixture(scope="module")
def encode():
    tokenizer = load_tokenizer("embedded").tokenizer
    return lambda text: tokenizer.encode(text).ids


class SameAnswer(nn.Module):
    """Ignores its input: the same logits at every position of every prompt."""

    def __init__(self, vocab_size: int = 8192, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("bias", torch.randn(vocab_size, generator=gen) * 3)

    def forward(self, ids):
        return self.bias.expand(*ids.shape, -1)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_model_that_always_answers_the_same_scores_chance(encode, seed):
    model = SameAnswer(seed=seed)
    lego = score_task("lego", "chain length", model, encode, lego_items(seed=seed))
    ruler = score_task("ruler_vt", "hops", model, encode, ruler_vt_items(seed=seed))
    assert lego.items == 360 and ruler.items == 360
    assert lego.chance == pytest.approx(0.5) and ruler.chance == pytest.approx(1 / 9)
    assert lego.accuracy == pytest.approx(lego.chance) and lego.same_answer == 1.0
    assert ruler.accuracy == pytest.approx(ruler.chance) and ruler.same_answer == 1.0
    assert all(g["same_answer"] == 1.0 for g in [*lego.groups.values(), *ruler.groups.values()])
    assert sorted(lego.groups) == [2, 3, 4] and sorted(ruler.groups) == [2, 3, 4]


def test_choose_matches_unbatched_log_probabilities(encode):
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=8192,
        context_length=64,
        n_layers=1,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )
    model = LanguageModel(config, FibonacciAttention(window=2, n_rungs=6)).eval()
    items = lego_items(per_length=3, seed=5) + ruler_vt_items(per_hops=2, seed=5)
    chosen = choose(model, encode, items, batch_size=5)
    for item, pick in zip(items, chosen, strict=True):
        scores = []
        for text in item.choices:
            prompt, answer = encode(item.prompt), encode(text)
            with torch.no_grad():
                logits = model(torch.tensor([prompt + answer]))[0]
            logprobs = F.log_softmax(logits, -1)[len(prompt) - 1 : -1]
            scores.append(float(logprobs.gather(-1, torch.tensor(answer)[:, None]).sum()))
        assert pick == max(range(len(scores)), key=scores.__getitem__)


def test_a_model_that_knows_the_answer_scores_one(encode):
    """A lookup 'model' that favours the right candidate's token after each prompt."""
    items = lego_items(per_length=10, seed=1)
    answer_of = {tuple(encode(i.prompt)): encode(i.choices[i.answer])[0] for i in items}

    class Knows(nn.Module):
        def forward(self, ids):
            logits = torch.zeros(*ids.shape, 8192)
            for row in range(ids.shape[0]):
                for t in range(ids.shape[1]):
                    token = answer_of.get(tuple(ids[row, : t + 1].tolist()))
                    if token is not None:
                        logits[row, t, token] = 10.0
            return logits

    result = score_task("lego", "chain length", Knows(), encode, items)
    assert result.accuracy == 1.0 and result.same_answer == pytest.approx(0.5)


def test_empty_candidates_are_refused(encode):
    with pytest.raises(ValueError, match="encodes to no tokens"):
        choose(SameAnswer(), encode, [ChoiceItem("a =", ("",), 0, 1)])


def test_the_summary_per_group_its_scalars_and_its_table():
    items = [
        ChoiceItem("a", (" x", " y"), 0, 2),
        ChoiceItem("b", (" x", " y"), 1, 2),
        ChoiceItem("c", (" x", " y", " z", " w"), 0, 3),
    ]
    letters = {" x": [1], " y": [2], " z": [3], " w": [4], "a": [5], "b": [5], "c": [5]}

    class PrefersX(nn.Module):
        def forward(self, ids):
            logits = torch.zeros(*ids.shape, 8)
            logits[..., 1] = 5.0
            return logits

    result = score_task("toy", "size", PrefersX(), letters.__getitem__, items)
    assert (result.items, result.accuracy, result.same_answer) == (3, 2 / 3, 1.0)
    assert result.chance == pytest.approx((0.5 + 0.5 + 0.25) / 3) and result.most_common == " x"
    assert result.groups == {
        2: {"items": 2, "accuracy": 0.5, "chance": 0.5, "same_answer": 1.0},
        3: {"items": 1, "accuracy": 1.0, "chance": 0.25, "same_answer": 1.0},
    }
    assert result.metrics()["tasks/toy/accuracy_3"] == 1.0
    assert result.as_dict()["groups"]["2"]["items"] == 2
    table = results_table([result]).splitlines()
    assert table[2] == "| toy | size 2 | 2 | 0.5000 | 0.5000 | 1.000 |"
    assert table[-1] == "| toy | all | 3 | 0.6667 | 0.4167 | 1.000 (most common: 'x') |"
    with pytest.raises(ValueError, match="^toy: no items to score$"):
        score_task("toy", "size", PrefersX(), letters.__getitem__, [])
