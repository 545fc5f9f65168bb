"""Validation metrics whose sums reduce across processes: token NLL, labelled accuracy."""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric

IGNORE_INDEX = -100
"""The label of a position where nothing is asked (``F.cross_entropy``'s ignore_index)."""


class TokenNLL(Metric):
    """Token-weighted mean negative log-likelihood; sum and count reduce across processes."""

    full_state_update = False

    def __init__(self):
        super().__init__()
        self.add_state("total", torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, nll: Tensor) -> None:
        self.total += nll.detach().double().sum()
        self.count += nll.numel()

    def compute(self) -> Tensor:
        return (self.total / self.count.clamp(min=1)).float()


class RecallAccuracy(Metric):
    """Accuracy at labelled positions: ``accuracy`` the per-example share right, averaged
    (MQAR's definition); ``exact`` the share of examples all right. Unlabelled examples skip."""

    full_state_update = False

    def __init__(self):
        super().__init__()
        self.add_state("total", torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("exact", torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("examples", torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, correct: Tensor, labelled: Tensor) -> None:
        """``correct``, ``labelled``: (B, T) booleans."""
        asked = labelled.sum(-1)  # (B,)
        hits = (correct & labelled).sum(-1)
        keep = asked > 0
        self.total += (hits[keep].double() / asked[keep].double()).sum()
        self.exact += (hits[keep] == asked[keep]).sum()
        self.examples += keep.sum()

    def compute(self) -> dict[str, Tensor]:
        examples = self.examples.clamp(min=1).double()
        return {
            "accuracy": (self.total / examples).float(),
            "exact": (self.exact.double() / examples).float(),
            "examples": self.examples.clone(),
        }


def labelled_counts(logits: Tensor, mask: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """(correct, mask) (B, T) for RecallAccuracy: ``logits`` (N, V), ``targets`` (N,) at mask."""
    correct = torch.zeros_like(mask)
    correct[mask] = logits.argmax(-1) == targets
    return correct, mask
