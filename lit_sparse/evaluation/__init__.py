"""Evaluations of trained models: length extrapolation, loss by position, FLOPs counts.

Imported by the callbacks and the CLI; nothing here imports either.
"""

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
