"""Callbacks of lit_sparse runs; configs name them ``callbacks.<Name>``. They only observe
and log (TensorBoard scalars and images, JSON and Markdown in the run directory).

- :class:`AlphaTrajectory`: every layer's alpha over optimizer steps.
- :class:`PositionLoss`: validation NLL in bins of position within the window.
- :class:`LengthExtrapolation`: perplexity at multiples of the training length after fit.
- :class:`SparseThroughputMonitor`: Lightning's ThroughputMonitor with sparse-aware FLOPs.
- :class:`TaskAccuracy`: LEGO and RULER variable tracking (forced choice) at each validation.
"""

from callbacks.alpha import AlphaTrajectory
from callbacks.extrapolation import LengthExtrapolation
from callbacks.position_loss import PositionBinnedNLL, PositionLoss, bin_edges
from callbacks.tasks import TaskAccuracy
from callbacks.throughput import SparseThroughputMonitor

__all__ = [
    "AlphaTrajectory",
    "LengthExtrapolation",
    "PositionBinnedNLL",
    "PositionLoss",
    "SparseThroughputMonitor",
    "TaskAccuracy",
    "bin_edges",
]
