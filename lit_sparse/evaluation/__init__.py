"""Evaluations of trained models: length extrapolation, loss by position, recall, FLOPs counts.

Imported by the callbacks and the CLI, never the reverse. Names import on first use (the
position-binned loss imports torchmetrics, which the lm-eval tasks' datasets never need)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

_PUBLIC = {
    "ExtrapolationResult": "lit_sparse.evaluation.extrapolation",
    "evaluate_lengths": "lit_sparse.evaluation.extrapolation",
    "extrapolation_lengths": "lit_sparse.evaluation.extrapolation",
    "with_new_offsets": "lit_sparse.evaluation.extrapolation",
    "FlopsBreakdown": "lit_sparse.evaluation.flops",
    "flops_per_batch": "lit_sparse.evaluation.flops",
    "forward_flops_per_token": "lit_sparse.evaluation.flops",
    "keys_per_query": "lit_sparse.evaluation.flops",
    "model_flops_per_token": "lit_sparse.evaluation.flops",
    "PositionBinnedNLL": "lit_sparse.evaluation.position_loss",
    "bin_edges": "lit_sparse.evaluation.position_loss",
}
"""public name -> the module it comes from."""

__all__ = [
    "ExtrapolationResult",
    "FlopsBreakdown",
    "PositionBinnedNLL",
    "bin_edges",
    "evaluate_lengths",
    "extrapolation_lengths",
    "flops_per_batch",
    "forward_flops_per_token",
    "keys_per_query",
    "model_flops_per_token",
    "with_new_offsets",
]

if TYPE_CHECKING:
    from lit_sparse.evaluation.extrapolation import (
        ExtrapolationResult,
        evaluate_lengths,
        extrapolation_lengths,
        with_new_offsets,
    )
    from lit_sparse.evaluation.flops import (
        FlopsBreakdown,
        flops_per_batch,
        forward_flops_per_token,
        keys_per_query,
        model_flops_per_token,
    )
    from lit_sparse.evaluation.position_loss import PositionBinnedNLL, bin_edges


__getattr__, __dir__ = lazy_names(__name__, _PUBLIC)
