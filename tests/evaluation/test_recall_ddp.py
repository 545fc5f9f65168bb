"""Recall accuracy under 2 CPU processes (gloo): the metric's reduction equals the hand-computed
value over both ranks' examples (a rank with none included), and a two-process fit logs and
writes the accuracy a single process computes from the full logits on the same examples.

The fit has 7 held-out examples: rank 0 validates 4 and rank 1 3 (no padding)."""

from __future__ import annotations

import json
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metric_worker(rank: int, port: int, out: str) -> None:
    from lit_sparse.metrics import IGNORE_INDEX, RecallAccuracy

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=3)
    try:
        metric = RecallAccuracy()
        labels = torch.full((2, 4), IGNORE_INDEX)
        if rank == 0:  # 3 of 4 right; 1 of 2 right
            labels[0] = torch.tensor([1, 2, 3, 4])
            labels[1, :2] = torch.tensor([5, 6])
            correct = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
            metric.update(correct, labels != IGNORE_INDEX)
        elif rank == 1:  # 1 of 1 right
            labels[0, 3] = 7
            metric.update(torch.ones(2, 4, dtype=torch.bool), labels != IGNORE_INDEX)
        result = metric.compute()  # rank 2 never updated: its zero states still reduce
        torch.save({k: v.item() for k, v in result.items()}, f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_the_metric_reduces_over_every_rank(tmp_path):
    mp.start_processes(
        _metric_worker, args=(_free_port(), str(tmp_path)), nprocs=3, start_method="fork"
    )
    for rank in range(3):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got["accuracy"] == pytest.approx((3 / 4 + 1 / 2 + 1) / 3)
        assert got["exact"] == pytest.approx(1 / 3)
        assert got["examples"] == 3


def test_two_process_fit_logs_the_single_process_accuracy(tmp_path):
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    from lit_sparse.callbacks import RecallEvaluation
    from lit_sparse.evaluation.recall import evaluate_recall
    from lit_sparse.metrics import IGNORE_INDEX
    from lit_sparse.runs.analysis import load_run
    from lit_sparse.tasks import DistanceDataModule
    from tests.tiny_runs import end_of_fit_scalars, scalars, tiny_module, tiny_trainer

    pl.seed_everything(0, verbose=False)
    dm = DistanceDataModule(seq_len=32, vocab_size=64, batch_size=4, val_examples=7)
    fib = {"class_path": "fibonacci", "init_args": {"window": 2, "n_rungs": 9}}
    module = tiny_module(dm.vocab_size, fib, max_steps=2)
    callbacks = [RecallEvaluation(multiples=[1, 4]), ModelCheckpoint(save_last=True)]
    trainer = tiny_trainer(
        tmp_path, "ddp", callbacks, max_steps=2, val_check_interval=2,
        strategy="ddp_fork", devices=2,
    )  # fmt: skip
    trainer.fit(module, datamodule=dm)
    log_dir = tmp_path / "ddp" / "version_0"

    run = load_run(log_dir)
    assert run.step == 2
    single = DistanceDataModule(seq_len=32, vocab_size=64, val_examples=7)
    expected = evaluate_recall(run.module, single, [32, 128], ["use", "drop"])
    table = json.loads((log_dir / "recall.json").read_text())
    logged, end_of_fit = scalars(log_dir), end_of_fit_scalars(log_dir, 2)
    with torch.no_grad():
        for name, (x, y) in single.recall_sets().items():
            asked = y != IGNORE_INDEX
            right = (run.module.model(x).argmax(-1) == y) & asked
            accuracy = (right.sum(-1).double() / asked.sum(-1)).mean().item()
            assert logged[f"val/acc/{name}"][2] == pytest.approx(accuracy, abs=1e-6)
            assert table["scores"]["use"]["32"][name]["accuracy"] == pytest.approx(accuracy)
    for policy in ("use", "drop"):
        for length in (32, 128):
            for name, cell in table["scores"][policy][str(length)].items():
                assert cell["examples"] == single.examples_at(length)  # both ranks', reduced
                want = expected.accuracy(policy, length, name)
                assert cell["accuracy"] == pytest.approx(want)
                logged_at_end = end_of_fit[f"recall/{policy}/acc/{name}/{length}"]
                assert logged_at_end[2] == pytest.approx(want)
