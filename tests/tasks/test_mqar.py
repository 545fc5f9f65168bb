"""MQAR (lit_sparse.tasks.mqar): the generator exactly as Zoology defines it (ranges, distinct
keys, the labels, the power-law gaps), far MQAR's gap, the constraints refused with one clear
message; its DataModule's settings and their constraints."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from lit_sparse.errors import ConfigError
from lit_sparse.tasks import (
    IGNORE_INDEX,
    MQARDataModule,
    gap_probabilities,
    multiquery_ar,
)

N, L, KV, V = 300, 64, 4, 512
MQAR_DIGEST_BEFORE_GAP = "09f91569549e30d08f01d112b90f8c5be46c666fe91f16a20f6abc3ae460a58b"


@pytest.fixture(scope="module")
def mqar():
    return multiquery_ar(N, L, KV, V, seed=3)


def test_mqar_shapes_and_the_pairs_first(mqar):
    x, y = mqar
    assert x.shape == y.shape == (N, L) and x.dtype == y.dtype == torch.int64
    keys, values = x[:, 0 : 2 * KV : 2], x[:, 1 : 2 * KV : 2]
    assert ((keys >= 1) & (keys < V // 2)).all()
    assert ((values >= V // 2) & (values < V)).all()
    assert all(len(set(row.tolist())) == KV for row in keys)  # no repeated key
    assert all(len(set(row.tolist())) == KV for row in values)
    assert ((x >= 0) & (x < V)).all()
    assert (y[:, : 2 * KV] == IGNORE_INDEX).all()  # nothing is asked in the pairs


def test_mqar_labels_are_the_values_of_the_queries(mqar):
    x, y = mqar
    for row_x, row_y in zip(x.tolist(), y.tolist(), strict=True):
        pairs = dict(zip(row_x[0 : 2 * KV : 2], row_x[1 : 2 * KV : 2], strict=True))
        asked = [t for t, label in enumerate(row_y) if label != IGNORE_INDEX]
        assert len(asked) == KV  # one query per key
        assert sorted(row_x[t] for t in asked) == sorted(pairs)  # each key asked once
        for t in asked:
            assert (t - 2 * KV) % 2 == 0 and 2 * KV <= t <= L - 2  # even offsets of the rest
            assert row_y[t] == pairs[row_x[t]]  # its label: the key's value


def test_mqar_fills_the_rest_with_random_tokens(mqar):
    x, y = mqar
    rest = x[:, 2 * KV :][y[:, 2 * KV :] == IGNORE_INDEX]
    counts = torch.bincount(rest, minlength=V).double()
    assert counts.min() > 0  # every token of the vocabulary occurs
    expected = rest.numel() / V
    assert ((counts - expected) ** 2 / expected).sum() < V + 6 * (2 * V) ** 0.5  # chi-square


def test_the_gaps_follow_the_power_law():
    """One pair per example: the query's gap index g is one draw of p(i) ∝ a·i^(a-1),
    i = g + 1; its empirical mean against the analytic one for a = 0.01."""
    length, n = 128, 20000
    x, y = multiquery_ar(n, length, 1, 130, power_a=0.01, seed=0)
    gap = ((y != IGNORE_INDEX).int().argmax(-1) - 2) // 2  # (N,) position = 2 + 2g
    space = (length - 2) // 2
    p = gap_probabilities(space, 0.01)
    i = np.arange(1, space + 1)
    assert p[0] / p[9] == pytest.approx(10**0.99)  # the law itself, not just its mean
    mean, sd = (
        float(((i - 1) * p).sum()),
        float(np.sqrt(((i - 1) ** 2 * p).sum() - ((i - 1) * p).sum() ** 2)),
    )
    assert gap.double().mean().item() == pytest.approx(mean, abs=4 * sd / np.sqrt(n))
    assert gap.min() >= 0 and gap.max() < space
    histogram = np.bincount(gap.numpy(), minlength=space) / n
    assert np.abs(histogram - p).max() < 0.02


def test_distinct_gaps_are_drawn_one_after_another():
    """kv gaps without replacement, pair i taking the i-th draw (numpy's choice(replace=False,
    p=...) as Zoology calls it): the share of examples whose first pair is asked first
    matches numpy's own draws (the first draw favours small gaps, so it is above 1/4)."""
    n, length, kv = 2000, 20, 4
    x, y = multiquery_ar(n, length, kv, 22, seed=1)
    positions = [np.flatnonzero(row != IGNORE_INDEX) for row in y.numpy()]
    assert all(len(p) == kv for p in positions)  # kv distinct positions: distinct gaps
    first_asked = np.array([x[r, p[0]].item() for r, p in enumerate(positions)])
    ours = float((x[:, 0].numpy() == first_asked).mean())
    space = (length - 2 * kv) // 2
    rng = np.random.default_rng(0)
    draws = [
        rng.choice(space, size=kv, replace=False, p=gap_probabilities(space)) for _ in range(n)
    ]
    numpy_share = float(np.mean([d[0] == d.min() for d in draws]))
    assert numpy_share > 0.3
    assert ours == pytest.approx(numpy_share, abs=4 * np.sqrt(0.25 / n) * 1.5)


