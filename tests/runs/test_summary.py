"""What the Lightning commands print about the held-out sets: one table, a row per metric, a
column per set named by the set, the mean over sets last."""

from __future__ import annotations

import torch

from lit_sparse.runs.summary import held_out_table


def test_one_row_per_metric_one_column_per_set():
    # trainer.validate's list: one mapping per loader, each holding every set's values
    per_loader = {
        "val/loss/shakespeare": 5.3551,
        "val/ppl/shakespeare": 211.694,
        "val/loss/math": 1.52983,
        "val/ppl/math": 4.6174,
        "val/loss": 3.44246,
        "val/ppl": 31.2628,  # exp(val/loss)
    }
    table = held_out_table([per_loader, dict(per_loader)], "val", ["shakespeare", "math"])
    assert table.splitlines() == [
        "| metric | shakespeare | math | mean over sets |",
        "|---|---:|---:|---:|",
        "| val/loss | 5.3551 | 1.5298 | 3.4425 |",
        "| val/ppl | 211.69 | 4.62 | 31.26 |",
        "val/ppl, mean over sets: exp(val/loss), the perplexity of the mean loss (not the "
        "mean of the sets' perplexities)",
    ]


def test_callback_metrics_tensors_and_other_tags():
    """trainer.callback_metrics holds tensors, and tags of other prefixes or shapes, which
    stay out; a set without a value leaves its cell empty; none at all: no table."""
    metrics = {
        "val/ppl/a": torch.tensor(3.0),
        "val/ppl": torch.tensor(2.5),
        "val/loss/b": torch.tensor(0.5),
        "val/pos_nll/a/b0": torch.tensor(1.0),
        "train/loss": torch.tensor(9.0),
        "step": 4.0,
    }
    table = held_out_table(metrics, "val", ["a", "b"])
    assert table.splitlines()[0] == "| metric | a | b | mean over sets |"
    assert "| val/ppl | 3.00 |  | 2.50 |" in table and "| val/loss |  | 0.5000 |  |" in table
    assert "pos_nll" not in table and "train" not in table
    assert held_out_table({"train/loss": 1.0}, "val", ["a"]) is None
    assert held_out_table({"val/ppl/a": float("nan")}, "val", ["a"]) is None
