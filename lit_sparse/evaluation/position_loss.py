"""Loss by position within the window, binned: a bin's value is the mean of its positions' mean
NLL (docs/paper.md section 5), edges ``int(linspace(0, P, B + 1))`` over P predictions. The
states are sums, so they reduce across processes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric

from lit_sparse.errors import ConfigError


def bin_edges(n_positions: int, n_bins: int = 8) -> list[int]:
    """Edges ``int(linspace(0, n_positions, n_bins + 1))``; bin k: edges[k] <= p < edges[k + 1]."""
    if n_bins < 1 or n_positions < n_bins:
        raise ConfigError(f"n_bins={n_bins}: expected 1 <= n_bins <= positions ({n_positions})")
    return [int(e) for e in np.linspace(0, n_positions, n_bins + 1)]


class PositionBinnedNLL(Metric):
    """Per-position NLL sums and counts over windows of ``length`` predictions; ``compute()``
    returns the ``n_bins`` bin values (nan for a bin no window reached)."""

    full_state_update = False
    higher_is_better = False

    def __init__(self, length: int, n_bins: int = 8, **kwargs: Any):
        super().__init__(**kwargs)
        self.length, self.n_bins = int(length), int(n_bins)
        self.edges = bin_edges(self.length, self.n_bins)
        self.add_state(
            "nll_sum", torch.zeros(self.length, dtype=torch.float64), dist_reduce_fx="sum"
        )
        self.add_state("count", torch.zeros(self.length, dtype=torch.long), dist_reduce_fx="sum")
        self.windows = 0
        """Windows of the last ``compute()`` (all processes)."""

    def update(self, nll: Tensor) -> None:
        """``nll`` (B, T): the NLL of every prediction of B windows."""
        if nll.ndim != 2 or nll.shape[-1] != self.length:
            raise ConfigError(f"nll: expected shape (B, {self.length}), got {tuple(nll.shape)}")
        self.nll_sum += nll.detach().double().sum(0)
        self.count += nll.shape[0]

    def per_position(self) -> Tensor:
        """The mean NLL at each position (T,), from the current (local) states."""
        means = self.nll_sum / self.count.clamp(min=1)
        return torch.where(self.count > 0, means, torch.full_like(means, math.nan))

    def compute(self) -> Tensor:
        # inside compute the states are the sums over all processes
        self.windows = int(self.count.max())
        means = self.per_position()
        return torch.stack(
            [means[a:b].mean() for a, b in zip(self.edges, self.edges[1:], strict=False)]
        ).float()
