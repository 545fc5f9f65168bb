"""Recall accuracy: the loss and the output layer at the labelled positions only, and the
evaluation at longer lengths and under both policies against a direct computation from the
full logits (the metric itself: tests/test_metrics.py)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from lit_sparse.attention import build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.recall import RecallResult, evaluate_recall, pattern_offer
from lit_sparse.metrics import IGNORE_INDEX
from lit_sparse.model import LanguageModel
from lit_sparse.module import LitLanguageModel
from lit_sparse.tasks import DistanceDataModule, MQARDataModule

FIB = {"class_path": "lit_sparse.FibonacciAttention", "init_args": {"window": 2, "n_rungs": 9}}


def tiny_model(attention="dense", length=32, vocab=64) -> LanguageModel:
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=vocab, context_length=length, n_layers=3, d_model=32, n_heads=2,
        n_kv_heads=1, head_dim=16,
    )  # fmt: skip
    return LanguageModel(config, build_attention(attention)).eval()


def test_the_loss_and_the_output_layer_at_the_labelled_positions_only():
    module = LitLanguageModel(tiny_model().config, "dense")
    module._sparse_labels = True
    x, y = MQARDataModule(seq_len=32, num_kv_pairs=2, vocab_size=64).train_batch(4, (0,))
    logits, mask = module.labelled_logits(x, y)
    full = module.model(x)  # (B, T, V)
    assert logits.shape == (int(mask.sum()), 64) == (8, 64)
    torch.testing.assert_close(logits, full[mask], rtol=1e-5, atol=1e-5)
    loss = module.training_step((x, y), 0)
    want = F.cross_entropy(full.flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX)
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    assert loss.item() != pytest.approx(module.token_nll(x, y).mean().item(), rel=1e-3)


def direct_accuracy(model: LanguageModel, x: torch.Tensor, y: torch.Tensor) -> float:
    """Per example the share of asked positions whose full-logit argmax is right, averaged."""
    with torch.no_grad():
        preds = model(x).argmax(-1)
    asked = y != IGNORE_INDEX
    per_example = ((preds == y) & asked).sum(-1).double() / asked.sum(-1)
    return per_example[asked.any(-1)].mean().item()


def test_evaluation_at_longer_lengths_matches_the_full_logits():
    model = tiny_model(FIB)
    dm = DistanceDataModule(seq_len=32, vocab_size=64, val_examples=5, min_examples=3)
    result = evaluate_recall(model, dm, [32, 128], ["use", "drop"], batch_tokens=100)
    assert result.lengths == [32, 128] and result.has_new_offsets
    assert result.sets[-2:] == ["d32-63", "d64-127"]
    from lit_sparse.evaluation import with_new_offsets

    for policy in ("use", "drop"):
        evaluated = with_new_offsets(model, policy)
        for length in (32, 128):
            for name, (x, y) in dm.recall_sets(length).items():
                cell = result.cell(policy, length, name)
                assert cell["examples"] == len(x) == (5 if length == 32 else 3)
                assert cell["accuracy"] == pytest.approx(direct_accuracy(evaluated, x, y))
    assert result.cell("use", 32, "d32-63") is None
    # coverage: the share of d whose d - 1 is a sum of one distance per layer, by brute force
    for policy in ("use", "drop"):
        layers = with_new_offsets(model, policy).distances(128)
        sums = {sum(c) for c in itertools.product(*layers)}
        for name in ("d8-15", "d32-63", "d64-127"):
            low, high = dm.distance_range(name)
            high = min(high, 128 - 2)  # the longest distance asked at 128
            want = sum(d - 1 in sums for d in range(low, high + 1)) / (high - low + 1)
            assert result.accuracy(policy, 128, name, "coverage") == pytest.approx(want)
    # at 4x the training length, "drop" leaves the rungs beyond 31 out: less coverage
    use, drop = (result.accuracy(p, 128, "d32-63", "coverage") for p in ("use", "drop"))
    assert use > drop
    offer = result.offer["use"][32]
    assert offer == pattern_offer(model, 32)
    assert offer["keys_per_query"] == [len(d) for d in model.distances(32)]
    assert offer["cache_rows"] == [max(d) + 1 for d in model.distances(32)]
    again = RecallResult.from_dict(result.to_dict())
    assert again.to_dict() == result.to_dict() and "| d2-3 |" in again.to_markdown()
    assert set(result.metrics()) >= {"recall/use/acc/d2-3/32", "recall/drop/acc/d64-127/128"}


def test_a_pattern_without_the_option_is_scored_once_as_trained():
    model = tiny_model("dense")
    dm = MQARDataModule(seq_len=32, num_kv_pairs=2, vocab_size=64, val_examples=6)
    result = evaluate_recall(model, dm, [32], ["use", "drop"])
    assert not result.has_new_offsets
    assert result.scores["use"] == result.scores["drop"]
    x, y = dm.recall_sets()["L32_kv2"]
    assert result.accuracy("drop", 32, "L32_kv2") == pytest.approx(direct_accuracy(model, x, y))
    assert math.isnan(result.accuracy("use", 32, "L32_kv2", "coverage"))  # no distances asked
    assert result.offer["use"][32] == {"keys_per_query": [32] * 3, "cache_rows": [32] * 3}


def test_coverage_by_composition_of_a_window():
    """Two layers of a window of 2 reach distances 0..4: of d in 4..7 the values sit at
    d - 1 = 3..6, so half of the bucket is covered."""
    model = tiny_model(
        {"class_path": "lit_sparse.SlidingWindowAttention", "init_args": {"window": 2}}
    )
    model.blocks = model.blocks[:2]
    dm = DistanceDataModule(seq_len=32, vocab_size=64, val_examples=2)
    result = evaluate_recall(model, dm, [32], ["use"])
    coverage = {n: result.accuracy("use", 32, n, "coverage") for n in result.sets}
    assert coverage == {"d2-3": 1.0, "d4-7": 0.5, "d8-15": 0.0, "d16-31": 0.0}


def test_a_length_shorter_than_the_task_allows_names_the_shortest():
    """Issue 47: ``recall RUN --lengths 3`` said ``distances [2, 1]: expected 1 <= low <=
    high``; the task now names the shortest length it evaluates."""
    dm = DistanceDataModule(seq_len=16, vocab_size=64, val_examples=4, min_examples=2)
    with pytest.raises(ConfigError) as err:
        evaluate_recall(tiny_model("dense"), dm, [16, 3])
    assert str(err.value).startswith("length 3: the distance task evaluates lengths >= 4")


def test_a_length_whose_scoring_cannot_fit_in_memory_is_refused_before_allocating(monkeypatch):
    """Issue 47: ``recall RUN --lengths 100000000`` grew to 24 GB and was killed. The
    examples and one forward at a length are estimated first (here against 4 MiB free)."""
    from lit_sparse.evaluation import recall

    dm = DistanceDataModule(seq_len=16, vocab_size=64, val_examples=4, min_examples=2)
    model = tiny_model("dense")
    need = recall.scoring_bytes(model, dm, 20_000)
    # 13 buckets of 2 examples of 20,000 int64 inputs and labels, at least
    assert need >= 13 * 2 * 20_000 * 16
    assert recall.scoring_bytes(model, dm, 16) < 4 * 2**20 < need
    monkeypatch.setattr(recall, "available_memory", lambda: 4 * 2**20)
    with pytest.raises(ConfigError) as err:
        evaluate_recall(model, dm, [16, 20_000])
    assert str(err.value).startswith(
        f"length 20,000: scoring needs at least {need / 2**20:,.0f} MiB (its held-out "
        "examples and one forward), more than the 4 MiB of memory available"
    )
    assert not dm._sets, "nothing was allocated"
