"""The description of which keys a query attends to, shared by every sparse kernel."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class KeySlots:
    """Per-query key slots of one layer at one length; the same for every query but position.

    Query ``i`` attends to three kinds of slots:

    - exact distances ``d``: key ``i - d`` when ``i >= d``;
    - interpolated rungs ``(lo, frac)``: a virtual key and value
      ``(1 - frac) * row[i - lo] + frac * row[max(i - lo - 1, 0)]``, valid when the rung is
      valid and ``i >= lo``; ``frac`` may carry a gradient. At the rung's first row (i = lo)
      the upper tap's row -1 does not exist and the nearest row, 0, is read: both taps read
      row 0, so that row's key is row 0 whatever ``frac`` is (no gradient to ``frac``);
    - absolute keys per block of queries: ``block_keys[i // block_size]``, -1 for none,
      valid when ``i - key >= min_abs_distance`` (this keeps them causal and out of the
      window, so no key is counted twice).
    """

    distances: Tensor
    """(M,) int64, distinct, ascending, starting at 0 (every query sees itself)."""
    reach: int
    """An upper bound on ``distance + 1`` over all relative slots (rows of zero padding)."""
    rung_lo: Tensor | None = None
    """(R,) int64 lower tap distance of each interpolated rung."""
    rung_frac: Tensor | None = None
    """(R,) float weight of the upper tap (distance lo + 1)."""
    rung_valid: Tensor | None = None
    """(R,) bool: whether the rung is used at all."""
    block_keys: Tensor | None = None
    """(n_blocks, A) int64 absolute key positions per block of queries, -1 for none."""
    block_size: int = 1
    min_abs_distance: int = 0

    @property
    def n_rungs(self) -> int:
        return 0 if self.rung_lo is None else int(self.rung_lo.numel())

    @property
    def n_absolute(self) -> int:
        return 0 if self.block_keys is None else int(self.block_keys.shape[1])

    @property
    def keys_per_query(self) -> int:
        """Slots per query (an upper bound on the keys one query attends to)."""
        return int(self.distances.numel()) + self.n_rungs + self.n_absolute


def exact_slots(distances: list[int], device: torch.device | str | None = None) -> KeySlots:
    """Slots for a static set of relative distances."""
    return KeySlots(
        distances=torch.tensor(distances, dtype=torch.long, device=device),
        reach=max(distances) + 1,
    )
