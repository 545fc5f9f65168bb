"""What every synthetic task shares (lit_sparse.tasks.synthetic): a generator's bad output
(issue 57, TB3-TB6 and a task that labels nothing) is one line naming the task and
``train_batch``, checked on the stream's first batch, and by ``fit`` before its run folder;
seeds reproduce and differ, bad arguments are one line naming them; the recall DataModules'
stream is fresh, reproducible and resumed where it stopped, their held-out sets do not depend
on the run's seed, each rank validates its share without padding, and a run config gives back
its task."""

from __future__ import annotations

import itertools
import math
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from lit_sparse_copy import SegmentCopyDataModule

from lit_sparse.errors import ConfigError
from lit_sparse.tasks import (
    IGNORE_INDEX,
    DistanceDataModule,
    MQARDataModule,
    distance_retrieval,
    multiquery_ar,
    recall_data_from_config,
)

ROOT = Path(__file__).resolve().parents[2]
L, KV, V = 64, 4, 512  # an MQAR setting


class FaultyCopy(SegmentCopyDataModule):
    """Segment copy whose training batches break in one way (``fault``)."""

    def __init__(self, fault: str = "none", **kwargs) -> None:
        super().__init__(**kwargs)
        self.fault = fault

    def train_batch(self, n: int, seed: tuple[int, ...]):
        x, y = super().train_batch(n, seed)
        if self.fault == "shapes":
            return x, y[:, 1:]
        if self.fault == "ids":
            x[0, 3] = self.vocab_size + 5
        elif self.fault == "labels":
            y[0, -2] = self.vocab_size
        elif self.fault == "float":
            x = x.float()
        elif self.fault == "unlabelled":
            y = torch.full_like(y, IGNORE_INDEX)
        return x, y


FAULTS = {
    "shapes": "inputs of shape (4, 32) and labels of shape (4, 31); expected both "
    "(data.batch_size, data.seq_len) = (4, 32)",
    "ids": "an input id of 69; expected ids in [0, 64)",
    "labels": "a label of 64; expected labels in [0, 64) or -100",
    "float": "inputs of torch.float32 and labels of torch.int64",
    "unlabelled": "labels all -100",
}


def faulty(fault: str) -> FaultyCopy:
    return FaultyCopy(fault, seq_len=32, segment=4, vocab_size=64, batch_size=4)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_bad_training_batch_is_one_line_naming_the_task_and_train_batch(fault):
    task = faulty(fault)
    for check in (task.check_train_batch, lambda: next(iter(task.train_dataloader()))):
        with pytest.raises(ConfigError) as info:
            check()
        line = str(info.value)
        assert "\n" not in line and FAULTS[fault] in line
        assert line.startswith("task 'FaultyCopy': train_batch(4, (0, 0, 0)) gave ")


def test_a_good_task_passes_the_check_and_its_stream_is_unchanged():
    task = faulty("none")
    task.check_train_batch()
    x, y = next(iter(task.train_dataloader()))
    assert torch.equal(x, task.train_batch(4, (0, 0, 0))[0])


@pytest.mark.slow  # starts fit (refused before training)
@pytest.mark.parametrize("fault", ["shapes", "float"])
def test_fit_refuses_a_bad_generator_in_one_line_before_its_run_folder(
    fault, tmp_path, monkeypatch, capsys
):
    from lit_sparse.cli import main

    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    monkeypatch.chdir(tmp_path)
    code = main([
        "fit", "--config", str(ROOT / "configs" / "sliding_window.yaml"),
        "--data.class_path", f"{__name__}.FaultyCopy", "--data.init_args.fault", fault,
        "--config", str(ROOT / "tests" / "configs" / "tiny_recall.yaml"),
        "--data.init_args.seq_len", "32", "--data.init_args.segment", "4",
        "--data.init_args.vocab_size", "64", "--trainer.accelerator", "cpu",
        "--trainer.logger.init_args.save_dir", str(tmp_path / "runs"),
    ])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: task 'FaultyCopy': train_batch(4, (42, 0, 0))")
    assert FAULTS[fault] in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # no run folder left behind


def test_seeds_reproduce_and_differ():
    a = multiquery_ar(8, L, KV, V, seed=5)
    b = multiquery_ar(8, L, KV, V, seed=5)
    c = multiquery_ar(8, L, KV, V, seed=6)
    d = multiquery_ar(8, L, KV, V, seed=(5, 0, 1))
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[0], d[0])
    e = distance_retrieval(8, 32, 5, 64, seed=5)
    assert torch.equal(e[0], distance_retrieval(8, 32, 5, 64, seed=5)[0])
    assert not torch.equal(e[0], distance_retrieval(8, 32, 5, 64, seed=6)[0])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: multiquery_ar(4, L, KV, V, power_a=math.inf), "power_a=inf: expected a finite"),
        (lambda: multiquery_ar(4, L, KV, V, power_a=1e6), "power_a=1000000.0: too large for"),
        (lambda: multiquery_ar(4, L, KV, V, seed=1.5), "seed=1.5: expected an integer >= 0"),
        (lambda: distance_retrieval(4, 32, 2.7, 64), "distances=2.7: expected whole numbers"),
        (lambda: distance_retrieval(4, 32, math.nan, 64), "distances=nan: expected whole"),
        (
            lambda: distance_retrieval(4, 32, [2, 3, 4], 64),
            "distances: 3 values for num_examples=4; give one distance, or one per example",
        ),
    ],
    ids=["power-inf", "power-1e6", "seed-float", "distance-float", "distance-nan", "length"],
)
def test_bad_arguments_are_one_line_naming_them(make, message):
    """Issue 36: power_a=inf or 1e6 drew from NaN weights, distances=2.7 became 2; the rest
    were numpy's errors or a TypeError."""
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        make()
    assert "\n" not in str(err.value)


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
