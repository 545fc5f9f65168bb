"""The model summary fit prints, with the FLOPs of the sparse kernels Lightning's counter misses."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelSummary, RichModelSummary
from lightning.pytorch.utilities.model_summary import ModelSummary as Summary

from lit_sparse.evaluation.flops import flops_per_batch


class SparseFlopsSummary(Summary):
    """Lightning's layer summary with one training sequence's forward FLOPs in the ``model`` row."""

    def __init__(self, model: pl.LightningModule, max_depth: int = 1) -> None:
        inner = model.model
        self._sequence_flops = flops_per_batch(
            inner, 1, inner.config.context_length, training=False
        )
        super().__init__(model, max_depth)

    @property
    def total_flops(self) -> int:
        return self._sequence_flops

    @property
    def flop_counts(self) -> dict[str, dict[Any, int]]:
        return {
            name: {"forward": self._sequence_flops} if name == "model" else {}
            for name in self.layer_names
        }


class _SparseFlops:
    """The summary callbacks' mixin: :class:`SparseFlopsSummary` at depth 1, Lightning's below."""

    def _summary(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> Summary:
        inner = getattr(pl_module, "model", None)
        if self._max_depth != 1 or not hasattr(inner, "config"):
            return super()._summary(trainer, pl_module)
        return SparseFlopsSummary(pl_module, max_depth=self._max_depth)


class SparseModelSummary(_SparseFlops, ModelSummary):
    """Lightning's ModelSummary with the sparse FLOPs count."""


class SparseRichModelSummary(_SparseFlops, RichModelSummary):
    """Lightning's RichModelSummary with the sparse FLOPs count."""


_SPARSE = {ModelSummary: SparseModelSummary, RichModelSummary: SparseRichModelSummary}


def use_sparse_flops_summary(trainer: pl.Trainer) -> None:
    """Give each of Lightning's own model summary callbacks the sparse FLOPs count."""
    for i, callback in enumerate(trainer.callbacks):
        if (sparse := _SPARSE.get(type(callback))) is not None:
            trainer.callbacks[i] = sparse(callback._max_depth, **callback._summarize_kwargs)
