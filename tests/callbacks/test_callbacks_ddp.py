"""Under 2 CPU processes (gloo): the logged position-binned loss and the extrapolation
perplexities equal a single process over the same windows; ranks with no window of a set
neither hang nor crash; only rank 0 writes.

The run has 5 validation windows per set: rank 0 scores 3 and rank 1 scores 2 at 1x, 1 and 1
at 2x, and at 4x rank 1 has none.
"""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _zero_window_worker(rank: int, port: int, out: str) -> None:
    """Runs in each of the forked processes."""
    from lit_sparse.evaluation.position_loss import PositionBinnedNLL  # no Lightning: fast

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        metric = PositionBinnedNLL(length=4, n_bins=2)
        if rank == 0:
            metric.update(torch.tensor([[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0]]))
        values = metric.compute()  # rank 1 never updated: its zero states still reduce
        torch.save({"values": values, "windows": metric.windows}, f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_a_rank_without_windows_still_reduces(tmp_path):
    mp.start_processes(
        _zero_window_worker, args=(_free_port(), str(tmp_path)), nprocs=2, start_method="fork"
    )
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        torch.testing.assert_close(got["values"], torch.tensor([2.5, 4.5]))
        assert got["windows"] == 2


def test_ddp_logs_equal_a_single_process(tmp_path):
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    from lit_sparse.callbacks import AlphaTrajectory, LengthExtrapolation, PositionLoss
    from lit_sparse.evaluation import evaluate_lengths
    from lit_sparse.runs.analysis import load_run
    from tests.tiny_runs import (
        N_BINS,
        SEQ_LEN,
        STAGGERED,
        end_of_fit_scalars,
        scalars,
        tiny_datamodule,
        tiny_module,
        tiny_trainer,
    )

    pl.seed_everything(0, verbose=False)
    dm = tiny_datamodule()
    dm.prepare_data()
    module = tiny_module(dm.vocab_size, STAGGERED, max_steps=2)
    callbacks = [
        AlphaTrajectory(every_n_steps=1),
        PositionLoss(n_bins=N_BINS),
        LengthExtrapolation(),
        ModelCheckpoint(save_last=True),
    ]
    trainer = tiny_trainer(
        tmp_path,
        "ddp",
        callbacks,
        max_steps=2,
        val_check_interval=2,
        strategy="ddp_fork",
        devices=2,
    )
    trainer.fit(module, datamodule=dm)
    log_dir = tmp_path / "ddp" / "version_0"
    assert len(list(log_dir.glob("events.out.tfevents.*"))) == 1  # rank 1 writes no events

    # one process, the same weights, the same windows
    run = load_run(log_dir)
    assert run.step == 2
    single = tiny_datamodule()
    single.setup("validate")
    lengths = [SEQ_LEN, 2 * SEQ_LEN, 4 * SEQ_LEN]
    expected = evaluate_lengths(run.module, single, lengths)
    trainer = tiny_trainer(tmp_path, "single", [reference := PositionLoss(n_bins=N_BINS)])
    trainer.validate(run.module, datamodule=single, verbose=False)

    logged, end_of_fit = scalars(log_dir), end_of_fit_scalars(log_dir, 2)
    position = json.loads((log_dir / "position_loss.json").read_text())
    table = json.loads((log_dir / "extrapolation.json").read_text())
    for name in single.val_set_names:
        assert position["windows"][name] == 5  # both ranks' windows, reduced
        np.testing.assert_allclose(position["sets"][name], reference.latest[name], rtol=1e-4)
        np.testing.assert_allclose(
            [logged[f"val/pos_nll/{name}/b{k}"][2] for k in range(N_BINS)],
            reference.latest[name],
            rtol=1e-4,
        )
        assert [table["sets"][name][str(t)]["windows"] for t in lengths] == [5, 2, 1]
        for length in lengths:
            want = expected.ppl(name, length)
            assert table["sets"][name][str(length)]["ppl"] == pytest.approx(want, rel=1e-4)
            extrap = end_of_fit[f"extrap/ppl/{name}/{length}"][2]
            assert extrap == pytest.approx(want, rel=1e-4)
    assert sorted(logged["alpha/layer_01"]) == [0, 1, 2]