@pytest.mark.parametrize(("length", "kv", "gap"), [(256, 8, 96), (64, 4, 47), (40, 4, 24)])
def test_far_mqar_puts_every_query_more_than_gap_tokens_after_its_value(length, kv, gap):
    x, y = multiquery_ar(500, length, kv, 512, seed=2, gap=gap)
    for row_x, row_y in zip(x.tolist(), y.tolist(), strict=True):
        where = {row_x[2 * i]: 2 * i + 1 for i in range(kv)}  # key -> its value's position
        asked = [t for t, label in enumerate(row_y) if label != IGNORE_INDEX]
        assert len(asked) == kv and all(t <= length - 2 for t in asked)
        for t in asked:
            assert t - where[row_x[t]] > gap
            assert row_y[t] == row_x[where[row_x[t]]]
            assert (t - 2 * kv - gap) % 2 == 0  # even offsets of the query region


@pytest.mark.stored_values
def test_far_mqar_gap_zero_is_zoologys_mqar_byte_for_byte():
    """gap=0 draws exactly the examples the generator drew before far MQAR existed (the
    digest was taken at 3db6ba1, before the option), so the committed MQAR records stand."""
    import hashlib

    x, y = multiquery_ar(64, 128, 8, 512, seed=(3, 0, 7), gap=0)
    digest = hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
    # exactly, though taken on another machine: integer draws, and the float weights only rank
    # draws far apart next to a last bit's difference (the same digest with numpy's SIMD off)
    assert digest == MQAR_DIGEST_BEFORE_GAP
    default = multiquery_ar(64, 128, 8, 512, seed=(3, 0, 7))
    assert torch.equal(default[0], x) and torch.equal(default[1], y)


def test_far_mqar_seeds_reproduce_and_the_gap_changes_the_examples():
    a = multiquery_ar(16, 256, 8, 512, seed=4, gap=96)
    b = multiquery_ar(16, 256, 8, 512, seed=4, gap=96)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert not torch.equal(a[1], multiquery_ar(16, 256, 8, 512, seed=4)[1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            (4, 256, 8, 512, 0.01, 0, 225),
            "gap=225: no room for the queries at seq_len=256 and num_kv_pairs=8; far MQAR "
            "needs 4 * num_kv_pairs + gap <= seq_len, so gap <= 224",
        ),
        ((4, 256, 8, 512, 0.01, 0, -1), "gap=-1: expected an integer >= 0"),
        ((4, 256, 8, 512, 0.01, 0, 1.5), "gap=1.5: expected an integer >= 0"),
    ],
)
def test_far_mqar_refuses_a_gap_without_room_for_the_queries(args, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        multiquery_ar(*args)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((4, 63, 4, 512), "seq_len=63: MQAR needs an even sequence length"),
        ((4, 64, 17, 512), "num_kv_pairs=17: MQAR needs 4 * num_kv_pairs <= seq_len (64)"),
        ((4, 64, 4, 64), "vocab_size=64: MQAR needs vocab_size > seq_len (64)"),
        ((0, 64, 4, 512), "num_examples=0: expected an integer >= 1"),
    ],
)
def test_mqar_constraints(args, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        multiquery_ar(*args)


def test_a_large_power_that_fits_still_draws():
    inputs, labels = multiquery_ar(4, L, KV, V, power_a=50.0, seed=0)
    assert (labels != IGNORE_INDEX).sum() == 4 * KV


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
