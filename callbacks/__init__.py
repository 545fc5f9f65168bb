"""Callbacks of lit_sparse runs, installed as ``lit_sparse.callbacks`` from the repository's
top-level ``callbacks/`` folder (configs name them ``lit_sparse.callbacks.<Name>``). They only
observe and log (TensorBoard scalars and images, JSON and Markdown in the run directory):
:class:`AlphaTrajectory` (every layer's alpha over optimizer steps), :class:`PositionLoss`
(validation NLL in bins of position), :class:`SparseThroughputMonitor` (Lightning's
ThroughputMonitor with sparse-aware FLOPs), :class:`TaskAccuracy` (LEGO and RULER variable
tracking at each validation) and, after fit, :class:`LengthExtrapolation` (perplexity) and
:class:`RecallEvaluation` (recall accuracy) at multiples of the training length.
"""

from lit_sparse.callbacks.alpha import AlphaTrajectory
from lit_sparse.callbacks.extrapolation import LengthExtrapolation
from lit_sparse.callbacks.position_loss import PositionBinnedNLL, PositionLoss, bin_edges
from lit_sparse.callbacks.recall import RecallEvaluation
from lit_sparse.callbacks.tasks import TaskAccuracy
from lit_sparse.callbacks.throughput import SparseThroughputMonitor

__all__ = [
    "AlphaTrajectory",
    "LengthExtrapolation",
    "PositionBinnedNLL",
    "PositionLoss",
    "RecallEvaluation",
    "SparseThroughputMonitor",
    "TaskAccuracy",
    "bin_edges",
]
