"""The recall DataModules: a fresh, reproducible stream that a resume continues where it
stopped, held-out sets that do not depend on the run's seed, each rank's share without
padding, the distance buckets at every length, passkey's training and held-out plays."""

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
    MQARDataModule,
    PasskeyDataModule,
    corpus_tokens,
    recall_data_from_config,
)


def batches(dm, n: int, global_step: int = 0, rank: int = 0, accumulate: int = 1):
    dm.trainer = SimpleNamespace(
        global_step=global_step, accumulate_grad_batches=accumulate, global_rank=rank, world_size=2
    )
    return list(itertools.islice(iter(dm.train_dataloader()), n))


def test_the_stream_is_fresh_reproducible_and_resumes_at_its_step():
    dm = MQARDataModule(seq_len=32, num_kv_pairs=2, vocab_size=64, batch_size=4, seed=7)
    first = batches(dm, 6)
    assert all(x.shape == y.shape == (4, 32) for x, y in first)
    assert len({x.numpy().tobytes() for x, _ in first}) == 6  # a fresh batch every step
    again = batches(
        MQARDataModule(seq_len=32, num_kv_pairs=2, vocab_size=64, batch_size=4, seed=7), 6
    )
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again, strict=True))
    # a resume at optimizer step 2 with 2 micro-batches per step continues at batch 4
    resumed = batches(dm, 2, global_step=2, accumulate=2)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first[4:], resumed, strict=True))
    other_rank = batches(dm, 1, rank=1)[0][0]
    other_seed = batches(
        MQARDataModule(seq_len=32, num_kv_pairs=2, vocab_size=64, batch_size=4, seed=8), 1
    )
    assert not torch.equal(first[0][0], other_rank) and not torch.equal(
        first[0][0], other_seed[0][0]
    )


def test_held_out_sets_are_the_same_for_every_run_and_not_in_the_stream():
    a = MQARDataModule(seq_len=32, num_kv_pairs=2, vocab_size=64, val_examples=10, seed=0)
    b = MQARDataModule(seq_len=32, num_kv_pairs=2, vocab_size=64, val_examples=10, seed=1)
    assert a.val_set_names == ["L32_kv2"]
    (xa, ya), (xb, yb) = a.recall_sets()["L32_kv2"], b.recall_sets()["L32_kv2"]
    assert torch.equal(xa, xb) and torch.equal(ya, yb) and xa.shape == (10, 32)
    assert a.recall_sets()["L32_kv2"][0] is xa  # drawn once
    stream = torch.cat([x for x, _ in batches(a, 5)])
    assert not any(torch.equal(row, held) for row in stream for held in xa)


def test_each_rank_validates_its_share_without_padding():
    dm = MQARDataModule(seq_len=32, num_kv_pairs=2, vocab_size=64, val_examples=7, val_batch_size=2)
    everything = dm.recall_sets()["L32_kv2"][0]
    shares = []
    for rank in (0, 1):
        dm.trainer = SimpleNamespace(global_rank=rank, world_size=2)
        [loader] = dm.val_dataloader()
        shares.append(torch.cat([x for x, _ in loader]))
    assert [len(s) for s in shares] == [4, 3]
    assert torch.equal(torch.cat(shares).sort(0).values, everything.sort(0).values)
    assert torch.equal(shares[0], everything[0::2])


def test_mqar_settings_and_their_constraints():
    dm = MQARDataModule(
        seq_len=64, num_kv_pairs=4, vocab_size=300, val_settings=[[128, 8], [256, 16]]
    )
    assert dm.val_set_names == ["L64_kv4"]
    assert dm.set_names_at(256) == ["L256_kv16"] and dm.eval_lengths() == [64, 128, 256]
    x, y = dm.recall_sets(128)["L128_kv8"]
    assert x.shape == (1000, 128) and ((y != IGNORE_INDEX).sum(-1) == 8).all()
    with pytest.raises(
        ConfigError, match=r"vocab_size=300: MQAR needs vocab_size > seq_len \(512\)"
    ):
        MQARDataModule(vocab_size=300, val_settings=[[512, 8]])
    with pytest.raises(ConfigError, match="data.batch_size=0: expected an integer >= 1"):
        MQARDataModule(batch_size=0)


def test_far_mqar_gap_reaches_training_and_held_out_sets_and_is_checked_first():
    dm = MQARDataModule(seq_len=64, num_kv_pairs=4, vocab_size=128, gap=24, val_examples=20)
    for _, y in (dm.train_batch(20, (0, 0, 0)), dm.recall_sets()["L64_kv4"]):
        asked = (y != IGNORE_INDEX).nonzero()[:, 1]
        assert len(asked) == 80 and asked.min() > 2 * 4 + 24 - 1  # every query after the gap
    with pytest.raises(
        ConfigError,
        match=re.escape("data.gap=49: no room for the queries at seq_len=64 and num_kv_pairs=4"),
    ):
        MQARDataModule(seq_len=64, num_kv_pairs=4, vocab_size=128, gap=49)


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


@pytest.mark.slow  # tokenizes the embedded corpus when the session's token cache has none
def test_passkey_reads_the_training_plays_for_training_and_the_held_out_plays_for_its_sets():
    dm = PasskeyDataModule(seq_len=64, val_examples=4, depths=[0.0, 1.0])
    assert dm.val_set_names == ["depth0", "depth100"] and dm.vocab_size == 8192
    train, held_out = corpus_tokens("train"), corpus_tokens("val")
    assert train.size > 1_000_000 and 100_000 < held_out.size < train.size

    def in_corpus(window: np.ndarray, tokens: np.ndarray) -> bool:
        starts = np.flatnonzero(tokens[: tokens.size - window.size] == window[0])
        return any(np.array_equal(tokens[s : s + window.size], window) for s in starts)

    x, _ = dm.recall_sets()["depth0"]  # the needle first: the text follows it
    needle = 4 + 5 + 6  # " The pass key is", 5 digits, ". Remember it."
    text = x[0, needle : needle + 20].numpy()
    assert in_corpus(text, held_out) and not in_corpus(text, train)
    train_x, train_y = batches(dm, 1)[0]
    assert train_x.shape == (32, 64) and ((train_y != IGNORE_INDEX).sum(-1) == 5).all()


def test_a_run_config_gives_back_its_task():
    dm = recall_data_from_config(
        {"class_path": "lit_sparse.tasks.DistanceDataModule", "init_args": {"seq_len": 32}},
        val_examples=3,
    )
    assert isinstance(dm, DistanceDataModule) and dm.seq_len == 32 and dm.val_examples == 3
    with pytest.raises(
        ConfigError, match="data.class_path='lit_sparse.data.TextDataModule': not a synthetic task"
    ):
        recall_data_from_config({"class_path": "lit_sparse.data.TextDataModule"})
