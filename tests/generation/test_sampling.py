"""The next-token sampler (lit_sparse/generation/sampling.py): greedy at temperature 0, top-k and
nucleus cuts, a seed's generator, and each bad field refused in one line naming it."""

from __future__ import annotations

import math

import pytest
import torch

from lit_sparse.errors import ConfigError
from lit_sparse.generation import Sampler


def test_sampling_cuts_follow_top_k_and_top_p():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]]).log_softmax(-1)
    probs = logits.exp()[0]
    gen = torch.Generator().manual_seed(0)
    top2 = {int(Sampler(1.0, top_k=2)(logits, gen)) for _ in range(200)}
    assert top2 == {0, 1}
    nucleus = float(probs[0] + probs[1]) - 1e-3  # needs the two most likely tokens
    seen = {int(Sampler(1.0, top_p=nucleus)(logits, gen)) for _ in range(300)}
    assert seen == {0, 1}
    assert {int(Sampler(1.0)(logits, gen)) for _ in range(500)} == {0, 1, 2, 3, 4}


def test_greedy_takes_the_argmax_of_each_row_and_needs_no_generator():
    logits = torch.tensor([[0.0, 2.0, 1.0], [5.0, -1.0, 4.9]])
    assert Sampler(temperature=0)(logits).tolist() == [1, 0]
    assert Sampler(temperature=0, seed=3).generator(torch.device("cpu")) is None
    assert Sampler(temperature=1.0).generator(torch.device("cpu")) is None  # no seed: global


def test_a_seeds_generator_repeats_its_draws_and_a_low_temperature_sharpens_them():
    logits = torch.tensor([[1.0, 0.9, 0.8, 0.0]]).repeat(64, 1)
    sampler = Sampler(temperature=1.0, seed=11)
    first = sampler(logits, sampler.generator(torch.device("cpu")))
    again = sampler(logits, sampler.generator(torch.device("cpu")))
    assert torch.equal(first, again) and len(set(first.tolist())) > 1
    cold = Sampler(temperature=1e-3, seed=11)
    assert set(cold(logits, cold.generator(torch.device("cpu"))).tolist()) == {0}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("temperature", True, "temperature=True: must be a number >= 0"),
        ("temperature", math.nan, "temperature=nan: must be a number >= 0"),
        ("temperature", math.inf, "temperature=inf: must be a number >= 0"),
        ("temperature", "1", "temperature='1': must be a number >= 0"),
        ("top_k", True, "top_k=True: must be an integer >= 1"),
        ("top_k", 2.0, "top_k=2.0: must be an integer >= 1"),
        ("top_p", "0.5", "top_p='0.5': must be a number in (0, 1]"),
        ("top_p", False, "top_p=False: must be a number in (0, 1]"),
        ("seed", -1, "seed=-1: must be an integer >= 0"),
        ("seed", 1.0, "seed=1.0: must be an integer >= 0"),
    ],
)
def test_each_bad_field_is_one_line_naming_it(field, value, message):
    with pytest.raises(ConfigError) as err:
        Sampler(**{field: value})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
