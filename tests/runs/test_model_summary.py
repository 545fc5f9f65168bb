"""The model summary fit prints (lit_sparse/runs/model_summary.py): the sparse kernels' FLOPs
that Lightning's counter misses, in the ``model`` row and the total, and Lightning's own
summary callbacks swapped for ours with their options kept."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
from lightning.pytorch.callbacks import ModelSummary, RichModelSummary
from lightning.pytorch.utilities.model_summary import ModelSummary as LightningSummary

from lit_sparse.evaluation.flops import flops_per_batch
from lit_sparse.module import LitLanguageModel
from lit_sparse.runs.model_summary import (
    SparseFlopsSummary,
    SparseModelSummary,
    SparseRichModelSummary,
    use_sparse_flops_summary,
)
from tests.shapes import tiny_config

TINY = tiny_config()
"""336 parameters."""


@pytest.fixture(scope="module")
def module() -> LitLanguageModel:
    return LitLanguageModel(TINY, "fibonacci")


def test_the_model_row_and_the_total_hold_one_sequences_forward_flops(module):
    summary = SparseFlopsSummary(module)
    flops = flops_per_batch(module.model, 1, 16, training=False)
    assert flops > 0 and summary.total_flops == flops
    assert summary.flop_counts["model"] == {"forward": flops}
    assert all(counts == {} for name, counts in summary.flop_counts.items() if name != "model")


@pytest.mark.parametrize(
    ("lightnings", "ours"),
    [(ModelSummary, SparseModelSummary), (RichModelSummary, SparseRichModelSummary)],
)
def test_lightnings_summary_callbacks_are_swapped_keeping_their_depth(lightnings, ours, module):
    trainer = pl.Trainer(
        callbacks=[lightnings(max_depth=3)], logger=False, enable_checkpointing=False,
        enable_progress_bar=False,
    )  # fmt: skip
    use_sparse_flops_summary(trainer)
    (swapped,) = [c for c in trainer.callbacks if isinstance(c, lightnings)]
    assert type(swapped) is ours and swapped._max_depth == 3
    assert type(swapped._summary(trainer, module)) is LightningSummary  # deeper: Lightning's
    swapped._max_depth = 1
    assert type(swapped._summary(trainer, module)) is SparseFlopsSummary
