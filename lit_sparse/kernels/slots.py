"""Which keys a query attends to, shared by every sparse kernel."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class KeySlots:
    """One layer's key slots at one length; query ``i`` attends to

    - exact distances ``d``: key ``i - d`` when ``i >= d``;
    - interpolated rungs ``(lo, frac)``: ``(1 - frac) * row[i - lo] + frac * row[max(i - lo - 1,
      0)]`` as key and value, when the rung is valid and ``i >= lo`` (``frac`` may carry a grad);
    - absolute keys ``block_keys[i // block_size]`` (-1: none), when ``i - key >=
      min_abs_distance`` (causal, and outside the window: no key counted twice)."""

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

    def read_at(self, length: int, owner: str) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
        """What a kernel reads at ``length``, on the CPU after :meth:`check` (``built=False``):
        the exact distances < length, the indices of the valid rungs with lo < length (None
        without rungs), their lo and their frac (detached float64)."""
        self.check(length, owner, built=False)
        exact = self.distances.to("cpu", torch.long)
        exact = exact[exact < length]
        if not self.n_rungs:
            empty = torch.zeros(0, dtype=torch.long)
            return exact, None, empty, empty.double()
        lo = self.rung_lo.detach().to("cpu", torch.long)
        keep = torch.nonzero(self.rung_valid.to("cpu") & (lo < length)).flatten()
        return exact, keep, lo[keep], self.rung_frac.detach().to("cpu", torch.float64)[keep]

    def check(self, length: int, owner: str = "KeySlots", built: bool = True) -> None:
        """ValueError naming ``owner`` and the bad value for a slot before position 0 or after
        its query, or a missing block of keys; ``built`` (a pattern's slots, not a kernel's
        guard): also distances distinct, ascending from 0, and slots below ``reach``/``length``."""
        problem = self._problem(length, built)
        if problem:
            raise ValueError(f"{owner}: slots at length {length}: {problem}")

    def _problem(self, length: int, built: bool) -> str | None:
        distances = self.distances
        if distances.dim() != 1 or distances.numel() == 0 or distances.is_floating_point():
            return f"distances must be a non-empty 1-D integer tensor, got {_shown(distances)}"
        values = distances.detach().to("cpu", torch.long)
        if int(values.min()) < 0:
            return f"distance {int(values.min())} is negative (a key after its query)"
        if built and (int(values[0]) != 0 or bool((values[1:] <= values[:-1]).any())):
            return f"distances must be distinct and ascending from 0, got {_shown(values)}"
        if built and self.reach < int(values[-1]) + 1:
            return f"reach={self.reach} must be above the largest distance {int(values[-1])}"
        if self.n_rungs:
            lo = self.rung_lo.detach().to("cpu", torch.long)
            sizes = {tuple(lo.shape), tuple(self.rung_frac.shape), tuple(self.rung_valid.shape)}
            if lo.dim() != 1 or len(sizes) != 1:
                return "rung_lo, rung_frac and rung_valid must be 1-D tensors of one size"
            if int(lo.min()) < 0:
                return f"rung lo {int(lo.min())} is negative (a key after its query)"
            if built and int(lo.max()) >= self.reach:
                return f"rung lo {int(lo.max())} must be below reach={self.reach}"
        if self.block_size < 1:
            return f"block_size={self.block_size} must be >= 1"
        if self.block_keys is not None:
            return self._absolute_problem(length, built)
        return None

    def _absolute_problem(self, length: int, built: bool) -> str | None:
        keys = self.block_keys.detach()
        if keys.dim() != 2 or keys.is_floating_point():
            return f"block_keys must be a 2-D integer tensor, got {_shown(keys)}"
        if self.min_abs_distance < 0:
            return f"min_abs_distance={self.min_abs_distance} must be >= 0 (a key after its query)"
        blocks = -(-length // self.block_size)
        if keys.shape[0] < blocks:
            return (
                f"block_keys has {keys.shape[0]} blocks; {length} positions in blocks of "
                f"{self.block_size} need {blocks}"
            )
        used = keys[:blocks].to("cpu", torch.long)
        if used.numel() and int(used.min()) < -1:
            return f"absolute key {int(used.min())} is negative (-1 means none)"
        if built and used.numel() and int(used.max()) >= length:
            return f"absolute key {int(used.max())} is outside the sequence (0..{length - 1})"
        return None


def blend_rungs(rows: Tensor, n_exact: int, n_rungs: int, frac: Tensor | None) -> Tensor:
    """Per-slot values from per-row ones laid out [exact | lower taps | upper taps | others]:
    a rung's ``lo + frac * (hi - lo)``."""
    m, r = n_exact, n_rungs
    if not r:
        return rows
    lo, hi = rows[..., m : m + r], rows[..., m + r : m + 2 * r]
    return torch.cat([rows[..., :m], lo + frac * (hi - lo), rows[..., m + 2 * r :]], dim=-1)


def split_rungs(values: Tensor, n_exact: int, n_rungs: int, frac: Tensor | None) -> Tensor:
    """Per-row values from per-slot ones (:func:`blend_rungs`'s layout): a rung's ``x`` as
    ``(1 - frac) * x`` on its lower tap and ``frac * x`` on its upper one."""
    m, r = n_exact, n_rungs
    if not r:
        return values
    rung = values[..., m : m + r]
    return torch.cat([values[..., :m], rung * (1 - frac), rung * frac, values[..., m + r :]], -1)


def _shown(x: Tensor, limit: int = 8) -> str:
    values = x.flatten().tolist()
    more = f", ... ({len(values)} values)" if len(values) > limit else ""
    return f"{x.dtype} {list(x.shape)} [{', '.join(map(str, values[:limit]))}{more}]"


def exact_slots(distances: list[int], device: torch.device | str | None = None) -> KeySlots:
    """Slots for a static set of relative distances."""
    return KeySlots(
        distances=torch.tensor(distances, dtype=torch.long, device=device),
        reach=max(distances) + 1,
    )


def rung_grad(kept: Tensor, keep: Tensor | None, n_rungs: int, dtype: torch.dtype) -> Tensor | None:
    """frac's gradient (n_rungs,) from ``kept``, that of the rungs ``keep`` indexes (None: no
    rungs, no gradient); zero elsewhere."""
    if keep is None:
        return None
    grad = torch.zeros(n_rungs, dtype=kept.dtype)
    grad[keep] = kept
    return grad.to(dtype)
