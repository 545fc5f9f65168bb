"""The model summary fit prints, with a true FLOPs column.

Lightning's summary measures FLOPs by running ``example_input_array`` under torch's flop
counter; the module has none (and the counter would not see the sparse kernels' work), so
Lightning prints ``FLOPs 0`` for every layer and ``Total FLOPs: 0``. Here the count is
:func:`lit_sparse.evaluation.flops.flops_per_batch`: the forward of one training sequence
(``context_length`` tokens), sparse attention counted as the key slots each query computes.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelSummary, RichModelSummary
from lightning.pytorch.utilities.model_summary import ModelSummary as Summary

from lit_sparse.evaluation.flops import flops_per_batch

__all__ = [
    "SparseFlopsSummary",
    "SparseModelSummary",
    "SparseRichModelSummary",
    "use_sparse_flops_summary",
]


class SparseFlopsSummary(Summary):
    """Lightning's layer summary of a LitLanguageModel with the forward FLOPs of one
    training sequence in the ``model`` row and the total (the metrics' rows compute none)."""

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
    """The summary callbacks' mixin: their table is a :class:`SparseFlopsSummary` at the
    default depth (1: the module's children), Lightning's own below it."""

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
    """Replace each model summary callback of exactly Lightning's classes (the default one,
    or one a config added) by the same with the sparse FLOPs count."""
    for i, callback in enumerate(trainer.callbacks):
        sparse = _SPARSE.get(type(callback))
        if sparse is not None:
            trainer.callbacks[i] = sparse(callback._max_depth, **callback._summarize_kwargs)
