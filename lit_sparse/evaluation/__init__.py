"""Evaluations of trained models: length extrapolation, loss by position, recall, FLOPs counts.

Imported by the callbacks and the CLI, never the reverse. Names import on first use (the
position-binned loss imports torchmetrics, which the lm-eval tasks' datasets never need)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

if TYPE_CHECKING:
    from lit_sparse.evaluation.extrapolation import ExtrapolationResult as ExtrapolationResult
    from lit_sparse.evaluation.extrapolation import evaluate_lengths as evaluate_lengths
    from lit_sparse.evaluation.extrapolation import extrapolation_lengths as extrapolation_lengths
    from lit_sparse.evaluation.extrapolation import with_new_offsets as with_new_offsets
    from lit_sparse.evaluation.flops import FlopsBreakdown as FlopsBreakdown
    from lit_sparse.evaluation.flops import flops_per_batch as flops_per_batch
    from lit_sparse.evaluation.flops import forward_flops_per_token as forward_flops_per_token
    from lit_sparse.evaluation.flops import keys_per_query as keys_per_query
    from lit_sparse.evaluation.flops import model_flops_per_token as model_flops_per_token
    from lit_sparse.evaluation.flops import pattern_keys as pattern_keys
    from lit_sparse.evaluation.position_loss import PositionBinnedNLL as PositionBinnedNLL
    from lit_sparse.evaluation.position_loss import bin_edges as bin_edges
    from lit_sparse.evaluation.recall import RecallResult as RecallResult

__getattr__, __dir__, __all__ = lazy_names(__name__)
