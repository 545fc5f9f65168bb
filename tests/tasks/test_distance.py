"""The distance task (lit_sparse.tasks.distance): the generator's exact distances and pairs,
filler without values, the buckets, the constraints refused with one clear message; its
DataModule's buckets at every length, several pairs and its held-out sets."""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lit_sparse.errors import ConfigError
from lit_sparse.tasks import (
    IGNORE_INDEX,
    DistanceDataModule,
    distance_buckets,
    distance_pairs,
    distance_retrieval,
)


def test_distance_pairs_ask_each_pair_once_at_its_own_distance():
    """Every example holds `pairs` distinct keys, each twice (the pair and its query) and
    nowhere else; the label at each query is the token after the key; distances spread over
    [2, L - 2]; a seed reproduces the batch."""
    n, length, pairs, vocab = 64, 64, 6, 128
    x, y = distance_pairs(n, length, pairs, vocab, seed=3)
    assert x.shape == y.shape == (n, length)
    assert ((y != IGNORE_INDEX).sum(-1) == pairs).all()
    distances = []
    for row in range(n):
        queries = torch.nonzero(y[row] != IGNORE_INDEX).flatten().tolist()
        keys = x[row, queries]
        assert len(set(keys.tolist())) == pairs and (keys >= 1).all() and (keys < vocab // 2).all()
        for query in queries:
            key = x[row, query]
            first, second = torch.nonzero(x[row] == key).flatten().tolist()  # exactly twice
            assert second == query and y[row, query] == x[row, first + 1] >= vocab // 2
            assert query + 1 < length
            distances.append(query - first)
    assert min(distances) >= 2 and max(distances) > length // 2
    assert all(
        torch.equal(a, b)
        for a, b in zip((x, y), distance_pairs(n, length, pairs, vocab, seed=3), strict=True)
    )
    assert not torch.equal(x, distance_pairs(n, length, pairs, vocab, seed=4)[0])


@pytest.mark.parametrize("make", ["one pair", "pairs"])
def test_filler_without_values_leaves_only_the_answers_in_the_value_range(make):
    """values_in_filler=False: the value range [V/2, V) holds exactly the examples' values
    (the filler is from the key range, never a key of its example); the default fills with
    the whole vocabulary."""
    n, length, vocab = 32, 64, 128
    if make == "one pair":
        x, y = distance_retrieval(n, length, 9, vocab, seed=2, values_in_filler=False)
        default, _ = distance_retrieval(n, length, 9, vocab, seed=2)
    else:
        x, y = distance_pairs(n, length, 5, vocab, seed=2, values_in_filler=False)
        default, _ = distance_pairs(n, length, 5, vocab, seed=2)
    asked = y != IGNORE_INDEX
    in_value_range = x >= vocab // 2
    assert (in_value_range.sum(-1) == asked.sum(-1)).all()
    values_given = torch.sort(torch.where(in_value_range, x, 0), dim=-1).values
    values_asked = torch.sort(torch.where(asked, y, 0), dim=-1).values
    assert torch.equal(values_given, values_asked)
    keys = torch.where(asked, x, -1)
    for row in range(n):
        for key in keys[row][keys[row] >= 0].tolist():
            assert (x[row] == key).sum() == 2  # the pair's key and its query, no filler
    assert (default >= vocab // 2).sum(-1).gt(asked.sum(-1)).all()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((4, 32, 9, 512), "pairs=9: needs 4 * pairs <= seq_len (32)"),
        ((4, 64, 8, 16), "pairs=8: needs distinct keys, at most V/2 - 1 = 7"),
        ((4, 64, 0, 512), "pairs=0: expected an integer >= 1"),
    ],
)
def test_distance_pairs_constraints(args, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        distance_pairs(*args)


def test_distance_task_places_the_query_exactly_d_after_the_key():
    length, vocab = 40, 64
    d = np.arange(2, length - 1).repeat(20)  # every allowed distance, 20 times
    x, y = distance_retrieval(len(d), length, d, vocab, seed=2)
    for row_x, row_y, want in zip(x.tolist(), y.tolist(), d.tolist(), strict=True):
        [query] = [t for t, label in enumerate(row_y) if label != IGNORE_INDEX]
        key = row_x[query]
        assert 1 <= key < vocab // 2
        where = [t for t, token in enumerate(row_x) if token == key]
        assert where == [query - want, query]  # the key, and its query d later; nowhere else
        assert row_y[query] == row_x[query - want + 1]  # the label: the key's value
        assert vocab // 2 <= row_y[query] < vocab
        assert query <= length - 2  # the token after the query is in the sequence
    starts = torch.tensor(
        [(row != IGNORE_INDEX).int().argmax().item() for row in y]
    ) - torch.from_numpy(d)
    assert starts.min() == 0 and (starts + torch.from_numpy(d) <= length - 2).all()


@pytest.mark.parametrize("bad", [1, 39])
def test_distance_task_refuses_distances_it_cannot_place(bad):
    with pytest.raises(
        ConfigError, match=rf"distance={bad}: expected a distance in .* = \[2, 38\]"
    ):
        distance_retrieval(3, 40, [2, bad, 5], 64)


def test_distance_buckets():
    assert distance_buckets(2, 254) == [
        (2, 3), (4, 7), (8, 15), (16, 31), (32, 63), (64, 127), (128, 254),
    ]  # fmt: skip
    assert distance_buckets(2, 16382)[-1] == (8192, 16382)
    assert distance_buckets(5, 9) == [(5, 7), (8, 9)]


def batches(dm, n: int, global_step: int = 0, rank: int = 0, accumulate: int = 1):
    dm.trainer = SimpleNamespace(
        global_step=global_step, accumulate_grad_batches=accumulate, global_rank=rank, world_size=2
    )
    return list(itertools.islice(iter(dm.train_dataloader()), n))


def test_longer_lengths_hold_the_same_tokens_per_set_but_a_few_examples_at_least():
    dm = DistanceDataModule(seq_len=256, val_examples=64, min_examples=8)
    assert [dm.examples_at(t) for t in (256, 1024, 4096, 16384)] == [64, 16, 8, 8]
    assert len(dm.recall_sets(1024)["d512-1023"][0]) == 16


def test_distance_buckets_at_every_length():
    dm = DistanceDataModule(seq_len=32, vocab_size=64, val_examples=6, min_examples=6)
    assert dm.val_set_names == ["d2-3", "d4-7", "d8-15", "d16-31"]
    assert dm.set_names_at(128)[-2:] == ["d32-63", "d64-127"]
    for length in (32, 128):
        for name, (x, y) in dm.recall_sets(length).items():
            low, high = dm.distance_range(name)
            query = (y != IGNORE_INDEX).int().argmax(-1)
            key = x[torch.arange(len(x)), query]
            start = (x == key[:, None]).int().argmax(-1)  # the key's first occurrence
            distance = query - start
            assert x.shape == (6, length)
            assert ((distance >= low) & (distance <= min(high, length - 2))).all()
    train_x, train_y = batches(dm, 1)[0]
    assert ((train_y != IGNORE_INDEX).sum(-1) == 1).all()


def test_distance_training_with_several_pairs_keeps_one_pair_held_out():
    """data.pairs asks several questions per training example; the held-out sets keep one
    pair per example; too many pairs for the length is one line naming the field."""
    dm = DistanceDataModule(seq_len=32, vocab_size=64, pairs=4, val_examples=6, min_examples=6)
    train_x, train_y = batches(dm, 1)[0]
    assert ((train_y != IGNORE_INDEX).sum(-1) == 4).all()
    for _, y in dm.recall_sets(32).values():
        assert ((y != IGNORE_INDEX).sum(-1) == 1).all()
    with pytest.raises(ConfigError, match=r"^data.pairs=9: needs 4 \* pairs <= seq_len \(32\)"):
        DistanceDataModule(seq_len=32, pairs=9)


@pytest.mark.parametrize("pairs", [1, 4])
def test_distance_filler_without_values_holds_for_training_and_held_out_sets(pairs):
    """data.values_in_filler: false reaches the training stream and every held-out set (the
    value range holds the answers only); a value that is no boolean is one line naming it."""
    dm = DistanceDataModule(
        seq_len=32, vocab_size=64, pairs=pairs, values_in_filler=False, val_examples=6
    )
    for x, y in [batches(dm, 1)[0], *dm.recall_sets(32).values(), *dm.recall_sets(128).values()]:
        assert ((x >= 32).sum(-1) == (y != IGNORE_INDEX).sum(-1)).all()
    with pytest.raises(ConfigError, match=r"^data.values_in_filler='no': expected true or false"):
        DistanceDataModule(seq_len=32, values_in_filler="no")
